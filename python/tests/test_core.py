"""The thin layer: runtime, model, session, batch, logits (equal to
hetero-run's, without a copy), generation (equal to hetero-run's)."""
from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

import hetero
from conftest import build_dir


def hetero_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(build_dir() / "hetero-run"), "-t", "2", *args], capture_output=True, check=True)


def test_runtime_devices_stats_and_trace(runtime, tiny, tmp_path):
    devs = runtime.devices()
    assert devs and devs[0].family_name == "cpu" and devs[0].compute_units >= 1
    assert runtime.topology().cores >= 1
    assert runtime.absence_reason("cpu") is None
    runtime.reset_stats()
    trace = tmp_path / "trace.json"
    runtime.trace_start(str(trace))
    with tiny.session() as s:
        s.eval([1, 2, 3])
    runtime.trace_stop()
    st = runtime.stats()
    assert st.tasks_done > 0 and st.tasks_failed == 0
    assert runtime.device_stats(0).tasks > 0
    events = json.loads(trace.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    assert any(e.get("ph") == "X" for e in events)


def test_model_info_stats_plan(tiny):
    i = tiny.info
    assert (i.arch, i.n_vocab, i.n_ctx) == ("llama", 258, 256)
    assert tiny.stats().sessions_open == 0
    plan = tiny.plan()
    assert any(t.op == "matmul" for t in plan) and all(t.reason for t in plan)
    assert "llama" in hetero.architectures()


def test_tokenize_detokenize(tiny):
    ids = tiny.tokenize("Hello, world")
    assert ids[0] == tiny.info.bos and len(ids) == 13
    assert tiny.detokenize(ids[1:]) == b"Hello, world"
    # Bytes need not be UTF-8: invalid ones read as U+FFFD, as llama.cpp reads them.
    assert tiny.tokenize(b"\xff\xfe", add_special=False) == tiny.tokenize("\ufffd\ufffd", add_special=False)
    assert tiny.detokenize([tiny.info.bos]) == b""
    assert tiny.is_eog(tiny.info.eos) and not tiny.is_eog(65)


def test_smollm2_special_tokens(smollm2):
    m = smollm2.model
    ids = m.tokenize("<|im_start|>user", add_special=False, parse_special=True)
    assert len(ids) == 2 and m.detokenize(ids) == b"user" and m.detokenize(ids, special=True) == b"<|im_start|>user"


def test_logits_are_a_view_of_hetero_memory(tiny):
    with tiny.session() as s:
        s.eval(tiny.tokenize("abc"))
        v = s.logits()
        assert v.dtype == np.float32 and v.shape == (258,) and not v.flags.writeable and not v.flags.owndata
        w = s.logits()
        assert v.__array_interface__["data"][0] == w.__array_interface__["data"][0]  # the same memory, no copy
        with pytest.raises(hetero.errors.LogitsInUse) as e:
            s.eval([5])
        assert isinstance(e.value, BufferError) and e.value.status == hetero.errors.ERR_STATE
        with pytest.raises(hetero.errors.LogitsInUse):
            s.close()
        keep = np.array(v)
        del v, w
        s.eval([5])  # no view left: allowed
        assert not np.array_equal(keep, s.logits())


def _logits_file(path, n, n_vocab):
    return np.fromfile(path, dtype="<f4").reshape(n, n_vocab)


@pytest.mark.parametrize("which", ["tiny", "smollm2"])
def test_logits_equal_hetero_run(which, request, tmp_path):
    if which == "tiny":
        m, path = request.getfixturevalue("tiny"), request.getfixturevalue("tiny_path")
    else:
        m, path = request.getfixturevalue("smollm2").model, request.getfixturevalue("smollm2_path")
    ids = m.tokenize("The quick brown fox jumps over the lazy dog")
    out = tmp_path / "logits.f32"
    hetero_run("-m", path, "-c", str(m.n_ctx), "--tokens", ",".join(map(str, ids)), "--logits", str(out))
    ref = _logits_file(out, len(ids), m.n_vocab)
    with m.session() as s:
        s.eval(ids, logits_all=True)
        got = np.stack([np.array(s.logits(i)) for i in range(len(ids))])
    assert np.array_equal(got, ref), f"max difference {np.abs(got - ref).max()}"


def test_batch_eval_equals_sessions_alone(tiny):
    a, b = tiny.tokenize("first prompt"), tiny.tokenize("the second")
    alone = []
    for ids in (a, b):
        with tiny.session() as s:
            s.eval(ids)
            alone.append(np.array(s.logits()))
    with tiny.session() as s1, tiny.session() as s2:
        tiny.batch_eval([(s1, t, i == len(a) - 1) for i, t in enumerate(a)] +
                        [(s2, t, i == len(b) - 1) for i, t in enumerate(b)])
        assert s1.position == len(a) and s2.position == len(b)
        assert np.allclose(np.array(s1.logits()), alone[0], atol=1e-4)
        assert np.allclose(np.array(s2.logits()), alone[1], atol=1e-4)


def test_fork_and_shift(tiny):
    with tiny.session() as s:
        s.eval(tiny.tokenize("a shared prefix"))
        with s.fork() as f:
            assert f.position == s.position
            assert np.array_equal(np.array(f.logits()), np.array(s.logits()))
        n = s.position
        s.shift(1, 4)
        assert s.position == n - 4


def test_generate_equals_hetero_run_on_tiny(tiny, tiny_path):
    prompt = "Once upon a time"
    r = hetero_run("-m", tiny_path, "-c", "256", "-p", prompt, "-n", "16", "--temp", "0")
    with tiny.session() as s:
        g = s.generate(tiny.tokenize(prompt, parse_special=True), 16, hetero.Sampling(temperature=0))
    assert r.stdout == prompt.encode() + g.text + b"\n"
    assert g.stats.generated_tokens == 16 and g.stats.finish_reason == "length"


def test_greedy_completion_equals_hetero_run(smollm2, smollm2_path):
    prompt = "The three primary colors are"
    r = hetero_run("-m", smollm2_path, "-c", "512", "-p", prompt, "-n", "12", "--temp", "0")
    out = smollm2(prompt, max_tokens=12, temperature=0)
    assert r.stdout.decode() == prompt + out["choices"][0]["text"] + "\n"
    assert out["usage"]["completion_tokens"] == 12 and out["choices"][0]["finish_reason"] == "length"


def test_sampled_generation_is_seeded(tiny):
    smp = hetero.Sampling(temperature=0.9, top_k=40, seed=7)
    outs = []
    for _ in range(2):
        with tiny.session() as s:
            outs.append(s.generate(tiny.tokenize("x"), 12, smp).tokens)
    assert outs[0] == outs[1]
    with tiny.session() as s:
        assert s.generate(tiny.tokenize("x"), 12, hetero.Sampling(temperature=0.9, top_k=40, seed=8)).tokens != outs[0]


def test_stop_strings_and_callbacks(tiny):
    with tiny.session() as s:
        full = s.generate(tiny.tokenize("Once"), 16, hetero.Sampling(temperature=0))
    text = full.text.decode()
    stop = text[1:3]
    assert stop.isascii() and stop not in text[:1]
    with tiny.session() as s:
        seen = []
        g = s.generate(tiny.tokenize("Once"), 16, hetero.Sampling(temperature=0, stop=[stop]),
                       lambda t, p: seen.append(t))
    assert g.stats.finish_reason == "stop" and g.stats.stop_index == 0 and g.text.decode() == text[:1]
    assert seen and seen[: len(g.tokens)] == g.tokens
    with tiny.session() as s:
        g = s.generate(tiny.tokenize("Once"), 16, hetero.Sampling(temperature=0), lambda t, p: len(p) >= 0)
    assert g.stats.finish_reason == "callback" and len(g.tokens) == 1


def test_reasoning_budget_forces_the_end_tag(tiny):
    """hx_sampling's reasoning budget through the session: an opened
    thought gets its free tokens, then "</think>" token for token."""
    with tiny.session() as s:
        free = s.generate(tiny.tokenize("Once"), 24, hetero.Sampling(temperature=0, ignore_eos=True)).tokens
    end = tiny.tokenize("</think>", add_special=False, parse_special=True)
    with tiny.session() as s:
        g = s.generate(tiny.tokenize("Once"), 24, hetero.Sampling(temperature=0, ignore_eos=True,
                                                                  reasoning_budget=3, reasoning_open=True)).tokens
    at = next(j for j in range(len(g)) if g[j:j + len(end)] == end)
    assert 3 <= at <= 6 and g[:at] == free[:at]
    with pytest.raises(ValueError):
        hetero.Sampling(reasoning_budget=-1).to_c()


def test_embedded_model_writer(tmp_path, runtime):
    p = tmp_path / "m.gguf"
    hetero.write_synthetic(str(p), "tiny", "f16", seed=5)
    with hetero.Model(runtime, str(p), n_ctx=64) as m:
        assert m.info.ftype == "f16" and m.info.n_vocab == 258


def test_hidden_states_times_the_output_matrix_are_the_logits(tiny, tiny_path):
    # The rows the activation observer hands over are what the output
    # matrix multiplies: checked against the file's own matrix, read by
    # llama.cpp's gguf package.
    gguf = pytest.importorskip("gguf")
    tensors = {t.name: t for t in gguf.GGUFReader(tiny_path).tensors}
    w = np.asarray((tensors.get("output.weight") or tensors["token_embd.weight"]).data, dtype=np.float32)
    ids = tiny.tokenize("Hello world")
    h = tiny.hidden_states(ids)
    assert h.shape == (len(ids), tiny.info.n_embd) and h.dtype == np.float32
    with tiny.session() as s:
        s.eval(ids, logits_all=True)
        logits = np.stack([np.array(s.logits(i)) for i in range(len(ids))])
    assert np.abs(h @ w.T - logits).max() < 1e-3 * np.abs(logits).max()
    with hetero.Engine(tiny):  # embeddings mode needs no observer: an engine may run
        assert np.array_equal(tiny.hidden_states(ids), h)


def test_embed_pools_the_hidden_states(tiny):
    # Model.embed (hx_model_embed, several inputs in shared evaluations)
    # against numpy over each input's hidden states.
    texts = ["Hello world", "A", "The quick brown fox jumps"]
    seqs = [tiny.tokenize(t) for t in texts]
    rows = [tiny.hidden_states(ids).astype(np.float64) for ids in seqs]
    for pooling, ref in (("mean", lambda r: r.mean(axis=0)), ("cls", lambda r: r[0]), ("last", lambda r: r[-1])):
        got = tiny.embed(seqs, pooling)
        for g, r in zip(got, rows):
            want = ref(r) / np.linalg.norm(ref(r))
            assert np.abs(g - want).max() < 1e-5
        raw = tiny.embed(seqs, pooling, normalize=-1)
        assert all(np.abs(g - ref(r)).max() < 1e-4 * max(1, np.abs(ref(r)).max()) for g, r in zip(raw, rows))
    none = tiny.embed(seqs, "none")
    assert all(np.array_equal(g, r.astype(np.float32)) for g, r in zip(none, rows))
    with pytest.raises(hetero.errors.InvalidArgument):
        tiny.embed([[]])
    with pytest.raises(hetero.errors.InvalidArgument, match="classifier head"):
        tiny.embed(seqs, "rank")

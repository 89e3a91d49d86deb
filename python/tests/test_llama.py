"""Llama: llama-cpp-python's API, its dicts and streams, and the
arguments hetero refuses by name."""
from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero import Llama
from hetero.errors import UnsupportedArgument


def test_accessors(smollm2):
    assert smollm2.n_ctx() == 512 and smollm2.n_vocab() == 49152 and smollm2.n_embd() == 576
    assert smollm2.token_eos() >= 0 and smollm2.n_threads == 2
    ids = smollm2.tokenize(b"Hello world")
    assert smollm2.detokenize(ids) == b"Hello world"
    assert smollm2.tokenize(b"<|im_end|>", add_bos=False, special=True) == [smollm2.token_eos()] or \
        len(smollm2.tokenize(b"<|im_end|>", add_bos=False, special=True)) == 1
    with pytest.raises(TypeError):
        smollm2.tokenize("a str")
    assert "devices 'cpu'" in smollm2.placement


def test_completion_dict_and_stream_agree(smollm2):
    kw = dict(max_tokens=12, temperature=0)
    whole = smollm2.create_completion("The capital of France is", **kw)
    assert whole["object"] == "text_completion" and whole["id"].startswith("cmpl-")
    assert set(whole["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    chunks = list(smollm2.create_completion("The capital of France is", stream=True, **kw))
    assert all(c["object"] == "text_completion" for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    echo = smollm2("The capital of France is", echo=True, **kw)
    assert echo["choices"][0]["text"] == "The capital of France is" + whole["choices"][0]["text"]


def test_stream_stopped_early_ends_generation(smollm2):
    it = smollm2.create_completion("Once upon a time", max_tokens=200, temperature=0, stream=True)
    first = [next(it) for _ in range(3)]
    it.close()  # the worker's next callback stops the generation in C
    assert len(first) == 3
    assert smollm2.model.stats().sessions_open == 0


def test_logprobs(smollm2):
    out = smollm2("The sky is", max_tokens=4, temperature=0, logprobs=3)
    lp = out["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == 4 and len(lp["top_logprobs"][0]) == 3
    # Greedy: the token taken is the most likely one.
    for tok, top, l in zip(lp["tokens"], lp["top_logprobs"], lp["token_logprobs"]):
        assert l <= 0 and max(top.values()) == pytest.approx(l)


def test_chat_completion_and_stream(smollm2):
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    whole = smollm2.create_chat_completion(messages=msgs, max_tokens=24, temperature=0)
    assert whole["object"] == "chat.completion"
    msg = whole["choices"][0]["message"]
    assert msg["role"] == "assistant" and "Paris" in msg["content"]
    assert whole["choices"][0]["finish_reason"] == "stop"
    chunks = list(smollm2.create_chat_completion(messages=msgs, max_tokens=24, temperature=0, stream=True))
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == msg["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["choices"][0]["delta"] == {}
    lp = smollm2.create_chat_completion(messages=msgs, max_tokens=3, temperature=0, logprobs=True, top_logprobs=2)
    content = lp["choices"][0]["logprobs"]["content"]
    assert len(content) == 3 and len(content[0]["top_logprobs"]) == 2


def test_chat_template_comes_from_the_file(smollm2):
    assert "im_start" in smollm2.metadata["tokenizer.chat_template"]
    text = hetero.chat.apply(smollm2._chat_template, [{"role": "user", "content": "hi"}])
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_seeds(smollm2):
    kw = dict(max_tokens=8, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)
    a = smollm2("Once", seed=11, **kw)["choices"][0]["text"]
    assert smollm2("Once", seed=11, **kw)["choices"][0]["text"] == a


@pytest.mark.parametrize("kw", [
    dict(flash_attn=True), dict(use_mmap=False), dict(lora_path="x.bin"), dict(pooling_type=4),
    dict(rope_freq_base=1e4), dict(tensor_split=[0.5, 0.5]), dict(n_threads_batch=7, n_threads=2),
    dict(type_k=1, type_v=8), dict(chat_format="no-such-format"), dict(n_ubatch=128),
])
def test_unsupported_constructor_arguments_are_refused_by_name(smollm2_path, kw):
    with pytest.raises(UnsupportedArgument) as e:
        Llama(model_path=smollm2_path, verbose=False, **kw)
    assert e.value.argument in kw and isinstance(e.value, ValueError)


def test_unknown_argument_and_missing_file(smollm2_path):
    with pytest.raises(TypeError, match="n_gqa"):
        Llama(model_path=smollm2_path, n_gqa=8, verbose=False)
    with pytest.raises(ValueError, match="does not exist"):
        Llama(model_path="/nonexistent/model.gguf", verbose=False)


def test_n_gpu_layers(smollm2_path):
    with pytest.raises(UnsupportedArgument, match="n_gpu_layers"):
        Llama(model_path=smollm2_path, n_gpu_layers=10, verbose=False)
    with Llama(model_path=smollm2_path, n_gpu_layers=-1, n_ctx=64, verbose=False) as llm:
        assert llm.placement.startswith("n_gpu_layers=-1: devices 'all'")
    with Llama(model_path=smollm2_path, type_k=8, type_v=8, n_ctx=64, verbose=False) as llm:
        assert llm("Hi", max_tokens=2, temperature=0)["usage"]["completion_tokens"] == 2


@pytest.mark.parametrize("kw", [
    dict(tfs_z=0.9), dict(suffix="end"), dict(logits_processor=[lambda a, b: b]),
])
def test_unsupported_completion_arguments_are_refused_by_name(smollm2, kw):
    with pytest.raises(UnsupportedArgument) as e:
        smollm2("Hi", max_tokens=2, **kw)
    assert e.value.argument == next(iter(kw))


@pytest.mark.parametrize("kw", [
    dict(tools=[{"type": "function"}]), dict(functions=[{}]),
])
def test_unsupported_chat_arguments_are_refused_by_name(smollm2, kw):
    with pytest.raises(UnsupportedArgument) as e:
        smollm2.create_chat_completion(messages=[{"role": "user", "content": "hi"}], **kw)
    assert e.value.argument == next(iter(kw))


def test_logit_bias_typical_and_mirostat_work(smollm2):
    kw = dict(max_tokens=8, temperature=0)
    base = smollm2("The capital of France is", **kw)["choices"][0]["text"]
    paris = smollm2.tokenize(b" Paris", add_bos=False)[0]
    assert base.startswith(" Paris")
    # llama-cpp-python's {token id: bias}: a ban moves greedy off the token, a
    # large bias onto one; JSON-style string keys are read as ids.
    banned = smollm2("The capital of France is", logit_bias={paris: float("-inf")}, **kw)["choices"][0]["text"]
    assert not banned.startswith(" Paris")
    forced = smollm2("The capital of France is", logit_bias={str(paris + 1): 100.0}, max_tokens=1,
                     temperature=0)["choices"][0]["text"]
    assert forced == smollm2.detokenize([paris + 1]).decode()
    with pytest.raises(ValueError, match="vocabulary"):
        smollm2("Hi", logit_bias={10**9: 1.0}, max_tokens=1)
    # Typical sampling at temperature 0 can drop the argmax: the answer changes.
    typ = smollm2("The capital of France is", typical_p=0.3, **kw)["choices"][0]["text"]
    assert typ != base
    # Mirostat: the same seed, the same text; another seed, another text.
    a = [smollm2("Once upon a time", max_tokens=16, temperature=1, seed=s, mirostat_mode=2, mirostat_tau=4.0)
         ["choices"][0]["text"] for s in (7, 7, 8)]
    assert a[0] == a[1] and a[0] != a[2]
    with pytest.raises(ValueError, match="mirostat_mode"):
        smollm2("Hi", mirostat_mode=3, max_tokens=1)
    chat = smollm2.create_chat_completion(messages=[{"role": "user", "content": "Name a colour."}], max_tokens=6,
                                          temperature=0, logit_bias={paris: -1.0}, mirostat_mode=1)
    assert chat["choices"][0]["message"]["content"]


def test_embed(smollm2, smollm2_path):
    with pytest.raises(RuntimeError, match="embedding=True"):  # as llama-cpp-python
        smollm2.embed("text")
    with Llama(model_path=smollm2_path, embedding=True, n_ctx=128, verbose=False) as llm:
        rows = llm.embed("Hello world")
        n = len(llm.tokenize(b"Hello world"))
        assert len(rows) == n and len(rows[0]) == 576
        unit = llm.embed(["Hello world", "Bye"], normalize=True)
        assert len(unit) == 2 and all(abs(np.linalg.norm(r) - 1) < 1e-6 for r in unit[0])
        assert np.allclose(np.array(unit[0]) * np.linalg.norm(rows, axis=1, keepdims=True), rows)
        r = llm.create_embedding(["a", "b c"])
        assert [d["index"] for d in r["data"]] == [0, 1] and r["usage"]["prompt_tokens"] >= 3
    with Llama(model_path=smollm2_path, embedding=True, pooling_type=1, n_ctx=128, verbose=False) as llm:
        assert np.allclose(llm.embed("Hello world"), np.mean(rows, axis=0))


def test_prompt_longer_than_the_context(smollm2):
    with pytest.raises(ValueError) as e:  # as llama-cpp-python raises
        smollm2("word " * 600, max_tokens=4)
    assert isinstance(e.value, hetero.errors.RangeError) and "context" in e.value.message


def test_eval_generate_and_reset(smollm2):
    smollm2.reset()
    ids = smollm2.tokenize(b"The capital of France is")
    smollm2.eval(ids[:3])
    smollm2.eval(ids[3:])
    assert smollm2.n_tokens == len(ids) and smollm2._scores.shape == (len(ids), 49152)
    last = smollm2._scores[-1]
    text = smollm2(ids, max_tokens=4, temperature=0)["choices"][0]["text"]
    first = smollm2.tokenize(text.encode(), add_bos=False)[0]
    assert int(np.argmax(last)) == first  # greedy takes the most likely token
    gen = []
    for t in smollm2.generate(ids, temp=0):
        gen.append(t)
        if len(gen) == 4:
            break
    assert smollm2.detokenize(gen).decode() == text
    with pytest.raises(UnsupportedArgument, match="reset"):
        next(smollm2.generate(ids, reset=False))
    smollm2.reset()
    assert smollm2.n_tokens == 0

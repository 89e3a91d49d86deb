"""Every failure is an exception carrying hx_status and hetero's message,
and leaves the objects usable."""
from __future__ import annotations

import pytest

import hetero
from hetero import errors


def test_bad_runtime_options():
    with pytest.raises(errors.InvalidArgument) as e:
        hetero.Runtime(devices="nonsense")
    assert e.value.status == errors.ERR_INVALID_ARG and "nonsense" in e.value.message
    assert e.value.status_name == "HX_ERR_INVALID_ARG" and e.value.call == "hx_runtime_open"
    with pytest.raises(errors.InvalidArgument):
        hetero.Runtime(cpu_threads=-1)


def test_bad_model_files(runtime, tmp_path, tiny_path):
    with pytest.raises(errors.HeteroIOError) as e:
        hetero.Model(runtime, str(tmp_path / "missing.gguf"))
    assert isinstance(e.value, OSError) and "missing.gguf" in e.value.message
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + bytes(60))
    with pytest.raises(errors.HeteroError) as e:
        hetero.Model(runtime, str(bad))
    assert e.value.status in (errors.ERR_FORMAT, errors.ERR_UNSUPPORTED) and "bad.gguf" in e.value.message
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(open(tiny_path, "rb").read()[:100000])
    with pytest.raises(errors.FormatError):
        hetero.Model(runtime, str(cut))
    with pytest.raises(errors.InvalidArgument, match="kv_type"):
        hetero.Model(runtime, tiny_path, kv_type="q9")


def test_session_errors(tiny):
    with tiny.session() as s:
        with pytest.raises(errors.RangeError, match="vocabulary"):
            s.eval([100000])
        with pytest.raises(errors.RangeError, match="context"):
            s.eval([1] * 300)
        with pytest.raises(errors.InvalidArgument):
            s.eval([])
        with pytest.raises(errors.RangeError):
            s.logits()
        s.eval([1, 2, 3])
        with pytest.raises(errors.RangeError):
            s.logits(0)  # only the last token's were kept
        with pytest.raises(errors.InvalidArgument):
            s.generate([], 4)
        with pytest.raises(errors.InvalidArgument):
            s.generate([1], -1)
        with pytest.raises(errors.RangeError):
            s.shift(0, 100)
        assert s.position == 3  # unchanged by the failures
        with pytest.raises(ZeroDivisionError):  # a callback's exception comes back
            s.generate([1, 2], 4, hetero.Sampling(temperature=0), lambda t, p: 1 / 0)
        with pytest.raises(errors.InvalidArgument):
            s.generate([1, 2], 4, hetero.Sampling(temperature=-1, top_p=7))


def test_closes_refused_while_others_depend(runtime, tiny_path):
    m = hetero.Model(runtime, tiny_path, n_ctx=64)
    s = m.session()
    with pytest.raises(errors.StateError, match="still open"):
        m.close()
    with pytest.raises(errors.StateError, match="still loaded"):
        runtime.close()
    s.eval([1, 2])  # both still usable
    s.close()
    s.close()  # twice: nothing
    with pytest.raises(errors.StateError, match="closed"):
        s.eval([1])
    m.close()
    with pytest.raises(errors.StateError):
        m.tokenize("x")
    with pytest.raises(errors.StateError):
        m.session()


def test_batch_errors(tiny, runtime, tiny_path):
    with pytest.raises(errors.InvalidArgument):
        tiny.batch_eval([])
    with hetero.Model(runtime, tiny_path, n_ctx=64) as other, other.session() as s:
        with pytest.raises(errors.InvalidArgument, match="another model"):
            tiny.batch_eval([(s, 1, True)])


def test_engine_errors(tiny):
    with pytest.raises(errors.InvalidArgument):
        hetero.Engine(tiny, policy="lottery")
    with hetero.Engine(tiny, max_waiting=1) as e:
        with pytest.raises(errors.RangeError):
            e.submit([1] * 300, 4)
        with pytest.raises(errors.InvalidArgument):
            e.submit("abc", 0)
        with pytest.raises(errors.InvalidArgument):
            e.submit("abc", 4, hetero.Sampling(top_p=5))
        assert e.stats().failed == 0
    with pytest.raises(errors.StateError):
        e.submit("abc", 4)


def test_chat_errors():
    with pytest.raises(errors.UnsupportedError):
        hetero.chat.template_name("{{ no family }}")
    with pytest.raises(errors.InvalidArgument):
        hetero.chat.apply("chatml", [])
    with pytest.raises(errors.UnsupportedArgument, match="image_url"):
        hetero.chat.apply("chatml", [{"role": "user", "content": [{"type": "image_url"}]}])
    assert hetero.chat.apply("chatml", [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]) \
        .startswith("<|im_start|>user\nhi")
    assert "chatml" in hetero.chat.builtins()


def test_errors_pickle_and_message_is_hx_last_error(runtime):
    import pickle
    try:
        hetero.Runtime(devices="nonsense")
    except errors.HeteroError as e:
        assert e.message == errors.last_error()
        c = pickle.loads(pickle.dumps(e))
        assert (type(c), c.status, c.message) == (type(e), e.status, e.message)

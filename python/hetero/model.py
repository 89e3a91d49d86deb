"""Models, sessions, batches: tokenize, evaluate, read logits, generate."""
from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _capi as C
from . import errors
from ._handle import Handle
from ._records import Record, record
from .runtime import Runtime
from .sampling import Sampling

UNTIL_END = 0xFFFFFFFF  # n_predict: until an end-of-generation token or a full context

TokenCallback = Callable[[int, bytes], Any]


class _SharedLock:
    """Evaluations share it; hidden_states() holds it alone, since the
    activation observer it sets sees every evaluation of the model."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._alone = False

    def shared(self) -> "_Hold":
        return _Hold(self, False)

    def alone(self) -> "_Hold":
        return _Hold(self, True)


class _Hold:
    def __init__(self, lock: _SharedLock, alone: bool):
        self.lock, self.alone = lock, alone

    def __enter__(self) -> None:
        c = self.lock._cond
        with c:
            if self.alone:
                c.wait_for(lambda: not self.lock._alone and self.lock._shared == 0)
                self.lock._alone = True
            else:
                c.wait_for(lambda: not self.lock._alone)
                self.lock._shared += 1

    def __exit__(self, *exc: Any) -> None:
        c = self.lock._cond
        with c:
            if self.alone:
                self.lock._alone = False
            else:
                self.lock._shared -= 1
            c.notify_all()


def _ids(tokens: Sequence[int]) -> Tuple[Any, int]:
    n = len(tokens)
    arr = (ctypes.c_int32 * max(1, n))(*tokens)
    return arr, n


def synthetic_path(preset: str = "tiny", type: str = "f16") -> str:
    """The path of hetero's embedded synthetic model (``preset`` "tiny" or
    "small", weights in ``type``), written to hetero's cache if absent."""
    buf = ctypes.create_string_buffer(4096)
    written = ctypes.c_int()
    errors.check(C.hx_model_synthetic_cached(preset.encode(), type.encode(), buf, len(buf), ctypes.byref(written)),
                 "hx_model_synthetic_cached")
    return buf.value.decode()


def write_synthetic(path: str, preset: str = "tiny", type: str = "f16", seed: int = 1234) -> None:
    """Writes the embedded synthetic model to ``path``."""
    errors.check(C.hx_model_write_synthetic(path.encode(), preset.encode(), type.encode(), seed),
                 "hx_model_write_synthetic")


def architectures() -> List[str]:
    """The ``general.architecture`` values hetero runs."""
    buf = ctypes.create_string_buffer(1024)
    errors.check(C.hx_model_architectures(buf, len(buf)), "hx_model_architectures")
    return [a.strip() for a in buf.value.decode().split(",") if a.strip()]


class Model(Handle):
    """``hx_model``: a GGUF file mapped on a runtime, and its KV pool.

    Keyword arguments are ``hx_model_options``'s (0 / None = the default)::

        m = hetero.Model(rt, "model.gguf", n_ctx=2048)
        with m.session() as s:
            s.eval(m.tokenize("Hello"))
            print(s.logits().argmax())
    """

    _kind = "model"

    def __init__(self, runtime: Runtime, path: str, *, n_ctx: int = 0, max_batch: int = 0,
                 kv_type: Optional[str] = None, partition: Optional[str] = None, kv_tokens: int = 0,
                 kv_block: int = 0, kv_prefix_cache: int = 0, repack: int = 0, graph_replay: int = 0,
                 fuse_matmuls: int = 0, kv_split: int = 0, kv_device_bytes: int = 0):
        o = C.hx_model_options_default()
        keep = []
        for name, v in (("partition", partition), ("kv_type", kv_type)):
            if v is not None:
                keep.append(v.encode())
                setattr(o, name, keep[-1])
        for name, v in (("n_ctx", n_ctx), ("max_batch", max_batch), ("kv_tokens", kv_tokens),
                        ("kv_block", kv_block), ("kv_split", kv_split), ("kv_device_bytes", kv_device_bytes)):
            if v < 0:
                raise errors.InvalidArgument(errors.ERR_INVALID_ARG, f"{name} {v} is negative", "Model")
            setattr(o, name, v)
        o.kv_prefix_cache, o.repack, o.graph_replay, o.fuse_matmuls = kv_prefix_cache, repack, graph_replay, fuse_matmuls
        p = ctypes.POINTER(C.hx_model)()
        errors.check(C.hx_model_load(runtime._p(), path.encode(), ctypes.byref(o), ctypes.byref(p)), "hx_model_load")
        self.runtime = runtime
        self.path = path
        self._own(p, C.hx_model_free, runtime)
        self.info = self._info()
        self._tokenizer = None  # hx_tokenizer, for detokenize(special=True)
        self._evals = _SharedLock()
        self._engines: "weakref.WeakSet[Any]" = weakref.WeakSet()

    def _info(self) -> Record:
        i = C.hx_model_info()
        errors.check(C.hx_model_info_get(self._p(), ctypes.byref(i)), "hx_model_info_get")
        return record(i)

    @property
    def n_vocab(self) -> int:
        return self.info.n_vocab

    @property
    def n_ctx(self) -> int:
        return self.info.n_ctx

    def stats(self) -> Record:
        """``hx_model_stats``: sessions, KV blocks, the prefix cache, replays."""
        s = C.hx_model_stats()
        errors.check(C.hx_model_stats_get(self._p(), ctypes.byref(s)), "hx_model_stats_get")
        return record(s)

    def plan(self) -> List[Record]:
        """The partition plan: each task of one evaluation and the device it prefers."""
        n = C.hx_model_plan_size(self._p())
        if n == 0:
            raise errors.error(errors.ERR_STATE, "hx_model_plan_size")
        out = []
        for i in range(n):
            t = C.hx_plan_task()
            errors.check(C.hx_model_plan_get(self._p(), i, ctypes.byref(t)), "hx_model_plan_get")
            out.append(record(t))
        return out

    # -- text ------------------------------------------------------------
    def tokenize(self, text: Union[str, bytes], add_special: bool = True, parse_special: bool = False) -> List[int]:
        """Token ids of ``text`` (str, or bytes that need not be UTF-8).
        add_special: BOS/EOS where the model asks for them; parse_special:
        text spelling a special token becomes that token."""
        b = text.encode() if isinstance(text, str) else bytes(text)
        n = ctypes.c_size_t()
        cap = len(b) + 4
        for _ in range(2):
            ids = (ctypes.c_int32 * cap)()
            st = C.hx_model_tokenize(self._p(), b, len(b), int(add_special), int(parse_special), ids, cap,
                                     ctypes.byref(n))
            if st == errors.ERR_RANGE and n.value > cap:
                cap = n.value
                continue
            errors.check(st, "hx_model_tokenize")
            return list(ids[: n.value])
        raise errors.error(errors.ERR_RANGE, "hx_model_tokenize")

    def token_to_piece(self, token: int) -> bytes:
        """The bytes a token stands for (control tokens: empty)."""
        buf = ctypes.create_string_buffer(64)
        n = ctypes.c_size_t()
        st = C.hx_model_token_to_piece(self._p(), token, buf, len(buf), ctypes.byref(n))
        if st == errors.ERR_RANGE:
            buf = ctypes.create_string_buffer(n.value + 1)
            st = C.hx_model_token_to_piece(self._p(), token, buf, len(buf), ctypes.byref(n))
        errors.check(st, "hx_model_token_to_piece")
        return buf.raw[: n.value]

    def _special_piece(self, token: int) -> bytes:
        if self._tokenizer is None:
            p = ctypes.POINTER(C.hx_tokenizer)()
            errors.check(C.hx_tokenizer_open(self.path.encode(), ctypes.byref(p)), "hx_tokenizer_open")
            self._tokenizer = p
            self._tokenizer_finalizer = weakref.finalize(self, C.hx_tokenizer_close, p)
        buf = ctypes.create_string_buffer(64)
        n = ctypes.c_size_t()
        st = C.hx_tokenizer_token_to_piece(self._tokenizer, token, 1, buf, len(buf), ctypes.byref(n))
        if st == errors.ERR_RANGE:
            buf = ctypes.create_string_buffer(n.value + 1)
            st = C.hx_tokenizer_token_to_piece(self._tokenizer, token, 1, buf, len(buf), ctypes.byref(n))
        errors.check(st, "hx_tokenizer_token_to_piece")
        return buf.raw[: n.value]

    def detokenize(self, tokens: Sequence[int], special: bool = False) -> bytes:
        """The bytes of a token sequence, piece by piece (a piece may be part
        of a UTF-8 character); special: render control tokens' text."""
        self._p()
        piece = self._special_piece if special else self.token_to_piece
        return b"".join(piece(int(t)) for t in tokens)

    def is_eog(self, token: int) -> bool:
        return bool(C.hx_model_is_eog(self._p(), token))

    @property
    def chat_template(self) -> Optional[str]:
        """The file's tokenizer.chat_template, or None."""
        t = C.hx_model_chat_template(self._p())
        return None if t is None else t.decode("utf-8", "replace")

    def hidden_states(self, tokens: Sequence[int]) -> np.ndarray:
        """The model's last hidden state of every token, after the final
        norm (what the output matrix multiplies, llama.cpp's embeddings
        with pooling "none"): float32 [len(tokens), n_embd].

        A fresh session in embeddings mode (hx_session_set_embeddings),
        every token's row kept; nothing comes from the prefix cache."""
        if not tokens:
            raise errors.InvalidArgument(errors.ERR_INVALID_ARG, "no tokens", "Model.hidden_states")
        n_embd = self.info.n_embd
        s = Session(self)
        try:
            errors.check(C.hx_session_set_embeddings(s._p(), 1), "hx_session_set_embeddings")
            arr, n = _ids(tokens)
            with self._evals.shared():
                errors.check(C.hx_session_eval(s._p(), arr, n, 1), "hx_session_eval")
            out = np.empty((n, n_embd), np.float32)
            for i in range(n):
                row = C.hx_session_embeddings(s._p(), i)
                if not row:
                    raise errors.StateError(errors.ERR_STATE, f"no hidden state kept for token {i}",
                                            "Model.hidden_states")
                out[i] = np.ctypeslib.as_array(row, shape=(n_embd,))
        finally:
            s.close()
        return out

    def embed(self, inputs: Sequence[Sequence[int]], pooling: str = "mean", normalize: int = 2) -> List[np.ndarray]:
        """Embeddings of several token sequences, packed into shared
        evaluations (hx_model_embed): per input, its pooled vector
        (pooling "mean", "cls", "last"; "rank": the classifier head's
        scores; "file": the file's pooling_type), or with "none" every
        token's row [n, n_embd].  normalize: llama-server's embd_normalize
        (-1 none, 0 max, 1 taxicab, 2 L2, p > 2); rows of "none" are not
        normalized."""
        if not inputs or any(len(t) == 0 for t in inputs):
            raise errors.InvalidArgument(errors.ERR_INVALID_ARG, "an empty input", "Model.embed")
        o = C.hx_embed_options_default()
        if pooling != "file":
            p = ctypes.c_int()
            errors.check(C.hx_pooling_parse(pooling.encode(), ctypes.byref(p)), "hx_pooling_parse")
            o.pooling = p.value
        o.normalize = normalize
        ei = C.hx_model_embedding_info()
        errors.check(C.hx_model_embedding_info_get(self._p(), ctypes.byref(ei)), "hx_model_embedding_info_get")
        kind = o.pooling if o.pooling >= 0 else ei.pooling
        per = [len(t) * ei.n_embd if kind == 0 else ei.n_cls_out if kind == 4 else ei.n_embd for t in inputs]
        arrs = [(ctypes.c_int32 * len(t))(*[int(x) for x in t]) for t in inputs]
        ptrs = (ctypes.POINTER(ctypes.c_int32) * len(inputs))(*[ctypes.cast(a, ctypes.POINTER(ctypes.c_int32))
                                                                for a in arrs])
        lens = (ctypes.c_size_t * len(inputs))(*[len(t) for t in inputs])
        cap = max(sum(per), 1)
        out = np.empty(cap, np.float32)
        n_out = ctypes.c_size_t()
        with self._evals.shared():
            errors.check(C.hx_model_embed(self._p(), ptrs, lens, len(inputs), ctypes.byref(o),
                                          out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), cap,
                                          ctypes.byref(n_out)), "hx_model_embed")
        res, at = [], 0
        for t, k in zip(inputs, per):
            v = out[at:at + k].copy()
            res.append(v.reshape(len(t), ei.n_embd) if kind == 0 else v)
            at += k
        return res

    # -- sessions --------------------------------------------------------
    def session(self) -> "Session":
        return Session(self)

    def batch_eval(self, entries: Sequence[Tuple["Session", int, bool]]) -> None:
        """One evaluation over several sessions (``hx_batch_eval``): entry
        (session, token, want_logits) appends the token to the session."""
        if not entries:
            raise errors.InvalidArgument(errors.ERR_INVALID_ARG, "an empty batch", "batch_eval")
        sessions = list({id(e[0]): e[0] for e in entries}.values())
        for s in sessions:
            if s.model is not self:
                raise errors.InvalidArgument(errors.ERR_INVALID_ARG, "a session of another model", "batch_eval")
        n = len(entries)
        toks = (ctypes.c_int32 * n)(*[int(e[1]) for e in entries])
        ses = (ctypes.POINTER(C.hx_session) * n)(*[e[0]._p() for e in entries])
        want = (ctypes.c_uint8 * n)(*[1 if e[2] else 0 for e in entries])
        b = C.hx_batch(n=n, tokens=toks, sessions=ses, want_logits=want)
        for s in sessions:
            s._lock.acquire()
        try:
            for s in sessions:
                s._check_views("batch_eval")
            with self._evals.shared():
                errors.check(C.hx_batch_eval(self._p(), ctypes.byref(b)), "hx_batch_eval")
        finally:
            for s in sessions:
                s._lock.release()
        for s in sessions:
            s._rows = [i for i, e in enumerate(e for e in entries if e[0] is s)]

    def _before_close(self) -> None:
        if self._tokenizer is not None:
            self._tokenizer_finalizer()  # closes it, once
            self._tokenizer = None


class _LogitsMemory:
    """The owner of a logits view: numpy reads the C memory through its
    ``__array_interface__``, and the view keeps it (hence the session) alive."""

    def __init__(self, session: "Session", ptr: int, n: int):
        self.session = session
        self.__array_interface__ = {"data": (ptr, True), "shape": (n,), "typestr": "<f4", "version": 3}


class Session(Handle):
    """``hx_session``: one sequence's KV cache, position and last logits.

    Calls on one session are serialized by a lock; sessions of one model
    evaluate one at a time (the model's own lock)."""

    _kind = "session"

    def __init__(self, model: Model, _ptr: Optional[ctypes._Pointer] = None):
        if _ptr is None:
            _ptr = ctypes.POINTER(C.hx_session)()
            errors.check(C.hx_session_open(model._p(), ctypes.byref(_ptr)), "hx_session_open")
        self.model = model
        self._lock = threading.RLock()
        self._views: "weakref.WeakSet[_LogitsMemory]" = weakref.WeakSet()
        self._generating = False
        self._rows: List[int] = []
        self._own(_ptr, C.hx_session_close, model)

    @property
    def position(self) -> int:
        """Tokens in the session's context."""
        return C.hx_session_position(self._p())

    @property
    def reused_tokens(self) -> int:
        """Prompt tokens the last evaluation took from the prefix cache."""
        return C.hx_session_reused_tokens(self._p())

    def _check_views(self, what: str) -> None:
        n = len(self._views)
        if n:
            raise errors.LogitsInUse(
                errors.ERR_STATE,
                f"{n} numpy view(s) of this session's logits are still referenced, and {what} would "
                "invalidate the memory they show: copy them (numpy.array(view)) or delete them first",
                f"Session.{what}")

    def eval(self, tokens: Sequence[int], logits_all: bool = False) -> None:
        """Evaluates tokens at the session's position (``hx_session_eval``);
        logits_all keeps every token's logits, else the last one's."""
        arr, n = _ids(tokens)
        with self._lock:
            self._check_views("eval")
            with self.model._evals.shared():
                errors.check(C.hx_session_eval(self._p(), arr, n, int(logits_all)), "hx_session_eval")
            self._rows = list(range(n)) if logits_all else [n - 1] if n else []

    def logits(self, i: int = -1) -> np.ndarray:
        """The logits of the i-th token of the last evaluation (-1: its last),
        a read-only float32 view of hetero's memory, without a copy.

        The view is valid until the session's next evaluation or close, as
        the C pointer is; those refuse (LogitsInUse) while a view is still
        referenced.  Keep a copy with ``numpy.array(view)``.  Called from a
        ``generate`` callback it returns a copy (generation goes on in C)."""
        with self._lock:
            p = C.hx_session_logits(self._p(), i)
            if not p:
                # hx_session_logits sets no message of its own for this.
                raise errors.RangeError(errors.ERR_RANGE, f"no logits kept for token {i} of the last evaluation",
                                        "hx_session_logits")
            addr = ctypes.cast(p, ctypes.c_void_p).value
            mem = _LogitsMemory(self, addr, self.model.n_vocab)
            view = np.asarray(mem)
            if self._generating:
                return view.copy()
            self._views.add(mem)
            return view

    def fork(self) -> "Session":
        """A session holding the same context, its KV blocks shared
        copy-on-write, and its last logits copied."""
        with self._lock:
            p = ctypes.POINTER(C.hx_session)()
            errors.check(C.hx_session_fork(self._p(), ctypes.byref(p)), "hx_session_fork")
            return Session(self.model, p)

    def shift(self, n_keep: int, n_discard: int) -> None:
        """Context shift: drops n_discard tokens after the first n_keep."""
        with self._lock:
            errors.check(C.hx_session_shift(self._p(), n_keep, n_discard), "hx_session_shift")

    def set_context_shift(self, n_keep: int, n_discard: int = 0) -> None:
        """What generate does when the context fills: shift (n_keep >= 0) or stop (-1)."""
        with self._lock:
            errors.check(C.hx_session_set_context_shift(self._p(), n_keep, n_discard),
                         "hx_session_set_context_shift")

    def generate(self, prompt: Sequence[int], max_tokens: int = UNTIL_END, sampling: Optional[Sampling] = None,
                 on_token: Optional[TokenCallback] = None) -> Record:
        """Evaluates the prompt and samples up to max_tokens tokens
        (``hx_session_generate``).  on_token(token, piece) is called for each
        (token -1 for text held back until the end); a true return stops.

        Returns a record: ``tokens``, ``text`` (bytes) and ``stats``
        (``hx_generation_stats``, with ``finish_reason`` as a word)."""
        if max_tokens < 0 or max_tokens > UNTIL_END:
            raise errors.InvalidArgument(errors.ERR_INVALID_ARG, f"max_tokens {max_tokens} out of range",
                                         "Session.generate")
        arr, n = _ids(prompt)
        smp, keep = (sampling or Sampling()).to_c()
        tokens: List[int] = []
        pieces: List[bytes] = []
        failure: List[BaseException] = []

        def cb(user: Any, token: int, piece: Optional[bytes]) -> int:
            try:
                piece = piece or b""
                if token >= 0:
                    tokens.append(token)
                pieces.append(piece)
                if on_token is not None and on_token(token, piece):
                    return 1
                return 0
            except BaseException as e:  # raised again once C returns
                failure.append(e)
                return 1

        c_cb = C.hx_token_callback(cb)
        stats = C.hx_generation_stats()
        with self._lock:
            self._check_views("generate")
            self._generating = True
            try:
                with self.model._evals.shared():
                    st = C.hx_session_generate(self._p(), arr, n, max_tokens, ctypes.byref(smp), c_cb, None,
                                               ctypes.byref(stats))
                    msg = errors.last_error()
            finally:
                self._generating = False
            self._rows = [0]
        if failure:
            raise failure[0]
        if st != errors.OK:
            raise errors.error(st, "hx_session_generate", msg)
        del keep
        return Record(tokens=tokens, text=b"".join(pieces),
                      stats=record(stats, finish_reason=C.hx_finish_reason_str(stats.finish).decode()))

    def _before_close(self) -> None:
        self._check_views("close")

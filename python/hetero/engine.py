"""The serving engine (``hx_engine``): many requests on one model,
batched continuously by an engine thread of hetero's own.

From threads::

    with hetero.Engine(model) as e:
        r = e.submit("Once upon a time", max_tokens=32)
        for piece in r:            # hetero.Piece-like tokens as they come
            print(piece.text)
        print(r.result().stats.finish_reason)

From asyncio::

    async with hetero.AsyncEngine(model) as e:
        async for piece in e.submit("Once upon a time", max_tokens=32):
            ...

The engine thread calls back into Python for every token; the callback
only queues it (a thread's queue, or the event loop's through
call_soon_threadsafe), so the batch never waits on a consumer.
"""
from __future__ import annotations

import asyncio
import ctypes
import itertools
import queue
import threading
import weakref
from typing import Any, AsyncIterator, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

from . import _capi as C
from . import errors
from ._handle import Handle
from ._records import Record, record
from .model import Model
from .sampling import Sampling

POLICIES = {"fcfs": 0, "short_first": 1, "priority": 2}


class Token(NamedTuple):
    """One generated token as the engine hands it (token -1: text held
    back until the end).  logprob: under the model; top: the request's
    top_logprobs alternatives, (token, logprob), most likely first."""

    token: int
    text: bytes
    logprob: float
    top: List[Tuple[int, float]]


def _result(r: Any) -> Record:
    out = record(r)
    out.stats.finish_reason = out.finish_reason = C.hx_finish_reason_str(r.stats.finish).decode()
    return out


class Request:
    """A submitted request: iterate it for its tokens (from a thread, or
    ``async for`` when submitted through AsyncEngine), ``result()`` for how
    it ended, ``cancel()`` to end it."""

    def __init__(self, engine: "Engine", key: int, loop: Optional[asyncio.AbstractEventLoop]):
        self._engine = engine
        self._key = key
        self._loop = loop
        self._q: Any = asyncio.Queue() if loop is not None else queue.SimpleQueue()
        self.id: Optional[int] = None
        self._result: Optional[Record] = None
        self._final: Optional[Record] = None  # from the last callback
        self._waited = False
        self._lock = threading.Lock()
        self.text = b""

    # Called on the engine thread.
    def _put(self, item: Any) -> None:
        if self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._q.put_nowait, item)
            except RuntimeError:  # the loop is closed: nobody is listening
                pass
        else:
            self._q.put(item)

    def _take(self, item: Any) -> Optional[Token]:
        if isinstance(item, Token):
            self.text += item.text
            return item
        return None

    def __iter__(self) -> Iterator[Token]:
        if self._loop is not None:
            raise TypeError("a request of an AsyncEngine is read with 'async for'")
        while True:
            item = self._q.get()
            if item is None:
                self.result()
                return
            t = self._take(item)
            if t is not None:
                yield t

    def __aiter__(self) -> AsyncIterator[Token]:
        if self._loop is None:
            raise TypeError("a request of a thread Engine is read with 'for'; use AsyncEngine for asyncio")
        return self._agen()

    async def _agen(self) -> AsyncIterator[Token]:
        while True:
            item = await self._q.get()
            if item is None:
                await self._loop.run_in_executor(None, self.result)
                return
            t = self._take(item)
            if t is not None:
                yield t

    def result(self, timeout: Optional[float] = None) -> Record:
        """Waits for the request to end (``hx_engine_wait``, the GIL
        released) and returns ``hx_request_result`` as a record; a failed
        request raises its error.  TimeoutError when timeout runs out."""
        with self._lock:
            if not self._waited and self._engine.closed and self._final is not None:
                # The engine was closed after the request's end: what the
                # last callback said is all there is (its id is gone).
                self._waited, self._result = True, self._final
            if not self._waited:
                out = C.hx_request_result()
                st = C.hx_engine_wait(self._engine._p(), self.id, -1.0 if timeout is None else timeout,
                                      ctypes.byref(out))
                if st == errors.ERR_STATE and timeout is not None:
                    raise TimeoutError(f"request {self.id} still running after {timeout} s")
                errors.check(st, "hx_engine_wait")
                self._waited = True
                self._result = _result(out)
                self._engine._forget(self._key)
        r = self._result
        if r.status != errors.OK:
            raise errors.error(r.status, "request", r.error)
        return r

    async def aresult(self) -> Record:
        """result() for asyncio (waits in the loop's executor)."""
        return await asyncio.get_running_loop().run_in_executor(None, self.result)

    def cancel(self) -> None:
        """Ends the request at its next step (finish "cancelled")."""
        with self._lock:
            if self._waited:
                return
            errors.check(C.hx_engine_cancel(self._engine._p(), self.id), "hx_engine_cancel")


def _destroy(ptr: Any, where: Dict[str, int]) -> int:
    """hx_engine_destroy, which joins the engine thread: if the collector
    runs this on the engine thread itself (inside a token callback), it is
    handed to a thread of its own instead of joining itself."""
    if where.get("thread") == threading.get_ident():
        threading.Thread(target=C.hx_engine_destroy, args=(ptr,), name="hetero-engine-close").start()
        return errors.OK
    return C.hx_engine_destroy(ptr)


class Engine(Handle):
    """``hx_engine`` on a model (which it keeps alive); usable from any
    thread.  Options are ``hx_engine_options``'s (0 = the default)."""

    _kind = "engine"

    def __init__(self, model: Model, *, policy: str = "fcfs", max_running: int = 0, token_budget: int = 0,
                 max_waiting: int = 0, shared_prefill: int = 0):
        if policy not in POLICIES:
            raise errors.InvalidArgument(errors.ERR_INVALID_ARG,
                                         f"policy {policy!r} is none of {', '.join(POLICIES)}", "Engine")
        o = C.hx_engine_options_default()
        o.policy = POLICIES[policy]
        for name, v in (("max_running", max_running), ("token_budget", token_budget),
                        ("max_waiting", max_waiting), ("shared_prefill", shared_prefill)):
            if v < 0:
                raise errors.InvalidArgument(errors.ERR_INVALID_ARG, f"{name} {v} is negative", "Engine")
            setattr(o, name, v)
        self.model = model
        self._requests: Dict[int, Request] = {}
        self._keys = itertools.count(1)
        self._mu = threading.Lock()
        # One callback for every request (user = the request's key).  It
        # holds the engine weakly, so that dropping the engine frees it.
        me = weakref.ref(self)
        where = self._where = {}

        def on_token(user: Optional[int], t: Any) -> int:
            where["thread"] = threading.get_ident()
            e = me()
            return 1 if e is None else e._on_token(user, t)

        self._cb = C.hx_engine_callback(on_token)
        p = ctypes.POINTER(C.hx_engine)()
        errors.check(C.hx_engine_create(model._p(), ctypes.byref(o), ctypes.byref(p)), "hx_engine_create")
        # The callback object must outlive the engine thread: the finalizer keeps it.
        self._own(p, lambda ptr: _destroy(ptr, where), model, self._cb)
        model._engines.add(self)

    def _on_token(self, user: Optional[int], t: Any) -> int:
        # On the engine thread: queue and return at once.
        try:
            with self._mu:
                r = self._requests.get(user or 0)
            if r is None:
                return 1
            tok = t.contents
            if tok.last:
                if tok.piece:
                    r._put(Token(-1, tok.piece, 0.0, []))
                if tok.result:
                    r._final = _result(tok.result.contents)
                r._put(None)
                return 0
            top = [(tok.top_token[i], tok.top_logprob[i]) for i in range(tok.n_top)]
            r._put(Token(tok.token, tok.piece or b"", tok.logprob, top))
            return 0
        except BaseException:  # never let an exception cross into C
            return 1

    def _forget(self, key: int) -> None:
        with self._mu:
            self._requests.pop(key, None)

    def submit(self, prompt: Union[str, bytes, Sequence[int]], max_tokens: int = 16,
               sampling: Optional[Sampling] = None, *, priority: int = 0, expected_tokens: int = 0,
               tenant: Optional[str] = None, top_logprobs: int = 0, ignore_eos: bool = False,
               no_prefix_cache: bool = False, _loop: Optional[asyncio.AbstractEventLoop] = None) -> Request:
        """Queues a request: a prompt as text (tokenized with the model's
        special tokens) or token ids.  Refused at once, nothing queued: a
        prompt longer than the context (RangeError), bad sampling or
        max_tokens 0 (InvalidArgument), a full queue (HeteroMemoryError)."""
        if max_tokens < 0 or top_logprobs < 0 or expected_tokens < 0:
            raise errors.InvalidArgument(errors.ERR_INVALID_ARG, "max_tokens, top_logprobs and expected_tokens "
                                         "are non-negative", "Engine.submit")
        req = C.hx_request_default()
        keep: List[Any] = []
        if isinstance(prompt, (str, bytes)):
            keep.append(prompt.encode() if isinstance(prompt, str) else prompt)
            req.text = keep[-1]
        else:
            ids = (ctypes.c_int32 * max(1, len(prompt)))(*[int(t) for t in prompt])
            keep.append(ids)
            req.tokens, req.n_tokens = ids, len(prompt)
        smp, smp_keep = (sampling or Sampling()).to_c()
        req.sampling = smp
        req.max_tokens = max_tokens
        req.priority = priority
        req.expected_tokens = expected_tokens
        if tenant is not None:
            keep.append(tenant.encode())
            req.tenant = keep[-1]
        req.top_logprobs = top_logprobs
        req.ignore_eos = int(ignore_eos)
        req.no_prefix_cache = int(no_prefix_cache)
        req.on_token = self._cb
        key = next(self._keys)
        req.user = key
        r = Request(self, key, _loop)
        with self._mu:
            self._requests[key] = r
        rid = ctypes.c_uint64()
        st = C.hx_engine_submit(self._p(), ctypes.byref(req), ctypes.byref(rid))
        if st != errors.OK:
            self._forget(key)
            raise errors.error(st, "hx_engine_submit")
        r.id = rid.value
        del keep, smp_keep  # copied at submission
        return r

    def generate(self, prompt: Union[str, bytes, Sequence[int]], max_tokens: int = 16,
                 sampling: Optional[Sampling] = None, **kw: Any) -> Tuple[bytes, Record]:
        """Submits and waits: (text, result)."""
        r = self.submit(prompt, max_tokens, sampling, **kw)
        for _ in r:
            pass
        return r.text, r.result()

    def _before_close(self) -> None:
        self.model._engines.discard(self)

    def stats(self) -> Record:
        s = C.hx_engine_stats()
        errors.check(C.hx_engine_stats_get(self._p(), ctypes.byref(s)), "hx_engine_stats_get")
        return record(s)


class AsyncEngine:
    """The engine for asyncio: ``submit`` returns a request read with
    ``async for``; ``generate`` awaits the whole text."""

    def __init__(self, model: Model, **options: Any):
        self.engine = Engine(model, **options)

    def submit(self, prompt: Union[str, bytes, Sequence[int]], max_tokens: int = 16,
               sampling: Optional[Sampling] = None, **kw: Any) -> Request:
        return self.engine.submit(prompt, max_tokens, sampling, _loop=asyncio.get_running_loop(), **kw)

    async def generate(self, prompt: Union[str, bytes, Sequence[int]], max_tokens: int = 16,
                       sampling: Optional[Sampling] = None, **kw: Any) -> Tuple[bytes, Record]:
        r = self.submit(prompt, max_tokens, sampling, **kw)
        async for _ in r:
            pass
        return r.text, await r.aresult()

    def stats(self) -> Record:
        return self.engine.stats()

    async def aclose(self) -> None:
        # hx_engine_destroy waits for the engine thread: off the loop.
        await asyncio.get_running_loop().run_in_executor(None, self.engine.close)

    def close(self) -> None:
        self.engine.close()

    async def __aenter__(self) -> "AsyncEngine":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

"""Generation as events: in the calling thread (whole answers), or in a
worker thread feeding an iterator (streams).

hx_session_generate runs the whole loop in C and calls back per token, so a
Python iterator over its tokens needs the loop on another thread: the
worker runs it (the GIL released while C computes), the callback queues
each piece, the consumer takes them.  A consumer that stops early makes the
next callback return non-zero, which ends the generation in C.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from ._records import Record
from .model import Session
from .sampling import Sampling


class Piece(NamedTuple):
    """One generated token (token -1: text held back until the end)."""

    token: int
    text: bytes
    logprob: Optional[float] = None
    top: Optional[List[Tuple[int, float]]] = None


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


def run(session: Session, prompt: Sequence[int], max_tokens: int, sampling: Sampling,
        on_piece: Callable[[Piece], Any], logprobs: Optional[int] = None) -> Record:
    """Generates in this thread; on_piece(Piece) for each token, a true
    return stops.  logprobs: also the token's log-probability under the
    model and the `logprobs` most likely alternatives."""

    def cb(token: int, text: bytes) -> Any:
        lp = top = None
        if logprobs is not None and token >= 0:
            # The logits the token was sampled from: the callback comes
            # before the token is evaluated.
            ls = _log_softmax(session.logits())
            lp = float(ls[token])
            k = max(0, int(logprobs))
            if k:
                idx = np.argpartition(-ls, min(k, len(ls) - 1))[:k]
                idx = idx[np.argsort(-ls[idx])]
                top = [(int(i), float(ls[i])) for i in idx]
            else:
                top = []
        return on_piece(Piece(token, text, lp, top))

    return session.generate(prompt, max_tokens, sampling, cb)


_END = object()


def iterate(session: Session, prompt: Sequence[int], max_tokens: int, sampling: Sampling,
            logprobs: Optional[int] = None) -> Iterator[Union[Piece, Record]]:
    """Yields each Piece as it is generated, then the generation's Record.
    Errors of the generation are raised here, in the consumer."""
    q: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
    stop = threading.Event()

    def work() -> None:
        try:
            r = run(session, prompt, max_tokens, sampling, lambda p: (q.put(p), stop.is_set())[1], logprobs)
            q.put(r)
        except BaseException as e:
            q.put(e)
        q.put(_END)

    t = threading.Thread(target=work, name="hetero-generate", daemon=True)
    t.start()
    try:
        while True:
            item = q.get()
            if item is _END:
                break
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        t.join()

"""Owned C handles: closed deterministically (``close()``, ``with``) or by
the garbage collector (a ``weakref.finalize``), never twice.

A child keeps its parents alive (a session its model, a model its
runtime) through its finalizer's arguments, so whatever order the
collector takes, C sees handles closed in the reverse order of opening,
as hetero.h asks.
"""
from __future__ import annotations

import ctypes
import weakref
from typing import Any, Callable, Optional, Tuple

from . import errors


def _finalize(closer: Callable[[Any], int], ptr: Any, parents: Tuple[Any, ...]) -> None:
    # From the collector or at exit: nobody to raise to.  A refusal
    # (HX_ERR_STATE) cannot happen here, since children hold their parents.
    closer(ptr)


class Handle:
    """Base of the objects that own a C handle."""

    _ptr: Optional[ctypes._Pointer]
    _kind = "handle"

    def _own(self, ptr: ctypes._Pointer, closer: Callable[[Any], int], *parents: Any) -> None:
        self._ptr = ptr
        self._closer = closer
        self._parents = parents
        self._finalizer = weakref.finalize(self, _finalize, closer, ptr, parents)

    @property
    def closed(self) -> bool:
        return getattr(self, "_ptr", None) is None

    def _p(self) -> ctypes._Pointer:
        """The live C handle; a closed one raises StateError as C would."""
        p = getattr(self, "_ptr", None)
        if p is None:
            raise errors.StateError(errors.ERR_STATE, f"this {self._kind} is closed", type(self).__name__)
        return p

    def close(self) -> None:
        """Closes the handle now.  Closing twice is a no-op; a close that C
        refuses (a model with open sessions, a runtime with loaded models)
        raises StateError and leaves the object open and usable."""
        p = getattr(self, "_ptr", None)
        if p is None:
            return
        self._before_close()
        st = self._closer(p)
        if st != errors.OK:
            raise errors.error(st, f"{type(self).__name__}.close")
        self._finalizer.detach()
        self._ptr = None
        self._parents = ()

    def _before_close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

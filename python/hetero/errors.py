"""hetero's failures as Python exceptions.

Every failing C call raises a :class:`HeteroError` carrying the call's
``hx_status`` (``status``, and its name in ``status_name``) and hetero's own
description of what failed (``hx_last_error()``, in ``message``).  Each
status has a subclass that also derives from the built-in exception a
Python caller would catch for it: a prompt longer than the context is a
:class:`RangeError`, which is a ``ValueError`` (as llama-cpp-python raises),
a file that cannot be read a :class:`HeteroIOError` (an ``OSError``), and so on.
"""
from __future__ import annotations

from typing import Dict, Optional, Type

from . import _capi

# hx_status values (hetero.h's HX_STATUS_LIST; tests/test_header.py checks them).
OK = 0
ERR_INVALID_ARG = -1
ERR_NO_MEMORY = -2
ERR_IO = -3
ERR_FORMAT = -4
ERR_UNSUPPORTED = -5
ERR_NOT_FOUND = -6
ERR_NO_DEVICE = -7
ERR_DEVICE = -8
ERR_STATE = -9
ERR_RANGE = -10
ERR_TASK_FAILED = -11


class HeteroError(RuntimeError):
    """A hetero call failed.

    Attributes:
        status: the ``hx_status`` (a negative int).
        status_name: its name, e.g. ``"HX_ERR_FORMAT"``.
        message: hetero's description of the failure (``hx_last_error()``).
        call: the C function (or Python method) that failed.
    """

    status: int = -1

    def __init__(self, status: int, message: str, call: Optional[str] = None):
        self.status = status
        self.status_name = status_name(status)
        self.message = message
        self.call = call
        where = f"{call}: " if call else ""
        # hetero's messages start with the status's name; ours may not.
        text = message if message.startswith(self.status_name) else f"{self.status_name}: {message}"
        super().__init__(where + (text if message else self.status_name))

    def __reduce__(self):
        return (type(self), (self.status, self.message, self.call))


class InvalidArgument(HeteroError, ValueError):
    """HX_ERR_INVALID_ARG."""


class HeteroMemoryError(HeteroError, MemoryError):
    """HX_ERR_NO_MEMORY: out of memory, a full KV pool or a full queue."""


class HeteroIOError(HeteroError, OSError):
    """HX_ERR_IO: a file could not be read or written."""

    def __init__(self, status: int, message: str, call: Optional[str] = None):
        HeteroError.__init__(self, status, message, call)


class FormatError(HeteroError, ValueError):
    """HX_ERR_FORMAT: a malformed file."""


class UnsupportedError(HeteroError, NotImplementedError):
    """HX_ERR_UNSUPPORTED."""


class NotFoundError(HeteroError, LookupError):
    """HX_ERR_NOT_FOUND."""


class NoDeviceError(HeteroError):
    """HX_ERR_NO_DEVICE: no device can run it."""


class DeviceError(HeteroError):
    """HX_ERR_DEVICE: a device failed."""


class StateError(HeteroError):
    """HX_ERR_STATE: a closed handle, or a close refused while others depend on it."""


class RangeError(HeteroError, ValueError):
    """HX_ERR_RANGE: out of range, e.g. a prompt longer than the context."""


class TaskFailedError(HeteroError):
    """HX_ERR_TASK_FAILED."""


class UnsupportedArgument(UnsupportedError, ValueError):
    """An argument of the llama-cpp-python API that hetero cannot honour
    (raised instead of ignoring it).  ``argument`` names it."""

    def __init__(self, argument: str, why: str):
        self.argument = argument
        super().__init__(ERR_UNSUPPORTED, f"{argument}: {why}", None)

    def __reduce__(self):
        return (type(self), (self.argument, self.message.split(": ", 1)[1]))


class LogitsInUse(StateError, BufferError):
    """A numpy view of a session's logits is still referenced while an
    evaluation or a close would invalidate the memory it shows (as
    ``bytearray`` refuses to resize under a ``memoryview``)."""


_BY_STATUS: Dict[int, Type[HeteroError]] = {
    ERR_INVALID_ARG: InvalidArgument,
    ERR_NO_MEMORY: HeteroMemoryError,
    ERR_IO: HeteroIOError,
    ERR_FORMAT: FormatError,
    ERR_UNSUPPORTED: UnsupportedError,
    ERR_NOT_FOUND: NotFoundError,
    ERR_NO_DEVICE: NoDeviceError,
    ERR_DEVICE: DeviceError,
    ERR_STATE: StateError,
    ERR_RANGE: RangeError,
    ERR_TASK_FAILED: TaskFailedError,
}


def status_name(status: int) -> str:
    return _capi.hx_status_str(status).decode()


def last_error() -> str:
    """``hx_last_error()`` of the calling thread."""
    return (_capi.hx_last_error() or b"").decode("utf-8", "replace")


def error(status: int, call: Optional[str] = None, message: Optional[str] = None) -> HeteroError:
    cls = _BY_STATUS.get(status, HeteroError)
    return cls(status, last_error() if message is None else message, call)


def check(status: int, call: str) -> None:
    """Raises the error of a failed call; its message is read at once, on
    the thread that made the call (hx_last_error is per thread)."""
    if status != OK:
        raise error(status, call)

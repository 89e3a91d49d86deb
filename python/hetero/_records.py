"""C structs read into plain Python records."""
from __future__ import annotations

import ctypes
from types import SimpleNamespace
from typing import Any, Dict


class Record(SimpleNamespace):
    """A C struct's fields as attributes (strings decoded, arrays as lists)."""

    def asdict(self) -> Dict[str, Any]:
        return dict(vars(self))


def value(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, ctypes.Array):
        if v._type_ is ctypes.c_char:
            return v.value.decode("utf-8", "replace")
        return [value(x) for x in v]
    if isinstance(v, ctypes.Structure):
        return record(v)
    return v


def record(s: ctypes.Structure, **extra: Any) -> Record:
    out = {name: value(getattr(s, name)) for name, _ in s._fields_}
    out.update(extra)
    return Record(**out)

"""Where libhetero.so is.

In order: $HETERO_LIBRARY (a path to a libhetero.so), the copy installed
inside this package (``pip install`` builds and ships it), then the
checkout's own build (``build/libhetero.so`` beside ``python/``), so the
tests can run against the tree without installing.
"""
from __future__ import annotations

import os
from pathlib import Path

NAME = "libhetero.so"


def candidates() -> list:
    here = Path(__file__).resolve().parent
    out = []
    env = os.environ.get("HETERO_LIBRARY")
    if env:
        return [Path(env)]
    out.append(here / NAME)
    out.append(here.parent.parent / "build" / NAME)
    return out


def find_library() -> Path:
    tried = candidates()
    for p in tried:
        if p.is_file():
            return p
    raise ImportError(
        "hetero: libhetero.so not found (looked at " + ", ".join(str(p) for p in tried) +
        "); install the package with 'pip install ./python' from the checkout, run 'make lib', "
        "or set HETERO_LIBRARY to its path")

"""A small reader of C declarations as hetero.h writes them.

The binding states every function and struct it uses in C, copied from
``include/hetero.h`` (see ``_capi.py``), and this module turns those
declarations into ctypes types.  The test suite reads the header itself
with the same reader and checks that each declaration here is the header's,
so the binding cannot drift from the C API unnoticed.

Only the forms hetero.h uses are understood: ``T name``, pointers, ``const``,
arrays of a constant size, ``struct`` tags, and typedef names (enums,
structs, opaque handles and callbacks) registered in a type table.
"""
from __future__ import annotations

import ctypes
import re
from typing import Dict, List, Optional, Tuple

# C base types and the ctypes they are.  Enums are int-sized in hetero.h.
BASE_TYPES: Dict[str, object] = {
    "void": None,
    "char": ctypes.c_char,
    "int": ctypes.c_int,
    "unsigned": ctypes.c_uint,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "size_t": ctypes.c_size_t,
    "int32_t": ctypes.c_int32,
    "uint32_t": ctypes.c_uint32,
    "int64_t": ctypes.c_int64,
    "uint64_t": ctypes.c_uint64,
    "uint8_t": ctypes.c_uint8,
}

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\*|\[[^\]]*\]|\S")


def strip_comments(text: str) -> str:
    return _COMMENT.sub(" ", text)


class Decl:
    """One declarator: its name, base type name, pointer depth, array size."""

    def __init__(self, name: Optional[str], base: str, stars: int, array: Optional[str]):
        self.name, self.base, self.stars, self.array = name, base, stars, array

    def key(self) -> Tuple[str, int, Optional[str]]:
        """What must agree between two declarations (const is not compared:
        it changes no ABI)."""
        return (self.base, self.stars, self.array)

    def __repr__(self) -> str:
        return f"{self.base}{'*' * self.stars} {self.name}" + (f"[{self.array}]" if self.array else "")


def parse_decl(text: str, named: bool = True) -> Decl:
    """Parses ``const char *const *stop`` or ``char name[128]``."""
    toks = [t for t in _TOKEN.findall(text) if t not in ("const", "struct", "enum")]
    array = None
    if toks and toks[-1].startswith("["):
        array = toks.pop()[1:-1].strip()  # a number or a #define's name
    name = None
    if named and len([t for t in toks if t != "*"]) >= 2 and toks[-1] != "*":
        name = toks.pop()
    stars = toks.count("*")
    words = [t for t in toks if t != "*"]
    if not words:
        raise ValueError(f"no type in C declaration {text!r}")
    return Decl(name, " ".join(words), stars, array)


def parse_function(text: str) -> Tuple[str, Decl, List[Decl]]:
    """Parses ``hx_status hx_runtime_open(hx_runtime **out, const X *o);``
    into its name, return type and parameters."""
    text = " ".join(strip_comments(text).replace("HX_API", " ").split()).rstrip(";").strip()
    m = re.match(r"(.*?)([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)$", text, re.S)
    if not m:
        raise ValueError(f"not a C function declaration: {text!r}")
    ret = parse_decl(m.group(1), named=False)
    params = [p.strip() for p in m.group(3).split(",")] if m.group(3).strip() not in ("", "void") else []
    return m.group(2), ret, [parse_decl(p) for p in params]


def parse_struct_body(body: str) -> List[Decl]:
    """Parses a struct's members: ``uint32_t a, b; char name[32];``."""
    out: List[Decl] = []
    for stmt in strip_comments(body).split(";"):
        stmt = " ".join(stmt.split())
        if not stmt:
            continue
        if "(" in stmt:
            raise ValueError(f"function pointer member {stmt!r}: use a typedef")
        # "uint32_t a, b" and "int *p, q[3]": the base type is the words
        # before the first declarator.
        first, *rest = stmt.split(",")
        d = parse_decl(first)
        out.append(d)
        for r in rest:
            e = parse_decl(f"{d.base} {r}")
            out.append(e)
    return out


class TypeTable:
    """Typedef names -> ctypes types, and declarations -> ctypes types."""

    def __init__(self) -> None:
        self.types: Dict[str, object] = dict(BASE_TYPES)
        self.constants: Dict[str, int] = {}

    def add(self, name: str, t: object) -> None:
        self.types[name] = t

    def ctype(self, d: Decl) -> object:
        if d.base not in self.types:
            raise KeyError(f"C type {d.base!r} is not known to the binding")
        t = self.types[d.base]
        stars = d.stars
        # Strings: char * in and out (bytes, or a create_string_buffer).
        if d.base == "char" and stars >= 1:
            t, stars = ctypes.c_char_p, stars - 1
        elif d.base == "void" and stars >= 1:
            t, stars = ctypes.c_void_p, stars - 1
        for _ in range(stars):
            t = ctypes.POINTER(t)  # type: ignore[arg-type]
        if d.array is not None:
            n = self.constants[d.array] if d.array in self.constants else int(d.array, 0)
            t = t * n  # type: ignore[operator]
        return t

    def structure(self, name: str, body: str, base: type = ctypes.Structure) -> type:
        """A ctypes Structure from a C struct body, registered as `name`."""
        fields = [(d.name, self.ctype(d)) for d in parse_struct_body(body)]
        cls = type(name, (base,), {"_fields_": fields, "_c_body_": body})
        self.add(name, cls)
        return cls

    def callback(self, decl: str) -> object:
        """A CFUNCTYPE from ``int name(void *user, ...);``, registered as name."""
        name, ret, params = parse_function(decl)
        t = ctypes.CFUNCTYPE(self.ctype(ret), *[self.ctype(p) for p in params])
        self.add(name, t)
        return t

    def function(self, lib: ctypes.CDLL, decl: str):
        name, ret, params = parse_function(decl)
        f = getattr(lib, name)
        f.restype = self.ctype(ret)
        f.argtypes = [self.ctype(p) for p in params]
        f._c_decl_ = decl
        return name, f

"""The binding's declarations are hetero.h's: every function, struct,
callback, constant and status code it declares is compared with the
header, and every struct's layout with a C compiler's."""
from __future__ import annotations

import ctypes
import re
import shutil
import subprocess

import pytest

from conftest import ROOT
from hetero import _capi as C
from hetero import _cdecl, errors

HEADER = (ROOT / "include" / "hetero.h").read_text()
CLEAN = _cdecl.strip_comments(HEADER)


def header_functions():
    """name -> declaration text of every HX_API function (parsed when
    bound: those with function-pointer parameters are not)."""
    out = {}
    for m in re.finditer(r"HX_API\s+([^;]*);", CLEAN):
        name = re.search(r"(\w+)\s*\(", m.group(1)).group(1)
        out[name] = m.group(1)
    return out


def header_struct(name):
    m = re.search(r"typedef struct(?:\s+\w+)?\s*\{([^{}]*)\}\s*%s\s*;" % name, CLEAN)
    assert m, f"hetero.h has no struct {name}"
    return _cdecl.parse_struct_body(m.group(1))


def test_every_function_matches_the_header():
    h = header_functions()
    assert len(h) > 50, "the header's reader found too few functions"
    for line in C.FUNCTIONS.strip().splitlines():
        name, ret, params = _cdecl.parse_function(line)
        assert name in h, f"{name} is bound but hetero.h does not declare it"
        _, hret, hparams = _cdecl.parse_function(h[name])
        assert ret.key() == hret.key(), f"{name} returns {hret} in hetero.h, {ret} in the binding"
        assert [p.key() for p in params] == [p.key() for p in hparams], \
            f"{name}: hetero.h takes {hparams}, the binding {params}"


def test_every_struct_matches_the_header():
    for name, body in {**C.STRUCTS, **C.LATE_STRUCTS}.items():
        ours = _cdecl.parse_struct_body(body)
        theirs = header_struct(name)
        assert [(d.name, d.key()) for d in ours] == [(d.name, d.key()) for d in theirs], \
            f"struct {name} differs from hetero.h"


def test_every_callback_matches_the_header():
    for name, decl in C.CALLBACKS.items():
        m = re.search(r"typedef\s+(\w+)\s*\(\*\s*%s\)\s*\(([^)]*)\)\s*;" % name, CLEAN)
        assert m, f"hetero.h has no callback typedef {name}"
        _, ret, params = _cdecl.parse_function(decl)
        _, hret, hparams = _cdecl.parse_function(f"{m.group(1)} {name}({m.group(2)})")
        assert (ret.key(), [p.key() for p in params]) == (hret.key(), [p.key() for p in hparams]), name


def test_constants_and_status_codes_match_the_header():
    for name, value in C.CONSTANTS.items():
        m = re.search(r"#define\s+%s\s+(\d+)" % name, HEADER)
        assert m and int(m.group(1)) == value, name
    codes = dict((n, int(v)) for n, v in re.findall(r"X\((HX_(?:OK|ERR_\w+)),\s*(-?\d+),", HEADER))
    assert len(codes) >= 12
    for n, v in codes.items():
        assert getattr(errors, n[3:]) == v, n
        assert C.hx_status_str(v).decode() == n
    for n, v in re.findall(r"(HX_FINISH_\w+) = (\d+)", HEADER):
        assert C.hx_finish_reason_str(int(v)).decode() == n[10:].lower() or n == "HX_FINISH_NONE"


def test_the_reader_would_see_a_drift():
    # The check above can fail: a parameter of another type, a renamed or
    # retyped member, a pointer level, an array size are all told apart.
    f = _cdecl.parse_function
    assert f("int f(int32_t a);")[2][0].key() != f("int f(uint32_t a);")[2][0].key()
    assert f("int f(hx_model **m);")[2][0].key() != f("int f(hx_model *m);")[2][0].key()
    a = _cdecl.parse_struct_body("char name[128]; uint32_t a, b;")
    b = _cdecl.parse_struct_body("char name[64]; uint32_t a; uint64_t b;")
    assert [(d.name, d.key()) for d in a] != [(d.name, d.key()) for d in b]


@pytest.mark.skipif(not shutil.which("cc"), reason="no C compiler")
def test_struct_layouts_match_the_compilers(tmp_path):
    structs = {**C.STRUCTS, **C.LATE_STRUCTS}
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "hetero.h"', "int main(void) {"]
    for name in structs:
        cls = getattr(C, name)
        lines.append(f'printf("{name} %zu\\n", sizeof({name}));')
        for field, _ in cls._fields_:
            lines.append(f'printf("{name}.{field} %zu\\n", offsetof({name}, {field}));')
    lines.append("return 0; }")
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run(["cc", "-std=c11", f"-I{ROOT / 'include'}", str(src), "-o", str(exe)], check=True)
    got = dict(l.split() for l in subprocess.run([str(exe)], check=True, capture_output=True,
                                                 text=True).stdout.splitlines())
    for name in structs:
        cls = getattr(C, name)
        assert int(got[name]) == ctypes.sizeof(cls), f"sizeof({name})"
        for field, _ in cls._fields_:
            assert int(got[f"{name}.{field}"]) == getattr(cls, field).offset, f"{name}.{field}"

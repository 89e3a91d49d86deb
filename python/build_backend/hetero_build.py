"""The package's build backend (PEP 517), in the tree: it needs nothing
from the package index.

``pip install ./python`` (from a checkout) calls build_wheel, which runs
the project's own Makefile (``make lib``, and ``make cuda``, which builds
the CUDA plugin where nvcc is found) in the checkout, then writes a wheel
holding the ``hetero`` package with libhetero.so (and libhetero-cuda.so,
when built) inside it.  Extra make arguments come from $HETERO_MAKEFLAGS
(e.g. ``NO_CUDA=1`` or ``CC=clang``).  ``pip install -e ./python`` points
at the tree instead, which then finds the checkout's build/libhetero.so.
"""
from __future__ import annotations

import base64
import hashlib
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

PKG_DIR = Path(__file__).resolve().parent.parent  # python/
ROOT = PKG_DIR.parent                              # the checkout
NAME = "hetero"
SUMMARY = "Python binding of hetero, transformer inference across CPUs, GPUs and FPGAs"
REQUIRES = ["numpy"]


def _version() -> str:
    h = (ROOT / "include" / "hetero.h").read_text()
    parts = [re.search(rf"#define HX_VERSION_{k} (\d+)", h).group(1) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def _check_tree() -> None:
    if not (ROOT / "Makefile").is_file() or not (ROOT / "include" / "hetero.h").is_file():
        raise RuntimeError(f"hetero: {PKG_DIR} is not inside a hetero checkout (no ../Makefile or "
                           "../include/hetero.h): build the package from the repository's python/ folder")


def _dist_info() -> str:
    return f"{NAME}-{_version()}.dist-info"


def _metadata() -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {_version()}", f"Summary: {SUMMARY}",
             "Requires-Python: >=3.8"]
    lines += [f"Requires-Dist: {r}" for r in REQUIRES]
    readme = PKG_DIR / "README.md"
    if readme.is_file():
        lines += ["Description-Content-Type: text/markdown", "", readme.read_text()]
    return "\n".join(lines) + "\n"


def _tag() -> str:
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"py3-none-{plat}"


def _make(*targets: str) -> None:
    jobs = os.environ.get("HETERO_MAKE_JOBS") or str(min(os.cpu_count() or 1, 8))
    cmd = ["make", "-C", str(ROOT), f"-j{jobs}", *shlex.split(os.environ.get("HETERO_MAKEFLAGS", "")), *targets]
    print("hetero: " + " ".join(cmd), file=sys.stderr)
    r = subprocess.run(cmd, stdout=sys.stderr)
    if r.returncode != 0:
        raise RuntimeError(f"hetero: '{' '.join(cmd)}' failed (exit {r.returncode}); its output is above")


def _build_dir() -> Path:
    for a in shlex.split(os.environ.get("HETERO_MAKEFLAGS", "")):
        if a.startswith("BUILD="):
            p = Path(a[6:])
            return p if p.is_absolute() else ROOT / p
    return ROOT / "build"


class _Wheel:
    def __init__(self, path: Path):
        self.zip = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED)
        self.records = []

    def add(self, arcname: str, data: bytes, mode: int = 0o644) -> None:
        info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = (0o100000 | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.records.append(f"{arcname},sha256={digest},{len(data)}")

    def close(self, dist_info: str) -> None:
        self.records.append(f"{dist_info}/RECORD,,")
        self.zip.writestr(f"{dist_info}/RECORD", "\n".join(self.records) + "\n")
        self.zip.close()


def _wheel_file(tag: str) -> str:
    return f"{NAME}-{_version()}-{tag}.whl"


def _write_dist_info(w: _Wheel, tag: str) -> str:
    di = _dist_info()
    w.add(f"{di}/METADATA", _metadata().encode())
    w.add(f"{di}/WHEEL", f"Wheel-Version: 1.0\nGenerator: hetero_build\nRoot-Is-Purelib: false\nTag: {tag}\n".encode())
    return di


# -- PEP 517 hooks -------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _check_tree()
    d = Path(metadata_directory) / _dist_info()
    d.mkdir(parents=True, exist_ok=True)
    (d / "METADATA").write_text(_metadata())
    (d / "WHEEL").write_text(f"Wheel-Version: 1.0\nGenerator: hetero_build\nRoot-Is-Purelib: false\nTag: {_tag()}\n")
    return d.name


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _check_tree()
    _make("lib", "cuda")
    build = _build_dir()
    lib = build / "libhetero.so"
    if not lib.is_file():
        raise RuntimeError(f"hetero: make built no {lib}")
    tag = _tag()
    out = Path(wheel_directory) / _wheel_file(tag)
    w = _Wheel(out)
    for f in sorted((PKG_DIR / NAME).rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts and f.suffix in (".py", ".typed"):
            w.add(f.relative_to(PKG_DIR).as_posix(), f.read_bytes())
    w.add(f"{NAME}/libhetero.so", lib.read_bytes(), 0o755)
    plugin = build / "libhetero-cuda.so"
    if plugin.is_file():  # found beside libhetero by the CUDA device family
        w.add(f"{NAME}/libhetero-cuda.so", plugin.read_bytes(), 0o755)
    w.close(_write_dist_info(w, tag))
    return out.name


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _check_tree()
    _make("lib")
    tag = _tag()
    out = Path(wheel_directory) / _wheel_file(tag)
    w = _Wheel(out)
    w.add(f"_{NAME}_editable.pth", (str(PKG_DIR) + "\n").encode())
    w.close(_write_dist_info(w, tag))
    return out.name

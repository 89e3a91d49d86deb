"""The build backend: the wheel it writes holds the package and the
build's libhetero.so, its RECORD is right, and it imports from where it
is unpacked, with the library inside it."""
from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import subprocess
import sys
import zipfile

from conftest import ROOT, build_dir


def test_the_wheel(tmp_path, monkeypatch):
    # The tree is built already (make test builds it first), so make only
    # checks it; the CUDA plugin is left out here.
    for v in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("HETERO_MAKEFLAGS", f"NO_CUDA=1 BUILD={build_dir()}")
    spec = importlib.util.spec_from_file_location("hetero_build", ROOT / "python/build_backend/hetero_build.py")
    backend = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(backend)
    name = backend.build_wheel(str(tmp_path))
    assert name.startswith("hetero-0.1.0-py3-none-") and name.endswith(".whl")
    with zipfile.ZipFile(tmp_path / name) as z:
        names = set(z.namelist())
        assert {"hetero/__init__.py", "hetero/_capi.py", "hetero/libhetero.so", "hetero/py.typed"} <= names
        di = "hetero-0.1.0.dist-info"
        meta = z.read(f"{di}/METADATA").decode()
        assert "Name: hetero" in meta and "Requires-Dist: numpy" in meta
        assert "Root-Is-Purelib: false" in z.read(f"{di}/WHEEL").decode()
        record = [l.split(",") for l in z.read(f"{di}/RECORD").decode().splitlines()]
        assert {r[0] for r in record} == names
        for path, digest, size in record:
            if path.endswith("RECORD"):
                continue
            data = z.read(path)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={want}" and int(size) == len(data), path
        assert z.read("hetero/libhetero.so") == (build_dir() / "libhetero.so").read_bytes()
        z.extractall(tmp_path / "site")
    env = {k: v for k, v in os.environ.items() if k != "HETERO_LIBRARY"}
    env["PYTHONPATH"] = str(tmp_path / "site")
    out = subprocess.run([sys.executable, "-c", "import hetero, hetero._capi as c; print(c.LIBRARY_PATH); "
                          "print(hetero.Runtime(devices='cpu').devices()[0].family_name)"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(tmp_path / "site" / "hetero" / "libhetero.so"), "cpu"]

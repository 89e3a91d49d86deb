"""Shared fixtures.  The suite runs against the checkout's build
(build/libhetero.so, or $HETERO_LIBRARY) or an installed package alike;
`make test` runs it through tests/test_python.c with HX_BUILD,
HX_CACHE_DIR and HX_TEST_SMOLLM2 set."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
if "HX_BUILD" in os.environ and "HETERO_LIBRARY" not in os.environ:
    os.environ["HETERO_LIBRARY"] = str(Path(os.environ["HX_BUILD"]) / "libhetero.so")

import hetero  # noqa: E402


def build_dir() -> Path:
    return Path(os.environ.get("HX_BUILD", ROOT / "build"))


@pytest.fixture(scope="session")
def runtime():
    rt = hetero.Runtime(devices="cpu", cpu_threads=2)
    yield rt
    rt.close()


@pytest.fixture(scope="session")
def tiny_path() -> str:
    return hetero.synthetic_path("tiny", "f16")


@pytest.fixture(scope="session")
def tiny(runtime, tiny_path):
    m = hetero.Model(runtime, tiny_path, n_ctx=256)
    yield m
    m.close()


@pytest.fixture(scope="session")
def smollm2_path() -> str:
    p = os.environ.get("HX_TEST_SMOLLM2")
    if not p or not os.path.exists(p):
        if os.environ.get("CI"):
            pytest.fail("HX_TEST_SMOLLM2 names no readable file (make test sets it)")
        pytest.skip("no SmolLM2 file: HX_TEST_SMOLLM2 is not set (make test sets it)")
    return p


@pytest.fixture(scope="session")
def smollm2(smollm2_path):
    llm = hetero.Llama(model_path=smollm2_path, n_ctx=512, n_threads=2, verbose=False)
    yield llm
    llm.close()

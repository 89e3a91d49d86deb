#!/usr/bin/env python3
"""Runs llama.cpp's server test suite against one server binary, offline.

  python3 bench/llama-server-tests/run.py --server BIN --junit OUT.xml \
      [--flavor llama|hetero] [--tests DIR] [--all] [-- PYTEST ARGS]

--tests is llama.cpp's tools/server/tests folder; by default the one
tests/fetch-llamacpp-sdist.sh extracts (from the llama-cpp-python sdist the
project already fetches and checks) into build/models (make test's $MODELS).  The
flavor is guessed from the binary's name.  Models: SmolLM2-135M-Instruct
(LST_SMOLLM2, default build/test-cache's or $HX_TEST_SMOLLM2) stands for
the suite's tinyllama/stories models, Qwen2.5-Coder-0.5B-Instruct (LST_QWEN)
for its Qwen chat/tool-call models; see lst_plugin.py.

The files and tests for features out of this comparison's scope
(OUT_OF_SCOPE, OUT_OF_SCOPE_TESTS) are left out unless --all.  compare.py turns two runs' XML into the table."""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

OUT_OF_SCOPE = {
    "test_vision_api.py": "vision (multimodal projector)",
    "test_lora.py": "LoRA adapters",
    "test_speculative.py": "speculative decoding",
    "test_router.py": "router mode (several models)",
    "test_slot_save.py": "slot saving",
    # These two start llama-server as a router (ServerPreset.router(): no
    # model of its own), which serves the web UI's agent its tools.
    "test_mcp_servers.py": "router mode: MCP servers for the web UI's agent",
    "test_tools_builtin.py": "router mode: built-in tools (files, shell) for the web UI's agent",
    # A server-side fetcher of any URL for the web UI's MCP client, which
    # hetero's page does not have: a surface for server-side request
    # forgery that hetero-server does not open.
    "test_proxy.py": "the web UI's MCP CORS proxy",
}
# Tests of those features inside files that are in scope.
OUT_OF_SCOPE_TESTS = {
    "test_security.py::test_cors_origins_defaults_to_localhost_with_tools_enabled":
        "router mode (ServerPreset.router()) with the web UI's built-in tools",
    "test_security.py::test_cors_proxy_only_forwards_explicit_proxy_headers": "the web UI's MCP CORS proxy",
    # An image to a model without a projector: llama-server answers 500,
    # hetero-server 400 (the request, not the server, is at fault).
    "test_compat_anthropic.py::test_anthropic_tool_result_with_image": "vision without a multimodal projector",
    "test_compat_anthropic.py::test_anthropic_vision_format_accepted": "vision without a multimodal projector",
}


def default_tests():
    cache = os.environ.get("MODELS", os.path.join(ROOT, "build", "models"))  # where make test fetches it too
    models = subprocess.run(["sh", os.path.join(ROOT, "tests", "fetch-llamacpp-sdist.sh"), cache],
                            stdout=subprocess.PIPE, text=True).stdout.strip()
    if not models:
        sys.exit("run.py: no llama.cpp test folder (tests/fetch-llamacpp-sdist.sh failed; give --tests DIR)")
    return os.path.join(os.path.dirname(models), "tools", "server", "tests")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--flavor", choices=["llama", "hetero"])
    ap.add_argument("--tests")
    ap.add_argument("--junit", required=True)
    ap.add_argument("--all", action="store_true", help="also the out-of-scope files")
    ap.add_argument("pytest_args", nargs="*")
    a = ap.parse_args()
    tests = os.path.abspath(a.tests or default_tests())
    server = os.path.abspath(a.server)
    flavor = a.flavor or ("hetero" if "hetero" in os.path.basename(server) else "llama")
    env = dict(os.environ)
    env.update(LST_TESTS=tests, LST_SERVER=server, LST_FLAVOR=flavor,
               PYTHONPATH=HERE + os.pathsep + env.get("PYTHONPATH", ""))
    env.setdefault("LST_SMOLLM2", env.get("HX_TEST_SMOLLM2", os.path.join(ROOT, "build", "test-cache",
                                                                          "SmolLM2-135M-Instruct.Q4_1.gguf")))
    if not os.path.exists(env["LST_SMOLLM2"]):
        sys.exit(f"run.py: {env['LST_SMOLLM2']}: no such file (set LST_SMOLLM2)")
    ignore = [] if a.all else [f"--ignore=unit/{f}" for f in OUT_OF_SCOPE] + \
        [f"--deselect=unit/{t}" for t in OUT_OF_SCOPE_TESTS]
    cmd = [sys.executable, "-m", "pytest", "-p", "lst_plugin", "-q", "-rN", "--tb=line", "--show-capture=no", "-p", "no:cacheprovider",
           f"--junitxml={os.path.abspath(a.junit)}", "-o", "junit_family=xunit1", "-m", "not slow",
           *ignore, *(a.pytest_args or ["unit"])]
    print("run.py:", " ".join(cmd), f"(in {tests}, {flavor})", file=sys.stderr)
    return subprocess.call(cmd, cwd=tests, env=env)


if __name__ == "__main__":
    sys.exit(main())

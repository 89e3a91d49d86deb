#!/usr/bin/env python3
"""The table of two run.py runs: per test file, the tests llama-server
passed, hetero-server passed, and both; then each test that passes on
llama-server and not on hetero-server, with hetero's failure (its first
line).  OWNERS names the tests whose feature is another area's work.

  python3 bench/llama-server-tests/compare.py LLAMA.xml HETERO.xml[,RERUN.xml...]

(a later XML of the same server, e.g. one file run again, overrides)"""
import collections
import os
import re
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import OUT_OF_SCOPE_TESTS  # noqa: E402

# Failures (regex on "file::name: reason") that come from a feature owned
# by another area of hetero-server's work.
OWNERS = [
    (r"test_tool_call|'tools'|--tools|tools[12]\]", "tool calls"),
    (r"logit_bias|mirostat|n_probs|completion_probabilities|backend_sampling|penalt|top_n_sigma|dry|xtc|"
     r"typical|min_keep|samplers", "samplers"),
    (r"test_embedding|test_rerank|test_infill", "embeddings/rerank/infill"),
    (r"webui|static|index\.html|test_no_ui|ui-mcp-proxy", "web page"),
]


def load(path):
    res = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        f = tc.get("file") or tc.get("classname", "").replace(".", "/") + ".py"
        f = f.split("/")[-1]
        name = f"{f}::{tc.get('name')}"
        state, why = "passed", ""
        for child in tc:
            if child.tag in ("failure", "error"):
                state = "failed"
                why = (child.get("message") or child.text or "").strip().splitlines()
                why = why[0] if why else ""
            elif child.tag == "skipped":
                state, why = "skipped", (child.get("message") or "").strip()
        res[name] = (state, why)
    return res


def owner(text):
    for rx, who in OWNERS:
        if re.search(rx, text):
            return who
    return None


def load_all(paths):
    """Several runs of one server (comma-separated): a later one's results win."""
    res = {}
    for p in paths.split(","):
        res.update(load(p))
    return res


def main():
    llama, hetero = load_all(sys.argv[1]), load_all(sys.argv[2])
    # a run with --all (or from before a test was left out) has them: out of the table either way
    for name in OUT_OF_SCOPE_TESTS:
        llama.pop(name, None)
        hetero.pop(name, None)
    files = collections.OrderedDict()
    for name in sorted(set(llama) | set(hetero)):
        f = name.split("::")[0]
        row = files.setdefault(f, [0, 0, 0, 0])
        lp = llama.get(name, ("absent",))[0] == "passed"
        hp = hetero.get(name, ("absent",))[0] == "passed"
        row[0] += 1
        row[1] += lp
        row[2] += hp
        row[3] += lp and hp
    print(f"| {'test file':28} | tests | llama-server | hetero-server | both |")
    print(f"|{'-' * 30}|-------|--------------|---------------|------|")
    tot = [0, 0, 0, 0]
    for f, r in files.items():
        print(f"| {f:28} | {r[0]:5} | {r[1]:12} | {r[2]:13} | {r[3]:4} |")
        tot = [a + b for a, b in zip(tot, r)]
    print(f"| {'total':28} | {tot[0]:5} | {tot[1]:12} | {tot[2]:13} | {tot[3]:4} |")
    print()
    print("passed on llama-server, not on hetero-server:")
    for name in sorted(llama):
        if llama[name][0] == "passed" and hetero.get(name, ("absent",))[0] != "passed":
            st, why = hetero.get(name, ("absent", ""))
            who = owner(f"{name}: {why}")
            print(f"  {name}: {st}{' [' + who + ']' if who else ''}: {why[:200]}")
    print("\nleft out of the table (run.py's OUT_OF_SCOPE_TESTS):")
    for name, why in OUT_OF_SCOPE_TESTS.items():
        print(f"  {name}: {why}")
    extra = [n for n in sorted(hetero) if hetero[n][0] == "passed" and llama.get(n, ("absent",))[0] != "passed"]
    if extra:
        print("\npassed on hetero-server, not on llama-server:")
        for name in extra:
            print(f"  {name}: {llama.get(name, ('absent', ''))[0]}: {llama.get(name, ('', ''))[1][:160]}")


if __name__ == "__main__":
    main()

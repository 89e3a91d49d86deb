#!/usr/bin/env python3
"""hetero-server against llama-server on a thinking template: the same
requests to both, the thought read out as reasoning_content or left in
content, whole and streamed.

  compare-reasoning.py LLAMA_SERVER MODEL [--hetero BUILD/hetero-server] [--template FILE]

Both servers get the template (default tests/fixtures/think-chatml.jinja:
ChatML whose generation prompt opens "<think>\\n", as DeepSeek-R1's does)
and greedy requests with a reasoning budget that closes the thought, in
the formats auto, deepseek and none.  For each request it prints whether
the raw texts (format none) are equal, and whether the split answers
(reasoning_content, content) are; where the raw texts are equal, the
split ones must be, streamed too, else it exits 1.  The llama-server
binary is given, never built.
"""
import argparse
import importlib.util
import json
import os
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("compare_embed", os.path.join(HERE, "compare-embed.py"))
ce = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ce)

ASKS = ["Tell me a story.", "What is 2+2?", "Name three colors.", "Write a haiku about rain."]


def streamed(port, body):
    """(reasoning_content, content) added up from the stream's deltas"""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                                 data=json.dumps({**body, "stream": True}).encode(),
                                 headers={"Content-Type": "application/json"})
    thought, content = "", ""
    with urllib.request.urlopen(req, timeout=300) as r:
        for line in r.read().decode().split("\n"):
            if line.startswith("data: {"):
                for c in json.loads(line[6:]).get("choices", []):
                    thought += c["delta"].get("reasoning_content") or ""
                    content += c["delta"].get("content") or ""
    return thought or None, content


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("llama_server")
    ap.add_argument("model")
    ap.add_argument("--hetero", default=os.path.join(HERE, "..", "build", "hetero-server"))
    ap.add_argument("--template", default=os.path.join(HERE, "..", "tests", "fixtures", "think-chatml.jinja"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--budgets", default="3,8")
    a = ap.parse_args()
    common = ["-m", a.model, "-t", str(a.threads), "-c", "2048", "--chat-template-file", a.template]
    lp, hp = ce.free_port(), ce.free_port()
    with open("/dev/null", "w") as null:
        llama = ce.start([a.llama_server, "--jinja", *common], lp, "llama-server", null)
        hetero = ce.start([a.hetero, *common], hp, "hetero-server", null)
    bad = raw_equal = split_equal = n = 0
    try:
        print("| question | budget | raw text (none) | auto | deepseek | auto streamed |")
        print("|---|---:|---|---|---|---|")
        for q in ASKS:
            for budget in (int(x) for x in a.budgets.split(",")):
                body = {"messages": [{"role": "user", "content": q}], "max_tokens": 24, "temperature": 0,
                        "reasoning_budget_tokens": budget}

                def both(**kw):
                    out = []
                    for port in (lp, hp):
                        m = ce.post(port, "/v1/chat/completions", {**body, **kw})["choices"][0]["message"]
                        out.append((m.get("reasoning_content"), m.get("content")))
                    return out
                raw = both(reasoning_format="none")
                cells, same_raw = [], raw[0] == raw[1]
                for fmt in ("auto", "deepseek"):
                    s = both(reasoning_format=fmt)
                    cells.append("equal" if s[0] == s[1] else "thought equal" if s[0][0] == s[1][0] else "differ")
                    split_equal += s[0] == s[1]
                    n += 1
                    bad += same_raw and s[0] != s[1]
                st = [streamed(port, body) for port in (lp, hp)]
                cells.append("equal" if st[0] == st[1] else "thought equal" if st[0][0] == st[1][0] else "differ")
                bad += same_raw and st[0] != st[1]
                raw_equal += same_raw
                print(f"| {q} | {budget} | {'equal' if same_raw else 'differ'} | " + " | ".join(cells) + " |")
                if not same_raw:
                    print(f"|  | | llama-server: {raw[0][1]!r} | hetero-server: {raw[1][1]!r} | | |")
    finally:
        for p in (llama, hetero):
            p.terminate()
            p.wait()
    print(f"\nraw texts equal on {raw_equal} of {len(ASKS) * len(a.budgets.split(','))} requests; split answers "
          f"equal on {split_equal} of {n}; {bad} split differently from equal raw texts")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

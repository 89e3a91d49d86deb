#!/usr/bin/env python3
"""hetero-server against llama-server on embeddings and infill, side by side.

  compare-embed.py embed  LLAMA_SERVER MODEL [--hetero BUILD/hetero-server] [--pooling mean]
  compare-embed.py infill LLAMA_SERVER MODEL [--hetero ...] [--hetero-args "--kv-type f32"]

embed: starts both servers with --embedding --pooling P on the same file,
sends the same ~10 inputs to /v1/embeddings, prints the cosine of each
pair of vectors (both L2-normalized, llama-server's default), then
measures inputs/s with C concurrent clients (one input per request),
alternating the servers R rounds.
infill: sends the same prefix/suffix pairs (one with input_extra) to both
servers' /infill, greedy (temperature 0, fixed n_predict), and compares
the middles; where two part, it prints both servers' top candidates at the
step where they do.  The llama-server binary is given, never built.
"""
import argparse
import concurrent.futures as cf
import json
import math
import os
import socket
import subprocess
import sys
import time
import urllib.request

INPUTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Embeddings map text to vectors.",
    "def add(a, b):\n    return a + b\n",
    "Paris is the capital of France.",
    "A journey of a thousand miles begins with a single step.",
    "SELECT name FROM users WHERE age > 30;",
    "The mitochondria is the powerhouse of the cell.",
    "I like green tea in the morning, and coffee in the afternoon when the meetings drag on.",
    "42",
    "Transformers use attention to mix information across positions in a sequence.",
]

INFILL = [
    {"input_prefix": "def fibonacci(n):\n    ", "input_suffix": "\n    return fibonacci(n - 1) + fibonacci(n - 2)\n"},
    {"input_prefix": "import math\n\ndef circle_area(r):\n    return ", "input_suffix": "\n\nprint(circle_area(2))\n"},
    {"input_prefix": "for (int i = 0; i < n; i++) {\n    sum += ", "input_suffix": ";\n}\nreturn sum;\n"},
    {"input_prefix": "from utils import slugify\n\ndef make_url(title):\n    return \"/posts/\" + ",
     "input_suffix": "\n",
     "input_extra": [{"filename": "utils.py",
                      "text": "def slugify(text):\n    return text.lower().replace(' ', '-')\n"}]},
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def post(port, path, body, timeout=300):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def wait_up(port, proc, what):
    for _ in range(600):
        if proc.poll() is not None:
            sys.exit(f"{what} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.5)
    sys.exit(f"{what} did not come up")


def start(cmd, port, what, log):
    proc = subprocess.Popen(cmd + ["--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    wait_up(port, proc, what)
    return proc


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def top(step):
    """A step's candidates as (token, probability), best first."""
    cands = step.get("top_logprobs") or step.get("top_probs") or []
    return [(c["token"], math.exp(c["logprob"]) if "logprob" in c else c["prob"]) for c in cands]


def print_parting(hp, lp):
    """Where two greedy middles part: the first step whose chosen tokens
    differ, with each server's top candidates there."""
    for k, (h, l) in enumerate(zip(hp, lp)):
        if h["id"] != l["id"]:
            for name, step in (("hetero", h), ("llama", l)):
                print(f"  step {k}, {name} top: " + ", ".join(f"{t!r} {p:.4f}" for t, p in top(step)))
            return
    print("  no step's token differs in the probabilities returned")


def throughput(port, conc, n):
    def one(i):
        post(port, "/v1/embeddings", {"input": INPUTS[i % len(INPUTS)]})
    t0 = time.time()
    with cf.ThreadPoolExecutor(conc) as ex:
        list(ex.map(one, range(n)))
    return n / (time.time() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["embed", "infill"])
    ap.add_argument("llama_server")
    ap.add_argument("model")
    ap.add_argument("--hetero", default=os.path.join(os.path.dirname(__file__), "..", "build", "hetero-server"))
    ap.add_argument("--pooling", default="mean")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--requests", type=int, default=160)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--n-predict", type=int, default=32)
    ap.add_argument("--hetero-args", default="", help="more options for hetero-server (e.g. \"--kv-type f32\")")
    a = ap.parse_args()
    common = ["-m", a.model, "-c", str(a.ctx), "-t", str(a.threads)]
    if a.mode == "embed":
        extra = ["--embedding", "--pooling", a.pooling]
        hx_cmd = [a.hetero] + common + extra
        ll_cmd = [a.llama_server] + common + extra + ["-np", str(a.concurrency), "-b", "2048", "-ub", "2048"]
    else:
        hx_cmd = [a.hetero] + common
        ll_cmd = [a.llama_server] + common + ["-np", "1"]
    hx_cmd += a.hetero_args.split()
    log = open(os.devnull, "w")
    hp, lp = free_port(), free_port()
    hx = start(hx_cmd, hp, "hetero-server", log)
    ll = start(ll_cmd, lp, "llama-server", log)
    fails = 0
    try:
        if a.mode == "embed":
            # The reference: llama-server one input per request (several
            # inputs of one request sharing its batch can come back
            # different from the same input alone, with mean pooling).
            h = post(hp, "/v1/embeddings", {"input": INPUTS})
            ref = [post(lp, "/v1/embeddings", {"input": t})["data"][0]["embedding"] for t in INPUTS]
            own = [post(hp, "/v1/embeddings", {"input": t})["data"][0]["embedding"] for t in INPUTS]
            print(f"{'input':<50} {'vs llama':>9} {'batched vs alone':>17}")
            for i, text in enumerate(INPUTS):
                c = cosine(h["data"][i]["embedding"], ref[i])
                fails += c < 0.999
                print(f"{text[:48].encode('unicode_escape').decode():<50} {c:9.6f} "
                      f"{cosine(h['data'][i]['embedding'], own[i]):17.6f}")
            print(f"usage (hetero, the 10 inputs in one request): {h['usage']}")
            rates = {"hetero-server": [], "llama-server": []}
            for r in range(a.rounds):
                for name, port in (("hetero-server", hp), ("llama-server", lp)):
                    rates[name].append(throughput(port, a.concurrency, a.requests))
            for name, v in rates.items():
                print(f"{name}: {a.requests} inputs, {a.concurrency} concurrent: "
                      + ", ".join(f"{x:.1f}" for x in v) + " inputs/s")
            print(f"ratio hetero/llama (best of rounds): {max(rates['hetero-server']) / max(rates['llama-server']):.2f}")
        else:
            for i, body in enumerate(INFILL):
                # n_probs: each step's top candidates, to tell a near-tie
                # (two logits the runtimes' rounding can order either way)
                # from a real difference where the middles part.
                req = dict(body, temperature=0, n_predict=a.n_predict, seed=1, n_probs=3)
                h = post(hp, "/infill", req)
                l = post(lp, "/infill", dict(req, top_k=1))
                ht, lt = h["content"], l["content"]  # both answer llama-server's native shape
                same = ht == lt
                fails += not same
                print(f"pair {i}{' (input_extra)' if 'input_extra' in body else ''}: "
                      f"{'same' if same else 'DIFFERENT'}, {len(ht)} chars, "
                      f"prompt tokens hetero {h['tokens_evaluated']} llama {l['tokens_evaluated']}")
                print(f"  hetero: {ht!r}")
                if not same:
                    print(f"  llama:  {lt!r}")
                    print_parting(h.get("completion_probabilities", []), l.get("completion_probabilities", []))
    finally:
        for p in (hx, ll):
            p.terminate()
            p.wait()
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""hetero against llama.cpp on the same GGUF files, side by side.

Usage: bench/compare-llamacpp.py LLAMA_BENCH [--llama-quantize BIN]
                                 [--models tiny,small] [--types f16,q8_0,q4_0,q4_K_M]
                                 [-p 128] [-n 64] [-t 2] [-r 5]

LLAMA_BENCH is an llama-bench binary built beforehand (hetero does not
build llama.cpp).  For every model and type the two programs run in
alternation, one repetition at a time, so that both see the same machine
load; the table gives the median tokens/s of each and their ratio.
Files: the embedded synthetic models (written by build/hetero-run); a
Q4_K_M file is made by llama-quantize from the F16 one when the binary is
given (hetero reads it as any GGUF), else that type is skipped.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("HX_BUILD", os.path.join(ROOT, "build"))


def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "hetero", "models")


def synthetic(preset, typ, quantize_bin):
    """Path of the embedded model in `typ`, written on first use."""
    if typ.lower() == "q4_k_m":
        src = synthetic(preset, "f16", quantize_bin)
        out = os.path.join(cache_dir(), f"synthetic-{preset}-q4_K_M.gguf")
        if not os.path.exists(out):
            if not quantize_bin:
                return None
            subprocess.run([quantize_bin, src, out, "Q4_K_M"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return out
    path = os.path.join(cache_dir(), f"synthetic-{preset}-{typ}.gguf")
    if not os.path.exists(path):
        subprocess.run([os.path.join(BUILD, "hetero-run"), "--synthetic", f"{preset}:{typ}",
                        "--devices", "cpu", "-n", "1"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return path


def hetero_once(model, p, n, t):
    out = subprocess.run([os.path.join(BUILD, "hetero-bench"), "-m", model, "-p", str(p), "-n", str(n),
                          "-t", str(t), "-r", "1", "--devices", "cpu", "-o", "json"],
                         check=True, capture_output=True, text=True).stdout
    res = json.loads(out)["results"]
    return {r["test"]: r["avg_ts"] for r in res}


def llama_once(bench, model, p, n, t):
    out = subprocess.run([bench, "-m", model, "-p", str(p), "-n", str(n), "-t", str(t), "-r", "1",
                          "-o", "json"], check=True, capture_output=True, text=True).stdout
    res = json.loads(out)
    tests = {}
    for r in res:
        name = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
        tests[name] = r["avg_ts"]
    return tests


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("llama_bench")
    ap.add_argument("--llama-quantize")
    ap.add_argument("--models", default="tiny,small")
    ap.add_argument("--types", default="f16,q8_0,q4_0,q4_K_M")
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-r", type=int, default=5)
    a = ap.parse_args()
    if not os.access(a.llama_bench, os.X_OK):
        sys.exit(f"compare-llamacpp: {a.llama_bench} is not an executable llama-bench")
    print(f"| model | type | test | hetero t/s | llama.cpp t/s | hetero / llama.cpp |")
    print(f"| --- | --- | --- | ---: | ---: | ---: |")
    for preset in a.models.split(","):
        for typ in a.types.split(","):
            model = synthetic(preset, typ, a.llama_quantize)
            if model is None:
                print(f"| {preset} | {typ} | - | skipped: --llama-quantize not given | | |")
                continue
            samples = {"hetero": {}, "llama": {}}
            for _ in range(a.r):
                for who, fn in (("hetero", lambda: hetero_once(model, a.p, a.n, a.t)),
                                ("llama", lambda: llama_once(a.llama_bench, model, a.p, a.n, a.t))):
                    for test, ts in fn().items():
                        samples[who].setdefault(test, []).append(ts)
            for test in (f"pp{a.p}", f"tg{a.n}"):
                h = statistics.median(samples["hetero"][test])
                l = statistics.median(samples["llama"][test])
                print(f"| {preset} | {typ} | {test} | {h:.1f} | {l:.1f} | {h / l:.2f}x |", flush=True)


if __name__ == "__main__":
    main()

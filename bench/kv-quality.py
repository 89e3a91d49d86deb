#!/usr/bin/env python3
"""What a quantized KV cache costs, in hetero and beside llama.cpp's.

Usage: bench/kv-quality.py --model FILE --text FILE [--llama-perplexity BIN]
           [--pairs f16/f16,q8_0/q8_0,...] [-c 512] [--chunks N] [-t N]
           [--workdir DIR] [--json OUT]

Each tool first scores the text with an F16 K and V cache and saves that
run's log-probabilities (`--kl-divergence-base`); then every K/V type pair
(`--pairs`, K type / V type) is scored against its own tool's F16 run
(`--kl-divergence`): perplexity, the paired ratio PPL(pair) / PPL(F16 KV)
with its uncertainty (the two runs see the same tokens, so their covariance
is subtracted), mean KL divergence from the F16 KV run and how often both
put the same token on top.  llama-perplexity runs with `-fa on` (llama.cpp
quantizes V only with flash attention).  With both tools, one more row
scores hetero's F16 KV run against llama.cpp's: how far apart the two
runtimes are before any KV quantization, the floor under which their rows
cannot be told apart.

The ratio's uncertainty is that of the text's tokens: two runtimes whose
quantized V rows round differently (their F16 runs already differ) draw
different errors, so a difference between their rows of about the printed
uncertainty is chance; the KL divergence, an average over the whole
vocabulary at every position, separates them sooner.
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("HX_BUILD", os.path.join(ROOT, "build"))
PAIRS = "f16/f16,q8_0/q8_0,q4_0/q4_0,q8_0/q4_0,q4_0/q8_0,f16/q4_0,q4_0/f16"
TYPES = ("f32", "f16", "q8_0", "q4_0")


def run(cmd, log):
    """Runs cmd, its output appended to log; returns the output (raises on failure)."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n" + r.stdout + "\n")
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode} (see {log})")
    return r.stdout


def number(pattern, out, what):
    """(value, uncertainty) of the summary line matching pattern."""
    m = re.search(pattern + r"\s*:\s*(-?[0-9.]+)\s*±\s*([0-9.]+)", out)
    if not m:
        raise RuntimeError(f"no {what} in the output")
    return float(m.group(1)), float(m.group(2))


def parse_kld(out):
    """The summary of a --kl-divergence run (both tools print llama.cpp's)."""
    row = {}
    row["ppl"], row["ppl_err"] = number(r"Mean PPL\(Q\)", out, "PPL(Q)")
    row["ratio"], row["ratio_err"] = number(r"Mean PPL\(Q\)/PPL\(base\)", out, "PPL ratio")
    row["kld"], row["kld_err"] = number(r"Mean\s+KLD", out, "KLD")
    m = re.search(r"Same top p:\s*([0-9.]+)\s*±\s*([0-9.]+)", out)
    row["same_top"] = float(m.group(1)) if m else None
    return row


def parse_base(out):
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out)
    if not m:
        raise RuntimeError("no final perplexity in the output")
    return {"ppl": float(m.group(1)), "ppl_err": float(m.group(2))}


def tool_cmd(tool, a):
    common = ["-m", a.model, "-c", str(a.c), "-t", str(a.threads)]
    if a.chunks:
        common += ["--chunks", str(a.chunks)]
    if tool == "hetero":
        return [os.path.join(BUILD, "hetero-perplexity"), "-q"] + common
    # one sequence per batch: llama.cpp's attention then reads no other chunk's cells
    return [a.llama_perplexity, "-fa", "on", "-b", str(a.c)] + common


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--text", required=True)
    p.add_argument("--llama-perplexity", help="llama.cpp's llama-perplexity, to score beside hetero")
    p.add_argument("--pairs", default=PAIRS, help="K/V type pairs (default: %(default)s)")
    p.add_argument("-c", type=int, default=512)
    p.add_argument("--chunks", type=int, default=0, help="score the first N chunks (default: all)")
    p.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--workdir", default=os.path.expanduser("~/.cache/hetero/kv-quality"))
    p.add_argument("--json", help="write the rows there")
    a = p.parse_args()
    pairs = []
    for pr in a.pairs.split(","):
        kv = pr.strip().split("/")
        if len(kv) != 2 or kv[0] not in TYPES or kv[1] not in TYPES:
            p.error(f"--pairs: '{pr}' is not K/V with each of {', '.join(TYPES)}")
        pairs.append((kv[0], kv[1]))
    for f in (a.model, a.text) + ((a.llama_perplexity,) if a.llama_perplexity else ()):
        if not os.path.isfile(f):
            p.error(f"{f}: no such file")
    os.makedirs(a.workdir, exist_ok=True)
    log = os.path.join(a.workdir, "kv-quality.log")
    tools = ["hetero"] + (["llama.cpp"] if a.llama_perplexity else [])
    rows = []
    base_of = {}
    for tool in tools:
        base_of[tool] = os.path.join(a.workdir, ("hetero" if tool == "hetero" else "llama") + "-f16.kld")
        out = run(tool_cmd(tool, a) + ["-f", a.text, "-ctk", "f16", "-ctv", "f16", "--kl-divergence-base",
                                       base_of[tool]], log)
        rows.append(dict(tool=tool, k="f16", v="f16", base=True, **parse_base(out)))
    for k, v in pairs:
        if (k, v) == ("f16", "f16"):
            continue
        for tool in tools:
            out = run(tool_cmd(tool, a) + ["-ctk", k, "-ctv", v, "--kl-divergence-base", base_of[tool],
                                           "--kl-divergence"], log)
            rows.append(dict(tool=tool, k=k, v=v, **parse_kld(out)))
    if a.llama_perplexity:
        out = run(tool_cmd("hetero", a) + ["-ctk", "f16", "-ctv", "f16", "--kl-divergence-base",
                                           base_of["llama.cpp"], "--kl-divergence"], log)
        rows.append(dict(tool="hetero vs llama.cpp's F16 KV", k="f16", v="f16", **parse_kld(out)))
    print("| K / V | tool | PPL | PPL / PPL(F16 KV) | mean KLD | same top |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        if r.get("base"):
            print(f"| {r['k']} / {r['v']} | {r['tool']} | {r['ppl']:.4f} ± {r['ppl_err']:.4f} | (base) | | |")
            continue
        top = f"{r['same_top']:.2f} %" if r["same_top"] is not None else ""
        print(f"| {r['k']} / {r['v']} | {r['tool']} | {r['ppl']:.4f} | {(r['ratio'] - 1) * 100:+.2f} % "
              f"± {r['ratio_err'] * 100:.2f} | {r['kld']:.5f} ± {r['kld_err']:.5f} | {top} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        print(f"kv-quality: {e}", file=sys.stderr)
        sys.exit(1)

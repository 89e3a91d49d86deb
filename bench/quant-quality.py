#!/usr/bin/env python3
"""How good hetero's quantized files are, beside llama-quantize's.

Usage: bench/quant-quality.py --model FILE --eval-text FILE --calib-text FILE
           [--llama-quantize BIN] [--recipes Q8_0,Q6_K,...] [--budgets 3.5,4.5]
           [--budget-types q8_0,q6_K,...]
           [-c 512] [--chunks N] [--calib-chunks N] [--workdir DIR] [--json OUT]

The model is first dequantized to F32 (`hetero-quantize --allow-requantize
MODEL base.gguf F32`): that file is the base every quantization starts from
and is judged against.  An importance matrix is collected on the base over
the calibration text (`hetero-imatrix`), and the base's log-probabilities
over the evaluation text are saved (`hetero-perplexity
--kl-divergence-base`).  Then, for each recipe, without and with the
importance matrix, hetero-quantize and llama-quantize (when given) each
write a file from the base, and every file is scored by the same program,
`hetero-perplexity --kl-divergence`: perplexity on the evaluation text and
mean KL divergence from the base.  Both tools' files are read by the same
runtime, so the figures differ only by what the quantizers chose.

`--budgets` adds hetero-quantize's budget mode (`--target-bpw B`, with the
importance matrix) at each size (bits per weight), `--budget-types`
limiting the types it may choose.

Sizes: the bytes of the file's tensors (header excluded) and bits per
weight over every tensor's elements, as llama.cpp counts BPW.
"""
import argparse
import json
import os
import re
import subprocess
import sys

import gguf_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("HX_BUILD", os.path.join(ROOT, "build"))
RECIPES = "Q8_0,Q6_K,Q5_K_M,Q4_K_M,Q3_K_M,Q2_K,IQ4_XS"


def run(cmd, log):
    """Runs cmd, its output appended to log; returns the output (raises on failure)."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n" + r.stdout + "\n")
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode} (see {log})")
    return r.stdout


def gguf_weights(path):
    """(bytes of every tensor's data, elements of every tensor) of a GGUF file."""
    with open(path, "rb") as f:
        data = f.read()
    table = gguf_file.tensors(data)
    elements = 0
    for _, dims, _, _ in table:
        count = 1
        for d in dims:
            count *= d
        elements += count
    return len(data) - table[0][3] if table else 0, elements


def score(path, a, base_kld, log):
    out = run([os.path.join(BUILD, "hetero-perplexity"), "-m", path, "--kl-divergence-base", base_kld,
               "--kl-divergence"], log)
    ppl = re.search(r"Mean PPL\(Q\)\s*:\s*([0-9.]+)", out)
    kld = re.search(r"Mean\s+KLD:\s*([0-9.]+)", out)
    top = re.search(r"Same top p:\s*([0-9.]+)", out)
    if not ppl or not kld:
        raise RuntimeError(f"no PPL/KLD in hetero-perplexity's output for {path} (see {log})")
    size, elements = gguf_weights(path)
    return {"file": os.path.basename(path), "bytes": size, "bpw": 8.0 * size / elements,
            "ppl": float(ppl.group(1)), "kld": float(kld.group(1)),
            "same_top": float(top.group(1)) if top else None}


def quantize(tool, a, base, out, recipe, imatrix, log):
    if os.path.exists(out):
        return
    if tool == "hetero":
        cmd = [os.path.join(BUILD, "hetero-quantize")]
    else:
        cmd = [a.llama_quantize]
    if imatrix:
        cmd += ["--imatrix", imatrix]
    cmd += recipe if isinstance(recipe, list) else []
    cmd += [base, out]
    if not isinstance(recipe, list):
        cmd.append(recipe)
    run(cmd, log)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--eval-text", required=True)
    p.add_argument("--calib-text", required=True)
    p.add_argument("--llama-quantize")
    p.add_argument("--recipes", default=RECIPES)
    p.add_argument("--budgets", default="")
    p.add_argument("--budget-types", default="")
    p.add_argument("-c", type=int, default=512)
    p.add_argument("--chunks", type=int, default=0)
    p.add_argument("--calib-chunks", type=int, default=0)
    p.add_argument("--workdir", default=os.path.join(os.path.expanduser("~"), ".cache", "hetero", "quant-quality"))
    p.add_argument("--json")
    a = p.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    log = os.path.join(a.workdir, "log.txt")
    chunks = ["--chunks", str(a.chunks)] if a.chunks else []
    w = lambda name: os.path.join(a.workdir, name)

    base = w("base-f32.gguf")
    if not os.path.exists(base):
        run([os.path.join(BUILD, "hetero-quantize"), "--allow-requantize", a.model, base, "F32"], log)
    imatrix = w("imatrix.gguf")
    if not os.path.exists(imatrix):
        calib = ["--chunks", str(a.calib_chunks)] if a.calib_chunks else []
        run([os.path.join(BUILD, "hetero-imatrix"), "-m", base, "-f", a.calib_text, "-c", str(a.c), "-o", imatrix]
            + calib, log)
    base_kld = w("base.kld")
    if not os.path.exists(base_kld):
        run([os.path.join(BUILD, "hetero-perplexity"), "-m", base, "-f", a.eval_text, "-c", str(a.c),
             "--kl-divergence-base", base_kld] + chunks, log)

    rows = []
    tools = ["hetero"] + (["llama.cpp"] if a.llama_quantize else [])
    for recipe in filter(None, a.recipes.split(",")):
        for im in (None, imatrix):
            for tool in tools:
                out = w(f"{tool}-{recipe}{'-imatrix' if im else ''}.gguf")
                try:
                    quantize(tool, a, base, out, recipe, im, log)
                    r = score(out, a, base_kld, log)
                except RuntimeError as e:
                    r = {"error": str(e)}
                r.update({"recipe": recipe, "imatrix": bool(im), "tool": tool})
                rows.append(r)
                print(json.dumps(r), file=sys.stderr)
    for b in filter(None, a.budgets.split(",")):
        limited = "-" + a.budget_types.replace(",", "-") if a.budget_types else ""
        out = w(f"hetero-budget-{b}{limited}.gguf")
        try:
            extra = ["--budget-types", a.budget_types] if a.budget_types else []
            quantize("hetero", a, base, out, ["--target-bpw", b] + extra, imatrix, log)
            r = score(out, a, base_kld, log)
        except RuntimeError as e:
            r = {"error": str(e)}
        r.update({"recipe": f"budget {b} bpw" + (f" ({a.budget_types})" if a.budget_types else ""),
                  "imatrix": True, "tool": "hetero"})
        rows.append(r)
        print(json.dumps(r), file=sys.stderr)

    print(f"base: {os.path.basename(a.model)} dequantized to F32; eval text {os.path.basename(a.eval_text)}, "
          f"-c {a.c}{' --chunks ' + str(a.chunks) if a.chunks else ''}; imatrix over "
          f"{os.path.basename(a.calib_text)}\n")
    print("| recipe | imatrix | quantizer | MiB | BPW | PPL | mean KLD | same top |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        if "error" in r:
            print(f"| {r['recipe']} | {'yes' if r['imatrix'] else 'no'} | {r['tool']} | failed: {r['error']} ||||")
            continue
        top = f"{r['same_top']:.2f} %" if r["same_top"] is not None else ""
        print(f"| {r['recipe']} | {'yes' if r['imatrix'] else 'no'} | {r['tool']} | {r['bytes'] / 1048576:.2f} | "
              f"{r['bpw']:.3f} | {r['ppl']:.4f} | {r['kld']:.6f} | {top} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

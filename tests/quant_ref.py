#!/usr/bin/env python3
"""Cross-checks hetero's (de)quantization against gguf-py, llama.cpp's own
Python package, as an independent reference.

Usage: quant_ref.py DIR, where tests/test_quant.c wrote into DIR:
  input.f32          floats to quantize
  <type>.quant       hetero's quantization of input.f32
  <type>.blocks      random blocks (finite scales)
  <type>.deq         hetero's dequantization of <type>.blocks
Exits 1 if any dequantized value differs in a bit, or a quantized block in a
byte (for the types gguf-py can quantize)."""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

TYPES = {"f16": T.F16, "bf16": T.BF16, "q4_0": T.Q4_0, "q4_1": T.Q4_1, "q5_0": T.Q5_0,
         "q5_1": T.Q5_1, "q8_0": T.Q8_0, "q4_K": T.Q4_K, "q5_K": T.Q5_K, "q6_K": T.Q6_K,
         "q2_K": T.Q2_K, "q3_K": T.Q3_K, "iq4_nl": T.IQ4_NL, "iq4_xs": T.IQ4_XS}
QUANTIZABLE = {"f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0"}


def main(d):
    x = np.fromfile(os.path.join(d, "input.f32"), dtype=np.float32)
    bad = 0
    for name, qt in TYPES.items():
        blocks = np.fromfile(os.path.join(d, name + ".blocks"), dtype=np.uint8)
        ours = np.fromfile(os.path.join(d, name + ".deq"), dtype=np.float32)
        ref = quants.dequantize(blocks, qt).astype(np.float32).reshape(-1)
        diff = np.count_nonzero(ref.view(np.uint32) != ours.view(np.uint32))
        if diff:
            i = int(np.flatnonzero(ref.view(np.uint32) != ours.view(np.uint32))[0])
            print(f"quant_ref: {name} dequantize: {diff} values differ; first at {i}: "
                  f"gguf-py {ref[i]!r}, hetero {ours[i]!r}")
            bad += 1
        if name in QUANTIZABLE:
            q = np.fromfile(os.path.join(d, name + ".quant"), dtype=np.uint8)
            r = quants.quantize(x, qt).view(np.uint8).reshape(-1)
            nd = np.count_nonzero(q != r)
            if nd:
                i = int(np.flatnonzero(q != r)[0])
                print(f"quant_ref: {name} quantize: {nd} bytes differ; first at byte {i}")
                bad += 1
    print(f"quant_ref: {len(TYPES)} types checked against gguf-py, {bad} disagreements")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

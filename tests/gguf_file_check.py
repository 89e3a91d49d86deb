#!/usr/bin/env python3
"""Reads a GGUF file that hetero wrote with llama.cpp's gguf package and
checks that its dequantization of every tensor equals hetero's, bit for bit.

Usage: gguf_file_check.py FILE.gguf DIR
DIR holds <tensor name>.f32: hetero's dequantization (float32, row-major)."""
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf import quants


def main(path, d):
    r = GGUFReader(path)
    bad = checked = 0
    for t in r.tensors:
        ours = np.fromfile(os.path.join(d, t.name + ".f32"), dtype=np.float32)
        ref = quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
        same = ours.shape == ref.shape and np.array_equal(ours.view(np.uint32), ref.view(np.uint32))
        checked += 1
        if not same:
            bad += 1
            n = min(ours.size, ref.size)
            diff = np.nonzero(ours[:n].view(np.uint32) != ref[:n].view(np.uint32))[0]
            print(f"{t.name} ({t.tensor_type.name}): {len(diff)} values differ, first at {diff[:1]}",
                  file=sys.stderr)
    print(f"gguf_file_check: {checked} tensors, {bad} differ", file=sys.stderr)
    return 1 if bad or not checked else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))

#!/usr/bin/env python3
"""Expected token ids for a GGUF vocabulary, from llama.cpp's own tokenizer.

    python3 tests/gen-vocab-vectors.py LLAMA_TOKENIZE MODEL.gguf STRINGS.inp

STRINGS.inp holds test strings separated by "\\n__ggml_vocab_test__\\n" (the
layout of llama.cpp's tokenizer test files).  For each string this runs
llama.cpp's llama-tokenize (given as LLAMA_TOKENIZE, built from llama.cpp)
twice, with special-token text as plain text and parsed, never adding BOS,
and writes STRINGS.out and STRINGS.special.out: one line per string, the ids
separated by spaces, after a few '#' lines that say where they came from.

Run once when the strings change; the suites then hold hetero's tokenizer
to llama.cpp's answers without needing llama.cpp.
"""

import ast
import os
import subprocess
import sys
import tempfile

SEP = "\n__ggml_vocab_test__\n"


def tokenize(tool, model, text, parse_special):
    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write(text.encode("utf-8"))
        path = f.name
    try:
        cmd = [tool, "-m", model, "-f", path, "--ids", "--no-escape", "--no-bos", "--log-disable"]
        # llama-tokenize parses special-token text unless told not to.
        if not parse_special:
            cmd.append("--no-parse-special")
        out = subprocess.run(cmd, check=True, capture_output=True).stdout.decode()
    finally:
        os.unlink(path)
    return ast.literal_eval(out.strip().splitlines()[-1])


def main(argv):
    if len(argv) != 4:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    tool, model, inp = argv[1:]
    with open(inp, encoding="utf-8", newline="") as f:
        strings = f.read().split(SEP)
    stem = inp[:-4] if inp.endswith(".inp") else inp
    for parse_special, out in ((False, stem + ".out"), (True, stem + ".special.out")):
        with open(out, "w", encoding="utf-8") as f:
            f.write(f"# Token ids of each string of {os.path.basename(inp)}, one line each, as llama.cpp's\n"
                    f"# llama-tokenize gives them for {os.path.basename(model)}: no BOS added,\n"
                    f"# special-token text {'parsed' if parse_special else 'taken as plain text'}.\n"
                    f"# Written by tests/gen-vocab-vectors.py; do not edit.\n")
            for s in strings:
                f.write(" ".join(str(i) for i in tokenize(tool, model, s, parse_special)) + "\n")
        print(f"{out}: {len(strings)} strings", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

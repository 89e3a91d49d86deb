#!/usr/bin/env python3
"""Prints a GGUF file as llama.cpp's own reader (the `gguf` package) sees it.

The format is the one tests/test_gguf.c prints from hetero's reader, so the
test can compare the two line by line:

    version 3
    alignment 32
    data_offset 1024
    kv <name> <value>
    tensor <name> type=<n> ne=<a,b,...> offset=<o> size=<bytes> data=<hex>

Values: <type>:<decimal> for integers, float32:0x<bits> / float64:0x<bits>
for floats, bool:0|1, string:"<escaped>", and arrays as
array[<element type>;<n>](<value> <value> ...).  Names and strings escape
every byte outside 0x21..0x7e, and '"' and '\\', as \\xNN.

Exit status 3 (with a message on stderr) when the package is missing.
"""
import sys

try:
    import numpy as np
    from gguf import GGUFReader, GGUFValueType
except ImportError as e:  # pragma: no cover - the test checks this message
    sys.stderr.write(f"gguf_readback.py: {e}; run: pip install -r tests/requirements.txt\n")
    sys.exit(3)

TYPE_NAMES = {
    GGUFValueType.UINT8: "uint8", GGUFValueType.INT8: "int8",
    GGUFValueType.UINT16: "uint16", GGUFValueType.INT16: "int16",
    GGUFValueType.UINT32: "uint32", GGUFValueType.INT32: "int32",
    GGUFValueType.FLOAT32: "float32", GGUFValueType.BOOL: "bool",
    GGUFValueType.STRING: "string", GGUFValueType.ARRAY: "array",
    GGUFValueType.UINT64: "uint64", GGUFValueType.INT64: "int64",
    GGUFValueType.FLOAT64: "float64",
}


def escape(b):
    return "".join(chr(c) if 0x21 <= c <= 0x7E and c not in (0x22, 0x5C) else f"\\x{c:02x}"
                   for c in bytes(b))


def value(parts, i, vtype):
    """Formats the value whose parts start at parts[i]; returns (text, next i).

    The reader flattens a value into numpy arrays: a string is [length,
    bytes], a scalar [value], an array [element type, count, elements...]."""
    vtype = GGUFValueType(int(vtype))
    name = TYPE_NAMES[vtype]
    if vtype == GGUFValueType.STRING:
        return f'string:"{escape(parts[i + 1].tobytes())}"', i + 2
    if vtype == GGUFValueType.ARRAY:
        etype = int(parts[i][0])
        n = int(parts[i + 1][0])
        i += 2
        items = []
        for _ in range(n):
            text, i = value(parts, i, etype)
            items.append(text)
        return f"array[{TYPE_NAMES[GGUFValueType(etype)]};{n}]({' '.join(items)})", i
    v = parts[i]
    if vtype == GGUFValueType.FLOAT32:
        return f"float32:0x{int(v.view(np.uint32)[0]):08x}", i + 1
    if vtype == GGUFValueType.FLOAT64:
        return f"float64:0x{int(v.view(np.uint64)[0]):016x}", i + 1
    if vtype == GGUFValueType.BOOL:
        return f"bool:{int(bool(v[0]))}", i + 1
    return f"{name}:{int(v[0])}", i + 1


def main(path):
    r = GGUFReader(path)
    out = [f"version {int(r.fields['GGUF.version'].parts[0][0])}",
           f"alignment {int(r.alignment)}",
           f"data_offset {int(r.data_offset)}"]
    # The reader puts three fields of its own (GGUF.*) before the file's keys.
    for field in list(r.fields.values())[3:]:
        # parts: key length, key bytes, value type, then the value's parts
        text, end = value(field.parts, 3, field.parts[2][0])
        assert end == len(field.parts), field.name
        out.append(f"kv {escape(field.parts[1].tobytes())} {text}")
    for t in r.tensors:
        ne = ",".join(str(int(d)) for d in t.field.parts[3])
        data = t.data.tobytes()
        assert len(data) == t.n_bytes, t.name
        out.append(f"tensor {escape(t.field.parts[1].tobytes())} type={int(t.tensor_type)} ne={ne} "
                   f"offset={t.data_offset - r.data_offset} size={t.n_bytes} data={data.hex()}")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gguf_readback.py FILE.gguf")
    main(sys.argv[1])

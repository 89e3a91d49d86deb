#!/usr/bin/env python3
"""Writes the GGUF test corpus: small files, most of them broken on purpose.

Run from anywhere: python3 tests/gguf-corpus/make-corpus.py
It rewrites every *.gguf file here and EXPECTED, one line per file:

    <file> <status> <fragment of the error message>

tests/test_gguf.c opens each file and checks both.  ok-*.gguf files are
valid (they also seed the fuzzer).  Pure Python: no gguf package needed.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
F32, F16, Q4_0, Q8_0, F64 = 0, 1, 2, 8, 28
SCALAR_FMT = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
              FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v)


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return u64(len(b)) + b


def scalar(t, v):
    return struct.pack(SCALAR_FMT[t], v)


def array(etype, items):
    """items: encoded elements (bytes) for STRING/ARRAY, values otherwise."""
    if etype in (STRING, ARRAY):
        body = b"".join(items)
    else:
        body = b"".join(scalar(etype, v) for v in items)
    return u32(etype) + u64(len(items)) + body


class Gguf:
    """A file built section by section; marks remember where each starts."""

    def __init__(self):
        self.buf = bytearray()
        self.marks = {}

    def mark(self, name):
        self.marks[name] = len(self.buf)

    def add(self, b):
        self.buf += b

    def at(self, name, delta=0):
        return self.marks[name] + delta


# Big keys first: the reader rejects a key count that the bytes after the
# header cannot hold (13 bytes a key at least), so a file cut short inside a
# key shows the in-key error only when enough bytes precede the cut.
BASE_KVS = [
    ("tokenizer.ggml.tokens", ARRAY, array(STRING, [gstr("a"), gstr("bc"), gstr("def")])),
    ("tokenizer.ggml.scores", ARRAY, array(FLOAT32, [1.0, 2.0, 3.0])),
    ("llama.block_count", UINT32, u32(2)),
    ("general.architecture", STRING, gstr("llama")),
]
TOKENS, SCORES, BLOCKS, ARCH = range(4)
# name, type, ne, offset (from the data section), data size
BASE_TENSORS = [
    ("tok_embd.weight", F32, [4, 2], 0, 32),
    ("output.weight", Q8_0, [32], 32, 34),
]


def build(kvs=None, tensors=None, version=3, counts=None, alignment=32, magic=b"GGUF", data=None, pad=True):
    """A file from key-values (name, type, encoded value) and tensors."""
    kvs = BASE_KVS if kvs is None else kvs
    tensors = BASE_TENSORS if tensors is None else tensors
    f = Gguf()
    f.add(magic)
    f.mark("version")
    f.add(u32(version))
    f.mark("counts")
    n_t, n_kv = counts if counts else (len(tensors), len(kvs))
    f.add(u64(n_t) + u64(n_kv))
    for i, (name, t, val) in enumerate(kvs):
        f.mark(f"kv{i}")
        f.add(gstr(name))
        f.mark(f"kv{i}.type")
        f.add(u32(t))
        f.mark(f"kv{i}.value")
        f.add(val)
    for i, (name, t, ne, off, _size) in enumerate(tensors):
        f.mark(f"ti{i}")
        f.add(gstr(name))
        f.mark(f"ti{i}.ndims")
        f.add(u32(len(ne)))
        f.mark(f"ti{i}.ne")
        f.add(b"".join(u64(d) for d in ne))
        f.mark(f"ti{i}.type")
        f.add(u32(t))
        f.mark(f"ti{i}.offset")
        f.add(u64(off))
    f.mark("pad")
    if pad:
        f.add(b"\0" * (-len(f.buf) % alignment))
    f.mark("data")
    if data is None:
        # Tensors that claim more than this are meant to run past the end.
        end = min(max((off + size for _n, _t, _ne, off, size in tensors), default=0), 4096)
        data = bytes((i * 37 + 11) & 0xFF for i in range(end))
        data += b"\0" * (-len(data) % alignment)
    f.add(data)
    return f


def replace_kv(i, name=None, t=None, val=None):
    kvs = list(BASE_KVS)
    n, tt, v = kvs[i]
    kvs[i] = (n if name is None else name, tt if t is None else t, v if val is None else val)
    return kvs


def replace_tensor(i, **kw):
    ts = list(BASE_TENSORS)
    name, t, ne, off, size = ts[i]
    ts[i] = (kw.get("name", name), kw.get("t", t), kw.get("ne", ne), kw.get("off", off), kw.get("size", size))
    return ts


def nested(depth):
    v = array(INT32, [7])
    for _ in range(depth - 1):
        v = array(ARRAY, [v])
    return v


def cases():
    base = build()
    b = bytes(base.buf)
    FMT, UNS, OK = "HX_ERR_FORMAT", "HX_ERR_UNSUPPORTED", "HX_OK"
    out = []

    def case(name, data, status, fragment):
        out.append((name, bytes(data), status, fragment))

    def cut(name, mark, delta, fragment):
        case(name, b[:base.at(mark, delta)], FMT, fragment)

    # Valid files: the reader must accept them (and the fuzzer starts there).
    case("ok-base.gguf", b, OK, "")
    case("ok-v2.gguf", build(version=2).buf, OK, "")
    case("ok-empty.gguf", build(kvs=[], tensors=[]).buf, OK, "")
    case("ok-no-padding.gguf", build(tensors=[], pad=False, data=b"").buf, OK, "")
    align64 = [("general.alignment", UINT32, u32(64))] + BASE_KVS
    case("ok-align-64.gguf", build(kvs=align64, tensors=replace_tensor(1, off=64), alignment=64).buf, OK, "")
    every = [("k.u8", UINT8, scalar(UINT8, 200)), ("k.i8", INT8, scalar(INT8, -100)),
             ("k.u16", UINT16, scalar(UINT16, 60000)), ("k.i16", INT16, scalar(INT16, -30000)),
             ("k.u32", UINT32, u32(4000000000)), ("k.i32", INT32, scalar(INT32, -2000000000)),
             ("k.f32", FLOAT32, scalar(FLOAT32, 0.5)), ("k.bool", BOOL, scalar(BOOL, True)),
             ("k.str", STRING, gstr("h\u00e9llo")), ("k.u64", UINT64, u64(2**63 + 5)),
             ("k.i64", INT64, scalar(INT64, -2**62)), ("k.f64", FLOAT64, scalar(FLOAT64, -1.25)),
             ("k.empty", ARRAY, array(UINT8, [])),
             ("k.nested", ARRAY, array(ARRAY, [array(STRING, [gstr("x"), gstr("")]), array(INT16, [1, -2]),
                                               array(ARRAY, [array(BOOL, [True, False])])])),
             ("k.deep", ARRAY, nested(16))]
    case("ok-every-type.gguf", build(kvs=every).buf, OK, "")
    empties = [("k.no_strings", ARRAY, array(STRING, [])), ("k.no_arrays", ARRAY, array(ARRAY, [])),
               ("k.empty_inside", ARRAY, array(ARRAY, [array(STRING, []), array(ARRAY, [])]))]
    case("ok-empty-arrays.gguf", build(kvs=empties, tensors=[]).buf, OK, "")

    # Truncated in every section.
    case("trunc-magic.gguf", b[:2], FMT, "magic at offset 0 is 'GG', expected 'GGUF'")
    case("empty.gguf", b"", FMT, "magic at offset 0 is '', expected 'GGUF'")
    cut("trunc-version.gguf", "version", 2, "header at offset 4: file ends inside the version")
    cut("trunc-counts.gguf", "counts", 12, "header at offset 8: file ends inside the tensor and key-value counts")
    cut("trunc-key-length.gguf", "kv1", 5, f"key #1 at offset {base.at('kv1')}: file ends inside the key length")
    cut("trunc-key.gguf", "kv1", 10, f"key #1 at offset {base.at('kv1')}: key length 21 runs past end of file")
    cut("trunc-value-type.gguf", "kv2.type", 2,
        f"key 'llama.block_count' at offset {base.at('kv2.type')}: file ends inside the value type")
    cut("trunc-value.gguf", "kv2.value", 3,
        f"key 'llama.block_count' at offset {base.at('kv2.value')}: file ends inside the uint32")
    cut("trunc-string.gguf", "kv3.value", 10,
        f"key 'general.architecture' at offset {base.at('kv3.value')}: string length 5 runs past end of file")
    cut("trunc-array-header.gguf", "kv1.value", 6,
        f"key 'tokenizer.ggml.scores' at offset {base.at('kv1.value')}: file ends inside the array header")
    cut("trunc-array.gguf", "kv1.value", 20,
        f"key 'tokenizer.ggml.scores' at offset {base.at('kv1.value')}: array of 3 float32 needs 4 bytes"
        " per element, only 8 bytes left")
    cut("trunc-string-array.gguf", "kv0.value", 12 + 9 + 10 + 9 + 1,
        f"key 'tokenizer.ggml.tokens' at offset {base.at('kv0.value', 12 + 9 + 10)}: string length 3 runs past end")
    cut("trunc-tensor-count.gguf", "ti0", 20, "tensor count 2 cannot fit in the 20 bytes left after the key-values")
    cut("trunc-tensor-info.gguf", "ti1.type", 2,
        f"tensor 'output.weight' at offset {base.at('ti1.type')}: file ends inside the tensor type")
    cut("trunc-tensor-data.gguf", "data", 40,
        f"tensor 'output.weight' at offset {base.at('ti1')}: data [{base.at('data', 32)}, {base.at('data', 66)})"
        f" runs past end of file (size {base.at('data', 40)})")
    # Padding only exists when the tensor infos end unaligned: check that.
    assert base.at("pad") % 32 != 0 and base.at("data") - base.at("pad") > 2
    cut("trunc-padding.gguf", "pad", 2,
        f"file ends at offset {base.at('pad', 2)} inside the alignment padding before the data section"
        f" at offset {base.at('data')}")
    deep3 = [("k.nested", ARRAY, array(ARRAY, [array(INT32, [1, 2]), array(INT32, [3, 4])]))]
    f = build(kvs=deep3, tensors=[])
    case("trunc-nested-array.gguf", f.buf[:f.at("kv0.value", 12 + 12 + 8 + 6)], FMT,
         f"key 'k.nested' at offset {f.at('kv0.value', 12 + 20)}: file ends inside the array header")

    # Lying counts and lengths.
    case("lying-kv-count.gguf", build(counts=(2, 2**60)).buf, FMT,
         "header at offset 16: key-value count 1152921504606846976 cannot fit")
    case("lying-tensor-count.gguf", build(counts=(2**60, 4)).buf, FMT,
         "header at offset 8: tensor count 1152921504606846976 cannot fit")
    f = build()
    f.buf[f.at("kv0"):f.at("kv0") + 8] = u64(2**62)
    case("huge-key.gguf", f.buf, FMT, "key #0 at offset 24: key length 4611686018427387904 runs past end of file")
    f = build(kvs=replace_kv(ARCH, val=u64(2**62) + b"llama"))
    case("huge-string.gguf", f.buf, FMT,
         f"key 'general.architecture' at offset {f.at('kv3.value')}: string length 4611686018427387904 runs past")
    f = build(kvs=replace_kv(SCORES, val=u32(UINT32) + u64(2**62) + u32(1)))
    case("huge-array.gguf", f.buf, FMT, "array of 4611686018427387904 uint32 needs 4 bytes per element")
    f = build(kvs=replace_kv(TOKENS, val=u32(STRING) + u64(2**62) + gstr("a")))
    case("huge-string-array.gguf", f.buf, FMT, "array of 4611686018427387904 strings needs at least 8 bytes")
    f = build(kvs=replace_kv(TOKENS, val=u32(ARRAY) + u64(2**62) + array(INT8, [1])))
    case("huge-array-of-arrays.gguf", f.buf, FMT, "array of 4611686018427387904 arrays needs at least 12 bytes")
    f = build(kvs=replace_kv(TOKENS, val=array(STRING, [gstr("a"), u64(2**40) + b"bc", gstr("def")])))
    case("lying-string-in-array.gguf", f.buf, FMT,
         f"key 'tokenizer.ggml.tokens' at offset {f.at('kv0.value', 12 + 9)}: string length 1099511627776 runs past")
    f = build()
    f.buf[f.at("ti0"):f.at("ti0") + 8] = u64(2**62)
    case("huge-tensor-name.gguf", f.buf, FMT,
         f"tensor #0 at offset {f.at('ti0')}: name length 4611686018427387904 runs past end of file")

    # Unknown types.
    f = build(kvs=replace_kv(BLOCKS, t=13))
    case("unknown-value-type.gguf", f.buf, FMT,
         f"key 'llama.block_count' at offset {f.at('kv2.type')}: unknown value type 13")
    f = build(kvs=replace_kv(SCORES, val=u32(42) + u64(0)))
    case("unknown-array-type.gguf", f.buf, FMT,
         f"key 'tokenizer.ggml.scores' at offset {f.at('kv1.value')}: unknown array element type 42")
    f = build(tensors=replace_tensor(1, t=4))
    case("unknown-tensor-type.gguf", f.buf, FMT,
         f"tensor 'output.weight' at offset {f.at('ti1.type')}: unknown tensor type 4")
    f = build(tensors=replace_tensor(0, t=1000))
    case("unknown-tensor-type-1000.gguf", f.buf, FMT, "tensor 'tok_embd.weight' at offset"
         f" {f.at('ti0.type')}: unknown tensor type 1000")

    # Alignment.
    f = build(tensors=replace_tensor(1, off=36))
    case("misaligned-tensor.gguf", f.buf, FMT,
         f"tensor 'output.weight' at offset {f.at('ti1')}: data offset 36 is not a multiple of the alignment 32")
    for a in (0, 3, 48):
        f = build(kvs=[("general.alignment", UINT32, u32(a))] + BASE_KVS)
        case(f"bad-alignment-{a}.gguf", f.buf, FMT,
             f"key 'general.alignment' at offset {f.at('kv0.value')}: alignment {a} is not a nonzero power of two")
    f = build(kvs=[("general.alignment", UINT64, u64(64))] + BASE_KVS)
    case("bad-alignment-type.gguf", f.buf, FMT,
         f"key 'general.alignment' at offset {f.at('kv0.type')}: type uint64, must be uint32")

    # Duplicates and overlaps.
    f = build(kvs=BASE_KVS + [("llama.block_count", UINT32, u32(3))])
    case("duplicate-key.gguf", f.buf, FMT,
         f"key 'llama.block_count' at offset {f.at('kv4')}: duplicate key name (first at offset {f.at('kv2')})")
    f = build(tensors=replace_tensor(1, name="tok_embd.weight", t=F32, ne=[4, 2], size=32))
    case("duplicate-tensor.gguf", f.buf, FMT,
         f"tensor 'tok_embd.weight' at offset {f.at('ti1')}: duplicate tensor name (first at offset {f.at('ti0')})")
    f = build(tensors=replace_tensor(1, off=0))
    d = f.at("data")
    case("overlapping-tensors.gguf", f.buf, FMT,
         f"tensor 'output.weight' at offset {f.at('ti1')}: data [{d}, {d + 34}) overlaps tensor 'tok_embd.weight'"
         f" data [{d}, {d + 32})")

    # Dimensions and sizes.
    f = build(tensors=replace_tensor(0, ne=[4, 2, 1, 1, 1]))
    case("too-many-dims.gguf", f.buf, FMT,
         f"tensor 'tok_embd.weight' at offset {f.at('ti0.ndims')}: 5 dimensions, must be 1 to 4")
    f = build(tensors=replace_tensor(0, ne=[]))
    case("zero-dims.gguf", f.buf, FMT,
         f"tensor 'tok_embd.weight' at offset {f.at('ti0.ndims')}: 0 dimensions, must be 1 to 4")
    f = build(tensors=replace_tensor(0, ne=[4, 0]))
    case("zero-ne.gguf", f.buf, FMT, f"tensor 'tok_embd.weight' at offset {f.at('ti0.ne', 8)}: dimension 1 is 0")
    f = build(tensors=replace_tensor(0, ne=[2**32, 2**32]))
    case("ne-overflow.gguf", f.buf, FMT,
         f"tensor 'tok_embd.weight' at offset {f.at('ti0.ne', 8)}: element count overflows at dimension 1")
    f = build(tensors=replace_tensor(0, ne=[2**63]))
    case("ne-too-large.gguf", f.buf, FMT,
         f"tensor 'tok_embd.weight' at offset {f.at('ti0.ne')}: element count overflows at dimension 0")
    f = build(tensors=replace_tensor(0, t=F64, ne=[2**62]))
    case("size-overflow.gguf", f.buf, FMT,
         f"tensor 'tok_embd.weight' at offset {f.at('ti0.type')}: byte size of 4611686018427387904 f64 elements"
         " overflows")
    f = build(tensors=replace_tensor(1, ne=[16]))
    case("row-not-block-multiple.gguf", f.buf, FMT,
         f"tensor 'output.weight' at offset {f.at('ti1.type')}: row length 16 is not a multiple of the q8_0"
         " block size 32")
    f = build(tensors=replace_tensor(1, off=2**40))
    case("tensor-offset-past-end.gguf", f.buf, FMT,
         f"tensor 'output.weight' at offset {f.at('ti1')}: data offset 1099511627776 starts past end of file")
    f = build(tensors=replace_tensor(0, ne=[2**40]))
    d = f.at("data")
    case("tensor-size-past-end.gguf", f.buf, FMT,
         f"tensor 'tok_embd.weight' at offset {f.at('ti0')}: data [{d}, {d + 2**42}) runs past end of file"
         f" (size {len(f.buf)})")
    f = build(tensors=replace_tensor(1, t=F64, ne=[2**61 - 1]))
    case("tensor-size-wraps.gguf", f.buf, FMT,
         f"tensor 'output.weight' at offset {f.at('ti1')}: data of 18446744073709551608 bytes at {f.at('data', 32)}"
         " runs past end of file")

    # Names.
    f = build(kvs=replace_kv(BLOCKS, name=b"llama\0block_count"))
    case("nul-in-key.gguf", f.buf, FMT, f"key #2 at offset {f.at('kv2')}: name 'llama\\x00block_count' contains a NUL")
    f = build(tensors=replace_tensor(0, name=b"tok\0embd"))
    case("nul-in-tensor-name.gguf", f.buf, FMT, f"tensor #0 at offset {f.at('ti0')}: name 'tok\\x00embd' contains a NUL")

    # Nesting.
    f = build(kvs=[("k.deep", ARRAY, nested(17))], tensors=[])
    case("nested-too-deep.gguf", f.buf, FMT,
         f"key 'k.deep' at offset {f.at('kv0.value', 16 * 12)}: arrays nested deeper than 16 levels")

    # Not GGUF, or GGUF we do not read.
    case("wrong-magic.gguf", build(magic=b"GGML").buf, FMT, "magic at offset 0 is 'GGML', expected 'GGUF'")
    case("version-1.gguf", build(version=1).buf, UNS, "GGUF version 1 at offset 4 is not supported")
    case("version-4.gguf", build(version=4).buf, UNS, "GGUF version 4 at offset 4 is not supported")
    case("version-0.gguf", build(version=0).buf, UNS, "GGUF version 0 at offset 4 is not supported")
    case("big-endian.gguf", build(version=0x03000000).buf, UNS,
         "big-endian GGUF file (version 3 byte-swapped at offset 4)")
    # Inputs the fuzzer found, kept verbatim (see FUZZ_FINDS).
    for name, hexdata, status, fragment in FUZZ_FINDS:
        case(name, bytes.fromhex(hexdata), status, fragment)
    return out


# Each was a sanitizer report in `make fuzz` before its fix.
FUZZ_FINDS = [
    # An empty array of arrays: its element table was a NULL pointer plus 0.
    ("fuzz-empty-nested-table.gguf",
     "47475546030000000000000000000000010000000000000006000000000000006b2e6465657009000000090000000000"
     "000000000000090000000100000000000000090000000100000000000000090000000100000000000000090000000100"
     "000000000000090000000100000000000000090000000100000000000000090000000100000000000000090000000100"
     "000000000000090000000100000000000000090000000100000000000000090000000100000000000000090000000100"
     "000000000000090000000100000069677a00000000090000000100000000000000090000000100000000000000050000"
     "00010000000000000007000000000000000000",
     "HX_OK", ""),
]


def main():
    for name in os.listdir(HERE):
        if name.endswith(".gguf"):
            os.remove(os.path.join(HERE, name))
    lines = []
    seen = set()
    for name, data, status, fragment in cases():
        assert name not in seen, name
        seen.add(name)
        with open(os.path.join(HERE, name), "wb") as f:
            f.write(data)
        lines.append(f"{name} {status} {fragment}".rstrip())
    with open(os.path.join(HERE, "EXPECTED"), "w") as f:
        f.write("# file status fragment-of-message (written by make-corpus.py)\n")
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

"""The tensor table of a GGUF file, read with the standard library alone
(the benchmark scripts run before any Python package is installed)."""
import struct


def tensors(data):
    """[(name, dims, offset in the data section, data section start)] of a GGUF file's bytes."""
    if data[:4] != b"GGUF":
        raise ValueError("not a GGUF file")
    pos = 8
    n_tensors, n_kv = struct.unpack_from("<QQ", data, pos)
    pos += 16
    fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    alignment = 32

    def string(p):
        (n,) = struct.unpack_from("<Q", data, p)
        return data[p + 8:p + 8 + n].decode("utf-8", "replace"), p + 8 + n

    def skip(t, p):
        if t in fixed:
            return p + fixed[t]
        if t == 8:
            return string(p)[1]
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, p)
            p += 12
            if et in fixed:
                return p + fixed[et] * n
            for _ in range(n):
                p = skip(et, p)
            return p
        raise ValueError(f"GGUF value type {t}")

    for _ in range(n_kv):
        key, pos = string(pos)
        (t,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if key == "general.alignment" and t == 4:
            (alignment,) = struct.unpack_from("<I", data, pos)
        pos = skip(t, pos)
    table = []
    for _ in range(n_tensors):
        name, pos = string(pos)
        (nd,) = struct.unpack_from("<I", data, pos)
        dims = struct.unpack_from(f"<{nd}Q", data, pos + 4)
        pos += 4 + 8 * nd + 4
        (off,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        table.append((name, dims, off))
    start = (pos + alignment - 1) // alignment * alignment
    return [(name, dims, off, start) for name, dims, off in table]

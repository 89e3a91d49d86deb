#!/usr/bin/env python3
"""Self-test of tests/ref_llama.py against a second, differently written model.

    python3 tests/ref_llama_selftest.py

Builds tiny random GGUF models with gguf.GGUFWriter (llama, mistral, qwen2,
phi3 with its fused attn_qkv and gate/up and an ignored sliding window;
F32, F16, BF16 and Q8_0 weights; GQA; partial RoPE, linear scaling, rope
freq factors; tied output) and checks that ref_llama's vectorized forward
pass matches a loop-based one (token by token with a KV cache, head by head,
RoPE pair by pair in ggml's loop order) to 1e-12.  The second implementation
takes its weights from the arrays the model was built from, not from the
file, and decodes BF16/Q8_0 with its own few lines, so a wrong matrix
orientation or tensor layout in the reader cannot cancel out.  Then it
checks that the comparison has power (the wrong RoPE pairing or KV-head
mapping is caught), the CLI's output file, and that bad input is refused.
"""

import math
import os
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ref_llama  # noqa: E402

TOL = 1e-12

BASE = dict(n_layer=3, n_embd=32, n_head=4, n_kv=2, hd=8, n_ff=48, vocab=64, n_rot=None,
            base=10000.0, factor=None, wtype="f32", tied=False, freq_factors=False, swa=0)
CONFIGS = [
    # n_embd != n_head * head_dim makes every attention matrix non-square.
    dict(BASE, name="llama-f32-keylen", arch="llama", n_embd=40),
    dict(BASE, name="qwen2-f16-tied", arch="qwen2", base=1e6, wtype="f16", tied=True),
    dict(BASE, name="mistral-q8_0-partial-rope", arch="mistral", n_ff=64, n_rot=4,
         factor=2.0, wtype="q8_0", freq_factors=True),
    dict(BASE, name="qwen2-bf16-partial-rope", arch="qwen2", n_rot=6, factor=4.0, wtype="bf16",
         n_kv=1),
    # A window shorter than the tokens: the last positions see 3 keys.
    dict(BASE, name="mistral-f32-sliding-window", arch="mistral", swa=3),
    # Fused tensors, rope factors; the file's window of 3 is ignored.
    dict(BASE, name="phi3-q8_0-fused", arch="phi3", wtype="q8_0", n_ff=64, freq_factors=True),
]
TOKENS = [5, 17, 0, 63, 17, 42, 8, 8, 31, 2]


# -- building models --------------------------------------------------------

def stored(w, wtype):
    """(array to write, raw ggml type or None, the float64 values it decodes to)."""
    w = w.astype(np.float32)
    if wtype == "f32":
        return w, None, w.astype(np.float64)
    if wtype == "f16":
        h = w.astype(np.float16)
        return h, None, h.astype(np.float64)
    if wtype == "bf16":
        bits = (w.view(np.uint32) >> 16).astype(np.uint16)  # truncation, on purpose
        val = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return bits.view(np.uint8), GGMLQuantizationType.BF16, val
    if wtype == "q8_0":
        rows, cols = w.shape
        blocks = w.reshape(rows, cols // 32, 32)
        d = (np.abs(blocks).max(axis=2) / 127.0).astype(np.float16)
        q = np.rint(blocks / np.maximum(d.astype(np.float32), 1e-30)[..., None]).astype(np.int8)
        raw = np.concatenate([d[..., None].view(np.uint8), q.view(np.uint8)], axis=2)
        val = d.astype(np.float64)[..., None] * q.astype(np.float64)
        return raw.reshape(rows, -1), GGMLQuantizationType.Q8_0, val.reshape(rows, cols)
    raise ValueError(wtype)


def build(c, path, seed, transpose=None):
    """Writes a random model; returns its float64 weights, numpy order [out][in]."""
    rng = np.random.default_rng(seed)
    arch, E, H, K, D, F, V = c["arch"], c["n_embd"], c["n_head"], c["n_kv"], c["hd"], c["n_ff"], c["vocab"]
    n_rot = c["n_rot"] or D
    g = GGUFWriter(path, arch)
    g.add_uint32(f"{arch}.context_length", 128)
    g.add_uint32(f"{arch}.embedding_length", E)
    g.add_uint32(f"{arch}.block_count", c["n_layer"])
    g.add_uint32(f"{arch}.feed_forward_length", F)
    g.add_uint32(f"{arch}.attention.head_count", H)
    g.add_uint32(f"{arch}.attention.head_count_kv", K)
    g.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)
    g.add_float32(f"{arch}.rope.freq_base", c["base"])
    if E != H * D:
        g.add_uint32(f"{arch}.attention.key_length", D)
        g.add_uint32(f"{arch}.attention.value_length", D)
    if c["n_rot"]:
        g.add_uint32(f"{arch}.rope.dimension_count", n_rot)
    if c["swa"] or arch == "phi3":  # converted Phi-3 files carry one that llama.cpp ignores
        g.add_uint32(f"{arch}.attention.sliding_window", c["swa"] or 3)
    if c["factor"]:
        g.add_string(f"{arch}.rope.scaling.type", "linear")
        g.add_float32(f"{arch}.rope.scaling.factor", c["factor"])

    W = {}

    def mat(name, n_out, n_in, wtype, write=True):
        w = rng.standard_normal((n_out, n_in)) / math.sqrt(n_in)
        if name == transpose:
            w = w.T
        data, raw, val = stored(w, wtype)
        if write:
            g.add_tensor(name, data, raw_dtype=raw)
        W[name] = val
        return data, raw

    def fused(name, parts):
        """One tensor holding the parts' rows in order (Phi-3's layout)."""
        g.add_tensor(name, np.concatenate([d for d, _ in parts], axis=0), raw_dtype=parts[0][1])

    phi3 = arch == "phi3"

    def vec(name, values):
        W[name] = values.astype(np.float32).astype(np.float64)
        g.add_tensor(name, values.astype(np.float32))

    wt = c["wtype"]
    mat("token_embd.weight", V, E, wt)
    for il in range(c["n_layer"]):
        b = f"blk.{il}."
        vec(b + "attn_norm.weight", 1.0 + 0.2 * rng.standard_normal(E))
        qkv = [mat(b + "attn_q.weight", H * D, E, wt, not phi3), mat(b + "attn_k.weight", K * D, E, wt, not phi3),
               mat(b + "attn_v.weight", K * D, E, wt, not phi3)]
        if phi3:
            fused(b + "attn_qkv.weight", qkv)
        if arch == "qwen2":
            vec(b + "attn_q.bias", 0.5 * rng.standard_normal(H * D))
            vec(b + "attn_k.bias", 0.5 * rng.standard_normal(K * D))
            vec(b + "attn_v.bias", 0.5 * rng.standard_normal(K * D))
        mat(b + "attn_output.weight", E, H * D, wt)
        vec(b + "ffn_norm.weight", 1.0 + 0.2 * rng.standard_normal(E))
        gate_up = [mat(b + "ffn_gate.weight", F, E, wt, not phi3), mat(b + "ffn_up.weight", F, E, wt, not phi3)]
        if phi3:
            fused(b + "ffn_up.weight", gate_up)
        mat(b + "ffn_down.weight", E, F, wt)
    vec("output_norm.weight", 1.0 + 0.2 * rng.standard_normal(E))
    if not c["tied"]:
        mat("output.weight", V, E, wt)
    if c["freq_factors"]:
        vec("rope_freqs.weight", rng.uniform(1.0, 4.0, n_rot // 2))

    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()
    return W


# -- the second implementation: one token at a time ---------------------------

def loop_forward(c, W, tokens, neox=None, kv_head_of=None):
    E, H, K, D = c["n_embd"], c["n_head"], c["n_kv"], c["hd"]
    n_rot = c["n_rot"] or D
    neox = (c["arch"] in ("qwen2", "phi3")) if neox is None else neox
    kv_head_of = kv_head_of or (lambda h: h // (H // K))
    freq_scale = 1.0 / c["factor"] if c["factor"] else 1.0
    ff = W.get("rope_freqs.weight")
    out_w = W.get("output.weight", W["token_embd.weight"])

    eps = float(np.float32(1e-5))  # as stored: a float32 key

    def norm(x, w):
        ms = sum(float(v) * float(v) for v in x) / len(x)
        return np.array([x[i] / math.sqrt(ms + eps) * w[i] for i in range(len(x))])

    def rope_head(v, pos):
        # ggml_rope_cache_init + rotate_pairs, loop for loop.
        out = v.copy()
        for i0 in range(0, n_rot, 2):
            theta = pos * freq_scale * c["base"] ** (-i0 / n_rot)
            if ff is not None:
                theta /= ff[i0 // 2]
            a, b = (i0 // 2, i0 // 2 + n_rot // 2) if neox else (i0, i0 + 1)
            cs, sn = math.cos(theta), math.sin(theta)
            out[a] = v[a] * cs - v[b] * sn
            out[b] = v[a] * sn + v[b] * cs
        return out

    caches = [([], []) for _ in range(c["n_layer"])]
    logits = []
    for pos, tok in enumerate(tokens):
        x = W["token_embd.weight"][tok].copy()
        for il in range(c["n_layer"]):
            b = f"blk.{il}."
            h = norm(x, W[b + "attn_norm.weight"])
            q = W[b + "attn_q.weight"].dot(h) + W.get(b + "attn_q.bias", 0.0)
            k = W[b + "attn_k.weight"].dot(h) + W.get(b + "attn_k.bias", 0.0)
            v = W[b + "attn_v.weight"].dot(h) + W.get(b + "attn_v.bias", 0.0)
            kc, vc = caches[il]
            kc.append([rope_head(k[g * D:(g + 1) * D], pos) for g in range(K)])
            vc.append([v[g * D:(g + 1) * D] for g in range(K)])
            att = np.zeros(H * D)
            for hh in range(H):
                qh = rope_head(q[hh * D:(hh + 1) * D], pos)
                g = kv_head_of(hh)
                # The keys it sees: all before it, or the window's.
                seen = range(max(0, pos - c["swa"] + 1) if c["swa"] else 0, pos + 1)
                s = [float(qh.dot(kc[j][g])) / math.sqrt(D) for j in seen]
                top = max(s)
                e = [math.exp(si - top) for si in s]
                z = sum(e)
                for i, j in enumerate(seen):
                    att[hh * D:(hh + 1) * D] += (e[i] / z) * vc[j][g]
            x = x + W[b + "attn_output.weight"].dot(att)
            h = norm(x, W[b + "ffn_norm.weight"])
            gate = W[b + "ffn_gate.weight"].dot(h)
            up = W[b + "ffn_up.weight"].dot(h)
            act = np.array([gi / (1.0 + math.exp(-gi)) * ui for gi, ui in zip(gate, up)])
            x = x + W[b + "ffn_down.weight"].dot(act)
        logits.append(out_w.dot(norm(x, W["output_norm.weight"])))
    return np.array(logits)


# -- the checks --------------------------------------------------------------

def expect_error(fn, what):
    try:
        fn()
    except ref_llama.ModelError as e:
        return str(e)
    raise AssertionError(f"{what}: no error")


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, c in enumerate(CONFIGS):
            path = os.path.join(tmp, c["name"] + ".gguf")
            W = build(c, path, seed=100 + i)
            m = ref_llama.Model(path, allow_quantized=True)
            got = ref_llama.forward(m, TOKENS)
            want = loop_forward(c, W, TOKENS)
            err = float(np.max(np.abs(got - want)))
            ok = got.shape == (len(TOKENS), c["vocab"]) and err <= TOL
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {c['name']}: max |diff| {err:.2e} "
                  f"(logits up to {np.max(np.abs(want)):.2f})")

            # The comparison must be able to fail: the other RoPE pairing and a
            # modulo KV-head mapping each move the logits far beyond TOL.
            other_rope = loop_forward(c, W, TOKENS, neox=(c["arch"] not in ("qwen2", "phi3")))
            wrong_kv = loop_forward(c, W, TOKENS, kv_head_of=lambda h: h % c["n_kv"])
            checks = [("RoPE pairing", other_rope)]
            if c["n_kv"] > 1:  # with one KV head every mapping is the same
                checks.append(("KV-head mapping", wrong_kv))
            for what, alt in checks:
                d = float(np.max(np.abs(alt - want)))
                ok = d > 1e-3
                failures += not ok
                print(f"{'ok  ' if ok else 'FAIL'} {c['name']}: a wrong {what} moves the logits by {d:.2e}")

        # The command line: float32 LE [n_tokens][n_vocab], exactly the float64 values rounded.
        c = CONFIGS[2]
        path = os.path.join(tmp, c["name"] + ".gguf")
        out = os.path.join(tmp, "logits.f32")
        cmd = [sys.executable, os.path.join(HERE, "ref_llama.py"), path,
               "--tokens", ",".join(map(str, TOKENS)), "--out", out]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode == 0 or "--dequantized" not in r.stderr:
            failures += 1
            print(f"FAIL quantized model accepted without --dequantized: rc {r.returncode} {r.stderr}")
        r = subprocess.run(cmd + ["--dequantized"], capture_output=True, text=True)
        want = ref_llama.forward(ref_llama.Model(path, allow_quantized=True), TOKENS).astype("<f4")
        if r.returncode != 0 or not os.path.exists(out):
            failures += 1
            print(f"FAIL CLI: rc {r.returncode}: {r.stderr}")
        else:
            got = np.fromfile(out, dtype="<f4")
            ok = got.size == len(TOKENS) * c["vocab"] and np.array_equal(got.reshape(want.shape), want)
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} CLI writes float32 [{len(TOKENS)}][{c['vocab']}]")

        # A matrix stored the wrong way round is refused, not silently used.
        bad = os.path.join(tmp, "transposed.gguf")
        build(CONFIGS[0], bad, seed=7, transpose="blk.1.ffn_up.weight")
        msg = expect_error(lambda: ref_llama.forward(ref_llama.Model(bad), TOKENS), "transposed ffn_up")
        print(f"ok   transposed tensor refused: {msg}")
        path = os.path.join(tmp, CONFIGS[0]["name"] + ".gguf")
        m = ref_llama.Model(path)
        msg = expect_error(lambda: ref_llama.forward(m, [1, CONFIGS[0]["vocab"]]), "token out of range")
        print(f"ok   out-of-range token refused: {msg}")
        msg = expect_error(lambda: ref_llama.forward(m, []), "no tokens")
        print(f"ok   empty sequence refused: {msg}")

    print("ref_llama self-test:", "FAILED" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Independent float64 reference for the LLaMA-family forward pass.

    python3 tests/ref_llama.py MODEL.gguf --tokens 1,2,3 --out logits.f32 [--dequantized]

Reads a GGUF file with llama.cpp's own Python package (gguf.GGUFReader) and
writes the logits at every position of one causal sequence that starts at
position 0: float32, little-endian, [n_tokens][n_vocab], row-major.

Everything is computed in float64 from the stored weights, so the result is
the model's mathematical output, free of the rounding choices any fast
implementation makes.  It shares no code with the C runtime: the file is
parsed by gguf-py and quantized blocks are decoded by gguf.quants.dequantize
(llama.cpp's Python dequantizer).

Quantized weights are refused unless --dequantized is given: llama.cpp (and
a fast runtime) also rounds the activations before a quantized dot product
(to Q8_0/Q8_K), which this reference does not, so comparing against it then
needs a looser tolerance, and the flag makes that choice explicit.

Supported: general.architecture llama, mistral (RoPE NORM), qwen2 (RoPE
NEOX, q/k/v biases) and phi3 (RoPE NEOX, Q/K/V fused in attn_qkv, gate and
up fused in ffn_up); linear RoPE scaling; llama3-style rope_freqs.weight;
a sliding window (<arch>.attention.sliding_window; ignored for phi3, as
llama.cpp ignores it); qwen3 (per-head Q/K RMS norms before RoPE);
mixture of experts as llama.cpp's build_moe_ffn computes it: llama files
with experts (Mixtral), qwen3moe (top-k renormalised) and qwen2moe (top-k
as the softmax gave them, plus a shared expert gated by a sigmoid); gemma3
(embeddings times sqrt(n_embd), Q/K norms, post-norms, GeGLU with the tanh
GELU, sliding-window layers with RoPE base rope.freq_base_swa (10000) and
5 of every 6 layers windowed, a final soft-cap where the file has one).
The GELU here is the exact tanh form; llama.cpp's CPU backend (and hetero,
to match it) rounds its input and output to f16, so gemma3 logits agree to
that rounding only.
"""

import argparse
import sys

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType
from gguf.quants import dequantize

# Which pair a rotation acts on, per architecture, as llama.cpp's
# llama_model_rope_type() assigns it (LLM_ARCH_LLAMA -> LLAMA_ROPE_TYPE_NORM,
# LLM_ARCH_QWEN2 -> LLAMA_ROPE_TYPE_NEOX).
ROPE_NORM, ROPE_NEOX = "norm", "neox"
ARCH_ROPE = {"llama": ROPE_NORM, "mistral": ROPE_NORM, "qwen2": ROPE_NEOX, "phi3": ROPE_NEOX,
             "qwen3": ROPE_NEOX, "qwen3moe": ROPE_NEOX, "qwen2moe": ROPE_NEOX, "gemma3": ROPE_NEOX}
ARCH_QKV_BIAS = {"llama": False, "mistral": False, "qwen2": True, "phi3": False,
                 "qwen3": False, "qwen3moe": False, "qwen2moe": "optional", "gemma3": False}
# Which architectures may have experts, and whether their top-k weights are
# divided by their sum (build_moe_ffn's norm_w in src/models/<arch>.cpp).
ARCH_MOE_NORM = {"llama": True, "qwen3moe": True, "qwen2moe": False}
# llama.cpp's Phi-3 loader reads attention.sliding_window and then disables
# it (src/models/phi3.cpp: "Phi SWA is currently disabled").
ARCH_IGNORES_SWA = {"phi3"}

# Stored as plain numbers: no quantization of the weights to speak of.
PLAIN_TYPES = {GGMLQuantizationType.F32, GGMLQuantizationType.F16,
               GGMLQuantizationType.BF16, GGMLQuantizationType.F64}

_REQUIRED = object()


class ModelError(Exception):
    pass


def _field_value(field):
    """A metadata value as a Python scalar, string or list."""
    def one(idx, vtype):
        part = field.parts[idx]
        if vtype == GGUFValueType.STRING:
            return bytes(part).decode("utf-8")
        return part.tolist()[0]

    if field.types[0] == GGUFValueType.ARRAY:
        return [one(i, field.types[-1]) for i in field.data]
    return one(field.data[0], field.types[0])


class Model:
    """Hyperparameters and lazily decoded float64 weights of one GGUF file."""

    def __init__(self, path, allow_quantized=False):
        self.reader = GGUFReader(path)
        self.tensors = {t.name: t for t in self.reader.tensors}
        self.allow_quantized = allow_quantized
        self.tally = None  # [layer][expert] counts of top-k choices, when asked for

        self.arch = self.meta("general.architecture")
        if self.arch not in ARCH_ROPE:
            raise ModelError(f"unsupported architecture {self.arch!r} "
                             f"(supported: {', '.join(sorted(ARCH_ROPE))})")
        a = self.arch
        self.n_expert = int(self.meta(f"{a}.expert_count", 0))
        self.n_expert_used = int(self.meta(f"{a}.expert_used_count", 0))
        if self.n_expert and a not in ARCH_MOE_NORM:
            raise ModelError(f"{a} files with experts are not supported")

        self.n_embd = self.meta_int(f"{a}.embedding_length")
        self.n_layer = self.meta_int(f"{a}.block_count")
        self.n_head = self.meta_per_layer(f"{a}.attention.head_count")
        self.n_head_kv = self.meta_per_layer(f"{a}.attention.head_count_kv", self.n_head)
        self.n_ff = self.meta_per_layer(f"{a}.feed_forward_length")
        self.n_ctx = self.meta_int(f"{a}.context_length")
        self.eps = float(self.meta(f"{a}.attention.layer_norm_rms_epsilon"))
        # Defaults as llama.cpp's load_hparams() has them.
        self.head_dim_k = self.meta_int(f"{a}.attention.key_length", self.n_embd // self.n_head)
        self.head_dim_v = self.meta_int(f"{a}.attention.value_length", self.n_embd // self.n_head)
        self.n_rot = self.meta_int(f"{a}.rope.dimension_count", self.head_dim_k)
        self.freq_base = float(self.meta(f"{a}.rope.freq_base", 10000.0))
        scaling = self.meta(f"{a}.rope.scaling.type", "linear")
        factor = float(self.meta(f"{a}.rope.scaling.factor",
                                 self.meta(f"{a}.rope.scale_linear", 0.0)))
        if scaling not in ("none", "linear") and factor not in (0.0, 1.0):
            raise ModelError(f"RoPE scaling {scaling!r} is not supported")
        # llama.cpp: freq_scale = 1/factor, absent or 0 meaning 1.
        self.freq_scale = 1.0 if factor == 0.0 else 1.0 / factor
        # A sliding window (Mistral 7B v0.1): a query at position i sees the
        # keys at i - n_swa + 1 .. i, as llama.cpp's LLAMA_SWA_TYPE_STANDARD
        # masks p1 - p0 >= n_swa.  0 = the whole context.
        self.n_swa = 0 if a in ARCH_IGNORES_SWA else int(self.meta(f"{a}.attention.sliding_window", 0))
        self.rope_type = ARCH_ROPE[a]
        self.qkv_bias = ARCH_QKV_BIAS[a]
        if self.n_expert:
            ff_exp = self.n_ff if a == "llama" else self.n_ff // self.n_expert_used
            self.n_ff_exp = int(self.meta(f"{a}.expert_feed_forward_length", ff_exp))
            self.n_ff_shexp = int(self.meta(f"{a}.expert_shared_feed_forward_length", self.n_ff))
        self.gemma = a == "gemma3"
        # Gemma 3: layers il with il % pattern < pattern - 1 attend to the
        # window (llama_hparams::set_swa_pattern), with their own RoPE base.
        self.swa_pattern = 0
        if self.gemma and self.n_swa:
            self.swa_pattern = int(self.meta(f"{a}.attention.sliding_window_pattern", 6))
            self.freq_base_swa = float(self.meta(f"{a}.rope.freq_base_swa", 10000.0))
        self.softcap = float(self.meta(f"{a}.final_logit_softcapping", 0.0))

        self._check_hparams()

        tok = self.tensors.get("token_embd.weight")
        if tok is None:
            raise ModelError("missing tensor token_embd.weight")
        self.n_vocab = int(tok.shape[1]) if len(tok.shape) == 2 else -1
        if self.n_vocab <= 0:
            raise ModelError(f"token_embd.weight has shape {list(tok.shape)}")

        self.freq_factors = None
        if "rope_freqs.weight" in self.tensors:
            self.freq_factors = self.vector("rope_freqs.weight", self.n_rot // 2)

    # -- metadata ---------------------------------------------------------

    def meta(self, key, default=_REQUIRED):
        field = self.reader.get_field(key)
        if field is None:
            if default is _REQUIRED:
                raise ModelError(f"missing metadata key {key}")
            return default
        return _field_value(field)

    def meta_int(self, key, default=_REQUIRED):
        v = self.meta(key, default)
        if isinstance(v, list) or int(v) != v or v <= 0:
            raise ModelError(f"{key} = {v!r}: expected a positive integer")
        return int(v)

    def meta_per_layer(self, key, default=_REQUIRED):
        """llama.cpp allows per-layer arrays for these; only uniform ones here."""
        v = self.meta(key, default)
        if isinstance(v, list):
            if len(v) != self.n_layer or len(set(v)) != 1:
                raise ModelError(f"{key}: per-layer values {v} are not supported")
            v = v[0]
        if int(v) != v or v <= 0:
            raise ModelError(f"{key} = {v!r}: expected a positive integer")
        return int(v)

    def _check_hparams(self):
        if self.n_head % self.n_head_kv:
            raise ModelError(f"head_count {self.n_head} is not a multiple of "
                             f"head_count_kv {self.n_head_kv}")
        if self.n_rot % 2 or self.n_rot > self.head_dim_k:
            raise ModelError(f"rope.dimension_count {self.n_rot} must be even and "
                             f"<= head dim {self.head_dim_k}")

    # -- weights ----------------------------------------------------------

    def _decode(self, t):
        """The tensor as float64 in numpy order: [ne1][ne0] for a matrix."""
        if t.tensor_type not in PLAIN_TYPES and not self.allow_quantized:
            raise ModelError(f"{t.name} is {t.tensor_type.name}; pass --dequantized to "
                             "compute with its dequantized values")
        if t.tensor_type in (GGMLQuantizationType.F32, GGMLQuantizationType.F64,
                             GGMLQuantizationType.F16):
            a = np.asarray(t.data)
        else:
            a = dequantize(t.data, t.tensor_type)
        # gguf-py lists t.shape in ggml order (ne[0] first, ne[0] = row length);
        # numpy's order is the reverse.
        return np.asarray(a, dtype=np.float64).reshape(tuple(int(d) for d in reversed(t.shape)))

    def _get(self, name):
        t = self.tensors.get(name)
        if t is None:
            raise ModelError(f"missing tensor {name}")
        return t

    def matrix(self, name, n_out, n_in):
        """A weight W with y = W @ x: ggml ne = [n_in, n_out], numpy [n_out, n_in]."""
        t = self._get(name)
        got = [int(d) for d in t.shape]
        if got != [n_in, n_out]:
            raise ModelError(f"{name}: ggml shape {got}, expected [{n_in}, {n_out}]")
        w = self._decode(t)
        assert w.shape == (n_out, n_in), (name, w.shape)
        return w

    def vector(self, name, n):
        t = self._get(name)
        got = [int(d) for d in t.shape]
        if got != [n]:
            raise ModelError(f"{name}: ggml shape {got}, expected [{n}]")
        return self._decode(t).reshape(n)

    def output_matrix(self):
        name = "output.weight" if "output.weight" in self.tensors else "token_embd.weight"
        return self.matrix(name, self.n_vocab, self.n_embd)


# -- the forward pass -----------------------------------------------------

def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def layer_is_swa(m, il):
    return m.swa_pattern and il % m.swa_pattern < m.swa_pattern - 1


def rope(x, pos, m, il=0):
    """x [n_tokens][n_heads][head_dim] with RoPE applied at positions pos.

    Checked against ggml's CPU rope (ggml/src/ggml-cpu/ops.cpp:
    ggml_compute_forward_rope_flt, ggml_rope_cache_init, rope_yarn,
    rotate_pairs): for pair i < n_rot/2, theta = pos * freq_scale *
    freq_base^(-2i/n_rot) / freq_factor[i]; (x0, x1) -> (x0 cos - x1 sin,
    x0 sin + x1 cos); NORM pairs (2i, 2i+1), NEOX pairs (i, i + n_rot/2);
    dims >= n_rot are copied.  YaRN (ext_factor != 0) is not modelled.
    """
    half = m.n_rot // 2
    i = np.arange(half, dtype=np.float64)
    swa = layer_is_swa(m, il)
    inv_freq = (m.freq_base_swa if swa else m.freq_base) ** (-2.0 * i / m.n_rot)
    if m.freq_factors is not None:
        inv_freq = inv_freq / m.freq_factors
    theta = (np.asarray(pos, dtype=np.float64) * (1.0 if swa else m.freq_scale))[:, None] * inv_freq[None, :]
    cos = np.cos(theta)[:, None, :]
    sin = np.sin(theta)[:, None, :]
    if m.rope_type == ROPE_NEOX:
        first, second = np.arange(half), np.arange(half) + half
    else:
        first, second = np.arange(0, m.n_rot, 2), np.arange(1, m.n_rot, 2)
    x0, x1 = x[..., first], x[..., second]
    out = x.copy()
    out[..., first] = x0 * cos - x1 * sin
    out[..., second] = x0 * sin + x1 * cos
    return out


def attention(m, q, k, v, window):
    """Causal grouped-query attention over one sequence.

    q [T][n_head][dk], k [T][n_head_kv][dk], v [T][n_head_kv][dv]."""
    n_tok = q.shape[0]
    group = m.n_head // m.n_head_kv
    # np.repeat puts copy j of kv head g at index g*group + j: q head h reads kv head h // group.
    k = np.repeat(k, group, axis=1)
    v = np.repeat(v, group, axis=1)
    # Gemma 3 27B (62 layers) scales by n_embd / n_head, as llama.cpp.
    scale = m.n_embd // m.n_head if m.gemma and m.n_layer == 62 else m.head_dim_k
    scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(scale)
    future = np.triu(np.ones((n_tok, n_tok), dtype=bool), k=1)
    scores[:, future] = -np.inf
    if window:
        scores[:, np.tril(np.ones((n_tok, n_tok), dtype=bool), k=-window)] = -np.inf
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("hqk,khd->qhd", p, v).reshape(n_tok, m.n_head * m.head_dim_v)


def layer(m, il, x, pos):
    b = f"blk.{il}."
    n_tok = x.shape[0]
    nq, nk, nv = m.n_head * m.head_dim_k, m.n_head_kv * m.head_dim_k, m.n_head_kv * m.head_dim_v

    h = rms_norm(x, m.vector(b + "attn_norm.weight", m.n_embd), m.eps)
    if b + "attn_qkv.weight" in m.tensors:
        # Phi-3: one projection whose output is Q, then K, then V.
        qkv = h @ m.matrix(b + "attn_qkv.weight", nq + nk + nv, m.n_embd).T
        q, k, v = qkv[:, :nq], qkv[:, nq:nq + nk], qkv[:, nq + nk:]
    else:
        q = h @ m.matrix(b + "attn_q.weight", nq, m.n_embd).T
        k = h @ m.matrix(b + "attn_k.weight", nk, m.n_embd).T
        v = h @ m.matrix(b + "attn_v.weight", nv, m.n_embd).T
    if m.qkv_bias is True or (m.qkv_bias == "optional" and b + "attn_q.bias" in m.tensors):
        q = q + m.vector(b + "attn_q.bias", nq)
        k = k + m.vector(b + "attn_k.bias", nk)
        v = v + m.vector(b + "attn_v.bias", nv)
    q = q.reshape(n_tok, m.n_head, m.head_dim_k)
    k = k.reshape(n_tok, m.n_head_kv, m.head_dim_k)
    if b + "attn_q_norm.weight" in m.tensors:
        # Qwen3, Gemma 3: an RMS norm of each head before RoPE.
        q = rms_norm(q, m.vector(b + "attn_q_norm.weight", m.head_dim_k), m.eps)
        k = rms_norm(k, m.vector(b + "attn_k_norm.weight", m.head_dim_k), m.eps)
    q = rope(q, pos, m, il)
    k = rope(k, pos, m, il)
    v = v.reshape(n_tok, m.n_head_kv, m.head_dim_v)
    window = m.n_swa if not m.gemma else (m.n_swa if layer_is_swa(m, il) else 0)
    att = attention(m, q, k, v, window) @ m.matrix(b + "attn_output.weight", m.n_embd, m.n_head * m.head_dim_v).T
    if m.gemma:
        att = rms_norm(att, m.vector(b + "post_attention_norm.weight", m.n_embd), m.eps)
    x = x + att

    h = rms_norm(x, m.vector(b + "ffn_norm.weight", m.n_embd), m.eps)
    if m.n_expert:
        return x + moe(m, b, h)
    if m.gemma:
        gate = h @ m.matrix(b + "ffn_gate.weight", m.n_ff, m.n_embd).T
        up = h @ m.matrix(b + "ffn_up.weight", m.n_ff, m.n_embd).T
        out = gelu(gate) * up @ m.matrix(b + "ffn_down.weight", m.n_embd, m.n_ff).T
        return x + rms_norm(out, m.vector(b + "post_ffw_norm.weight", m.n_embd), m.eps)
    if b + "ffn_gate.weight" in m.tensors:
        gate = h @ m.matrix(b + "ffn_gate.weight", m.n_ff, m.n_embd).T
        up = h @ m.matrix(b + "ffn_up.weight", m.n_ff, m.n_embd).T
    else:
        # Phi-3: ffn_up's output is the gate, then the up projection
        # (ggml_swiglu applies SiLU to the first half).
        gate_up = h @ m.matrix(b + "ffn_up.weight", 2 * m.n_ff, m.n_embd).T
        gate, up = gate_up[:, :m.n_ff], gate_up[:, m.n_ff:]
    silu = gate / (1.0 + np.exp(-gate))
    return x + (silu * up) @ m.matrix(b + "ffn_down.weight", m.n_embd, m.n_ff).T


def gelu(x):
    """GELU, tanh form (ggml_gelu)."""
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * x * (1.0 + 0.044715 * x * x)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def expert_tensor(m, name, n_out, n_in):
    """A 3-D expert tensor: ggml ne = [n_in, n_out, n_expert], numpy [e][n_out][n_in]."""
    t = m._get(name)
    got = [int(d) for d in t.shape]
    if got != [n_in, n_out, m.n_expert]:
        raise ModelError(f"{name}: ggml shape {got}, expected [{n_in}, {n_out}, {m.n_expert}]")
    return m._decode(t)


def moe(m, b, h):
    """llama.cpp's build_moe_ffn with softmax gating: the softmax over all
    experts, the top k, their probabilities (divided by their sum, clamped
    below at 6.1e-5, where the architecture says so) weighting each chosen
    expert's SwiGLU FFN; Qwen2-MoE adds sigmoid(h . gate_inp_shexp) times
    the shared expert's FFN."""
    F, k = m.n_ff_exp, m.n_expert_used
    logits = h @ m.matrix(b + "ffn_gate_inp.weight", m.n_expert, m.n_embd).T
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    # Stable sort of -p: ties go to the lower expert.
    chosen = np.argsort(-p, axis=-1, kind="stable")[:, :k]
    if m.tally is not None:
        il = int(b.split(".")[1])
        for e in chosen.ravel():
            m.tally[il][int(e)] += 1
    w = np.take_along_axis(p, chosen, axis=-1)
    if ARCH_MOE_NORM[m.arch]:
        w = w / np.maximum(w.sum(axis=-1, keepdims=True), 6.103515625e-5)
    gate = expert_tensor(m, b + "ffn_gate_exps.weight", F, m.n_embd)
    up = expert_tensor(m, b + "ffn_up_exps.weight", F, m.n_embd)
    down = expert_tensor(m, b + "ffn_down_exps.weight", m.n_embd, F)
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        for j in range(k):
            e = chosen[t, j]
            a = silu(gate[e] @ h[t]) * (up[e] @ h[t])
            out[t] += w[t, j] * (down[e] @ a)
    if b + "ffn_down_shexp.weight" in m.tensors:
        S = m.n_ff_shexp
        g = h @ m.matrix(b + "ffn_gate_shexp.weight", S, m.n_embd).T
        u = h @ m.matrix(b + "ffn_up_shexp.weight", S, m.n_embd).T
        sh = (silu(g) * u) @ m.matrix(b + "ffn_down_shexp.weight", m.n_embd, S).T
        gate_s = h @ m.vector(b + "ffn_gate_inp_shexp.weight", m.n_embd)
        out = out + sh / (1.0 + np.exp(-gate_s))[:, None]
    return out


def forward(m, tokens):
    """float64 logits [len(tokens)][n_vocab] of one sequence from position 0."""
    tokens = np.asarray(tokens, dtype=np.int64)
    if tokens.ndim != 1 or tokens.size == 0:
        raise ModelError("need at least one token")
    bad = tokens[(tokens < 0) | (tokens >= m.n_vocab)]
    if bad.size:
        raise ModelError(f"token {int(bad[0])} is outside the vocabulary [0, {m.n_vocab})")
    if tokens.size > m.n_ctx:
        raise ModelError(f"{tokens.size} tokens exceed the context length {m.n_ctx}")
    pos = np.arange(tokens.size)

    x = m.matrix("token_embd.weight", m.n_vocab, m.n_embd)[tokens]
    if m.gemma:
        x = x * np.sqrt(np.float32(m.n_embd))
    for il in range(m.n_layer):
        x = layer(m, il, x, pos)
    x = rms_norm(x, m.vector("output_norm.weight", m.n_embd), m.eps)
    logits = x @ m.output_matrix().T
    if m.softcap:
        logits = np.tanh(logits / m.softcap) * m.softcap
    return logits


def parse_tokens(text):
    try:
        return [int(t) for t in text.split(",") if t.strip() != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--tokens wants comma-separated integers, got {text!r}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="GGUF model file")
    ap.add_argument("--tokens", required=True, type=parse_tokens, help="e.g. 1,2,3")
    ap.add_argument("--out", required=True, help="output: float32 LE [n_tokens][n_vocab]")
    ap.add_argument("--dequantized", action="store_true",
                    help="accept quantized weights, computing with their dequantized values")
    ap.add_argument("--expert-tally", metavar="FILE",
                    help="also write how many tokens each expert was chosen for, per layer, as a "
                         "tally file (hetero's hx_model_expert_tally_save format)")
    args = ap.parse_args(argv)
    try:
        m = Model(args.model, allow_quantized=args.dequantized)
        m.tally = [[0] * m.n_expert for _ in range(m.n_layer)] if args.expert_tally and m.n_expert else None
        logits = forward(m, args.tokens)
    except ModelError as e:
        print(f"ref_llama: {args.model}: {e}", file=sys.stderr)
        return 1
    logits.astype("<f4").tofile(args.out)
    if m.tally is not None:
        with open(args.expert_tally, "w") as f:
            f.write(f"hetero-expert-tally 1\nlayers {m.n_layer} experts {m.n_expert} used {m.n_expert_used}\n")
            for il, row in enumerate(m.tally):
                f.write(f"layer {il}: " + " ".join(str(c) for c in row) + "\n")
    print(f"ref_llama: {m.arch}, {m.n_layer} layers, n_embd {m.n_embd}, vocab {m.n_vocab}: "
          f"{len(args.tokens)} positions -> {args.out}; argmax at last position "
          f"{int(np.argmax(logits[-1]))}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

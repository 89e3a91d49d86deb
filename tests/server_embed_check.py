#!/usr/bin/env python3
"""hetero-server's /v1/embeddings, /embedding, /v1/rerank and /infill on
the small synthetic model (and its copies with a classifier head and with
FIM tokens, written by tests/test_server_embed.c):

- mean, cls and last pooling against a numpy reference over the per-token
  hidden states that pooling none returns (/embedding), each normalization
  (embd_normalize -1, 0, 1, 2, 3); base64 equals float; usage counts the
  tokens; several inputs in one request equal each alone;
- bad inputs (empty, too long, wrong types, bad encoding_format, pooling
  none on the OpenAI route) are 400s with their reason; rerank on a model
  without a head and infill without FIM tokens are 501s; --embedding
  refuses completions;
- rerank: the scores are the head applied to the last hidden state (the
  same server's /embedding with pooling last, unnormalized, recomputed
  here), sorted, top_n, TEI's texts;
- infill: the prompt, built token by token here as llama-server's
  format_prompt_infill builds it, is the one the server evaluates (the
  same prompt_tokens and the same greedy tokens and logprobs as
  /v1/completions given these tokens).

    server_embed_check.py BUILD MODEL RANK_MODEL FIM_MODEL
"""
import base64
import struct
import sys

try:
    import numpy as np
except ImportError:
    print("server_embed_check: numpy is missing (pip install -r tests/requirements.txt)")
    sys.exit(3)

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import server_check as sc  # noqa: E402  (Server, http, check)

BUILD, MODEL, RANK, FIM = sys.argv[1:5]
sc.BUILD = BUILD
check, http = sc.check, sc.http
TEXTS = ["The quick brown fox", "Call me Ishmael.", "It was the best of times, it was the worst of times", "A"]


def post(srv, path, body, want=200):
    status, _, out = http(srv, "POST", path, body)
    check(status == want, f"POST {path} {str(body)[:80]}: {status} {str(out)[:200]}, expected {want}")
    return out


def tokens(srv, text, add_special=False, parse_special=False):
    return post(srv, "/tokenize", {"content": text, "add_special": add_special,
                                   "parse_special": parse_special})["tokens"]


def normalize(v, how):
    if how == -1:
        return v
    if how == 0:
        s = np.max(np.abs(v)) / 32760.0
    elif how == 2:
        s = np.sqrt(np.sum(v.astype(np.float64) ** 2))
    else:
        s = np.sum(np.abs(v.astype(np.float64)) ** how) ** (1.0 / how)
    return v / s if s > 0 else v * 0


def embeddings():
    none = sc.Server("-m", MODEL, "-c", "256", "--pooling", "none")
    rows = {}
    try:
        for t in TEXTS:
            out = post(none, "/embedding", {"content": t})
            rows[t] = np.array(out[0]["embedding"], dtype=np.float64)
            check(rows[t].shape[0] == len(tokens(none, t, True, True)), f"/embedding none: one row per token of {t!r}")
        post(none, "/v1/embeddings", {"input": "x"}, 400)
        print("ok: pooling none gives every token's row; the OpenAI route refuses it")
    finally:
        none.stop()
    for pooling, ref in (("mean", lambda r: r.mean(axis=0)), ("cls", lambda r: r[0]), ("last", lambda r: r[-1])):
        srv = sc.Server("-m", MODEL, "-c", "256", "--pooling", pooling, "--embedding")
        try:
            for how in (-1, 0, 1, 2, 3):
                out = post(srv, "/v1/embeddings", {"input": TEXTS, "embd_normalize": how})
                check(len(out["data"]) == len(TEXTS), "one vector per input")
                for i, t in enumerate(TEXTS):
                    got = np.array(out["data"][i]["embedding"])
                    want = normalize(ref(rows[t]), how)
                    err = np.max(np.abs(got - want)) / max(1.0, np.max(np.abs(want)))
                    check(err < 1e-4, f"{pooling}, embd_normalize {how}, input {i}: off by {err}")
            if pooling == "mean":
                # The OpenAI shape: usage, base64, one input at a time, token arrays.
                n = sum(len(tokens(srv, t, True, True)) for t in TEXTS)
                out = post(srv, "/v1/embeddings", {"input": TEXTS})
                check(out["usage"]["prompt_tokens"] == n and out["object"] == "list", f"usage: {out['usage']} vs {n}")
                b = post(srv, "/v1/embeddings", {"input": TEXTS, "encoding_format": "base64"})
                for i in range(len(TEXTS)):
                    raw = base64.b64decode(b["data"][i]["embedding"])
                    vec = struct.unpack(f"<{len(raw) // 4}f", raw)
                    check(np.allclose(vec, out["data"][i]["embedding"], atol=1e-6), "base64 is the float vector")
                    one = post(srv, "/v1/embeddings", {"input": TEXTS[i]})
                    check(np.allclose(one["data"][0]["embedding"], out["data"][i]["embedding"], atol=1e-5),
                          f"input {i} alone equals it among the others")
                ids = tokens(srv, TEXTS[0], True, True)
                tk = post(srv, "/v1/embeddings", {"input": [ids, TEXTS[1]]})
                check(np.allclose(tk["data"][0]["embedding"], out["data"][0]["embedding"], atol=1e-5),
                      "a token array embeds as its text")
                single = post(srv, "/v1/embeddings", {"input": ids})
                check(len(single["data"]) == 1, "an array of token ids is one input")
                # Bad inputs, each a 400 with its reason.
                for body, why in (({"input": [[]]}, "empty"), ({"input": []}, "empty"), ({"input": 5}, "string"),
                                  ({"input": [[1.5]]}, "token"), ({"input": [{"a": 1}]}, "string"),
                                  ({"input": [1] * 300}, "context"), ({"input": "x", "encoding_format": "hex"},
                                                                      "float or base64"),
                                  ({"input": "x", "embd_normalize": "2"}, "embd_normalize"), ({}, "must be provided"),
                                  ({"input": [999999]}, "token")):
                    out = post(srv, "/v1/embeddings", body, 400)
                    msg = out["error"]["message"]
                    check(why.lower() in msg.lower(), f"{body}: message {msg!r} should say {why!r}")
                post(srv, "/v1/completions", {"prompt": "x", "max_tokens": 1}, 501)
                post(srv, "/v1/rerank", {"query": "a", "documents": ["b"]}, 501)
                post(srv, "/infill", {"input_prefix": "a", "input_suffix": "b"}, 501)
                print("ok: usage, base64, token arrays, batching; bad inputs are 400s; completions, rerank, infill "
                      "refused")
            print(f"ok: {pooling} pooling and every normalization match the numpy reference")
        finally:
            srv.stop()


def rerank():
    srv = sc.Server("-m", RANK, "-c", "256", "--reranking")
    last = sc.Server("-m", RANK, "-c", "256", "--pooling", "last")
    try:
        import gguf  # the head's weights, from the file itself
        r = gguf.GGUFReader(RANK)
        w = {t.name: np.array(t.data, dtype=np.float64) for t in r.tensors if t.name.startswith("cls.")}
        docs = ["a cat sat", "the dog ran far", "x", "It was the best of times"]
        out = post(srv, "/v1/rerank", {"query": "where is the cat", "documents": docs, "top_n": 3})
        check(len(out["results"]) == 3, "top_n 3")
        scores = [x["relevance_score"] for x in out["results"]]
        check(scores == sorted(scores, reverse=True), "sorted by relevance_score")
        bos = tokens(srv, "", True)  # [BOS] where the model adds one
        for x in out["results"]:
            q, d = tokens(srv, "where is the cat"), tokens(srv, docs[x["index"]])
            ids = bos + q + d  # the model adds no EOS
            h = np.array(post(last, "/embedding", {"content": ids, "embd_normalize": -1})[0]["embedding"][0])
            mid = np.tanh(w["cls.weight"] @ h + w["cls.bias"])
            want = float((w["cls.output.weight"] @ mid)[0])
            check(abs(want - x["relevance_score"]) < 1e-3 * max(1, abs(want)),
                  f"document {x['index']}: score {x['relevance_score']} vs head {want}")
        tei = post(srv, "/rerank", {"query": "q", "texts": docs, "return_text": True})
        check(isinstance(tei, list) and "score" in tei[0] and tei[0]["text"] in docs, "TEI's shape")
        for body, why in (({"documents": ["a"]}, "query"), ({"query": 1, "documents": ["a"]}, "string"),
                          ({"query": "q", "documents": []}, "non-empty"), ({"query": "q", "documents": [3]},
                                                                             "string array"),
                          ({"query": "q", "documents": ["a"], "top_n": -1}, "top_n")):
            msg = post(srv, "/v1/rerank", body, 400)["error"]["message"]
            check(why in msg, f"{body}: {msg!r} should say {why!r}")
        post(srv, "/v1/embeddings", {"input": "x"}, 400)
        print("ok: rerank scores are the classifier head over the last hidden state; sorted, top_n, TEI; bad "
              "bodies are 400s")
    finally:
        srv.stop()
        last.stop()


def infill():
    for n_ctx, n_batch in ((4096, None), (512, 64)):
        infill_on(n_ctx, n_batch)


def infill_on(n_ctx, n_batch):
    """format_prompt_infill's cuts: the prefix's last 3/4 n_batch tokens, the
    suffix's first n_batch/4 - 2 - |prompt|, the extra context's last
    n_ctx - n_batch - 2 n_predict (n_batch 2048 unless -b, n_predict -1)."""
    srv = sc.Server("-m", FIM, "-c", str(n_ctx), *(["-b", str(n_batch)] if n_batch else []))
    nb = n_batch or 2048
    try:
        PRE, SUF, MID, REP, SEP = 250, 251, 252, 253, 254
        bos = tokens(srv, "", True)
        cases = [
            {"input_prefix": "def f(x):\n    " * 6, "input_suffix": "\n    return y\n" * 3},
            {"input_prefix": "int a = ", "input_suffix": ";\n", "prompt": "1 +"},
            {"input_prefix": "import u\n", "input_suffix": "", "input_extra": [
                {"filename": "u.py", "text": "def g(): pass\n"}, {"text": "no name"}]},
        ]
        for body in cases:
            ext = [REP] + tokens(srv, "myproject\n")
            for ch in body.get("input_extra", []):
                ext += [SEP] + tokens(srv, ch.get("filename", "tmp") + "\n") + tokens(srv, ch["text"])
            ext += [SEP] + tokens(srv, "filename\n")
            prompt = tokens(srv, body.get("prompt", ""), False, True)
            pre, suf = tokens(srv, body["input_prefix"]), tokens(srv, body["input_suffix"])
            n_pre = min(len(pre), 3 * (nb // 4))
            n_suf = min(len(suf), max(0, nb // 4 - (2 + len(prompt))))
            n_ext = min(max(0, n_ctx - nb + 2), len(ext))
            want = ext[len(ext) - n_ext:] + bos + [PRE] + pre[len(pre) - n_pre:] + prompt + [SUF] + suf[:n_suf] + [MID]
            # answered in llama-server's native shape, as /completion
            got = post(srv, "/infill", dict(body, temperature=0, n_predict=6, n_probs=2))
            ref = post(srv, "/completion", {"prompt": want, "temperature": 0, "n_predict": 6, "n_probs": 2})
            check(got["tokens_evaluated"] == len(want) and got["stop"] is True and "timings" in got,
                  f"infill prompt is {got.get('tokens_evaluated')} tokens, expected {len(want)}: {got}")
            check(got["content"] == ref["content"] and
                  [t["logprob"] for t in got["completion_probabilities"]] ==
                  [t["logprob"] for t in ref["completion_probabilities"]],
                  f"infill {body}: its answer is not that of the expected prompt")
        for body, why in (({"input_suffix": "b"}, "input_prefix"), ({"input_prefix": "a"}, "input_suffix"),
                          ({"input_prefix": "a", "input_suffix": "b", "prompt": 3}, "prompt"),
                          ({"input_prefix": "a", "input_suffix": "b", "input_extra": {}}, "input_extra"),
                          ({"input_prefix": "a", "input_suffix": "b", "input_extra": [{"filename": "x"}]}, "text"),
                          ({"input_prefix": "a", "input_suffix": "b", "n_indent": 4}, "n_indent")):
            msg = post(srv, "/infill", body, 400)["error"]["message"]
            check(why in msg, f"{body}: {msg!r} should say {why!r}")
        print(f"ok: infill builds llama-server's FIM prompt token by token (n_ctx {n_ctx}, n_batch {nb}); bad "
              "bodies are 400s")
    finally:
        srv.stop()


def infill_refused():
    plain = sc.Server("-m", MODEL, "-c", "256")
    try:
        msg = post(plain, "/infill", {"input_prefix": "a", "input_suffix": "b"}, 501)["error"]["message"]
        check("Infill is not supported" in msg and "prefix token is missing" in msg, msg)
        print("ok: a model without FIM tokens answers infill with 501")
    finally:
        plain.stop()


if __name__ == "__main__":
    embeddings()
    rerank()
    infill()
    infill_refused()
    print("server_embed_check: all passed")

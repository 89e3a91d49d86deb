#!/usr/bin/env python3
"""hetero-server's samplers against llama-server's, on the same GGUF model.

    compare_llamacpp_samplers.py HETERO_URL LLAMA_URL

Both servers must already run the same model (e.g. SmolLM2-135M-Instruct)
with one context size.  Fields that leave the answer deterministic
(greedy, or a filter that is itself deterministic at temperature 0) must
give the same text on both: logit_bias in its three forms, n_predict,
ignore_eos, min_tokens (against llama-server's ignore_eos then a greedy
continuation, since llama-server has no min_tokens), DRY, typical_p, XTC
with probability 1, and the sampler order.  For the stochastic ones the
first token's distribution is compared: llama-server's probabilities after
its chain (post_sampling_probs) against the frequencies of hetero's draws
over many seeds (total variation distance, with the sampling noise
expected for that many draws, and the two engines' own difference: plain
sampling at temperature 1 is measured the same way first, since their
logits differ by up to a few tenths of a nat with a Q4_1 model, enough to
move a token across a filter's edge).  Prints one line per case; exits 1 when one
differs.
"""
import json
import math
import sys
import urllib.request

HX, LL = sys.argv[1], sys.argv[2]
FAILED = []


def post(url, path, body):
    req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


# Every filter stated, so neither server's defaults decide.
NEUTRAL = {"top_k": 0, "top_p": 1.0, "min_p": 0.0, "repeat_penalty": 1.0, "temperature": 0}


def text(url, body, chat=False):
    b = dict(NEUTRAL, **body)
    if chat:
        return post(url, "/v1/chat/completions", b)["choices"][0]["message"]["content"]
    return post(url, "/v1/completions", b)["choices"][0]["text"]


def same(name, body, chat=False):
    a, b = text(HX, body, chat), text(LL, body, chat)
    ok = a == b
    print(f"{'same' if ok else 'DIFFERENT'}: {name}: {a!r}" + ("" if ok else f" vs llama-server {b!r}"))
    if not ok:
        FAILED.append(name)
    return a


def tokenize(url, s):
    return post(url, "/tokenize", {"content": s})["tokens"]


def main():
    # Prompts and lengths where the two engines' plain greedy answers agree
    # (their arithmetic differs: near ties may go either way further on).
    p = "The capital of France is"
    story = "def fibonacci(n):"
    paris = tokenize(HX, " Paris")
    assert paris == tokenize(LL, " Paris"), "the two servers tokenize differently"
    base = same("greedy", {"prompt": p, "max_tokens": 12})
    banned = same("logit_bias {id: false}", {"prompt": p, "max_tokens": 12, "logit_bias": {str(paris[0]): False}})
    same("logit_bias [[id, -100]]", {"prompt": p, "max_tokens": 12, "logit_bias": [[paris[0], -100]]})
    same("logit_bias [[text, false]]", {"prompt": p, "max_tokens": 12, "logit_bias": [[" Paris", False]]})
    same("logit_bias {id: +8}", {"prompt": p, "max_tokens": 12, "logit_bias": {"17": 8}})
    if banned == base:
        FAILED.append("logit_bias changed nothing")
    same("n_predict 7", {"prompt": p, "n_predict": 7})
    # A chat turn as tokens, so that both read the same prompt.
    prompt_ids = tokenize(HX, "<|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant\n")
    short = same("greedy chat turn (ends at <|im_end|>)", {"prompt": prompt_ids, "max_tokens": 40})
    long = same("ignore_eos", {"prompt": prompt_ids, "max_tokens": 20, "ignore_eos": True})
    if long == short:
        FAILED.append("ignore_eos changed nothing")
    # min_tokens: end-of-generation held back for N tokens, then free.
    n = len(tokenize(HX, short)) + 4
    hx = post(HX, "/v1/completions", dict(NEUTRAL, prompt=prompt_ids, max_tokens=40, min_tokens=n,
                                          logprobs=0))["choices"][0]
    first = post(LL, "/completion", dict(NEUTRAL, prompt=prompt_ids, n_predict=n, ignore_eos=True, return_tokens=True))
    rest = post(LL, "/completion", dict(NEUTRAL, prompt=prompt_ids + first["tokens"], n_predict=40 - n))
    ll = first["content"] + rest["content"]
    ok = hx["text"] == ll and len(hx["logprobs"]["tokens"]) > n - 1
    print(f"{'same' if ok else 'DIFFERENT'}: min_tokens {n}: {hx['text'][:60]!r}" +
          ("" if ok else f" vs llama-server {ll[:60]!r}"))
    if not ok:
        FAILED.append("min_tokens")
    cat = "The cat sat on the mat. The cat sat on the mat. The cat sat on the"
    plain_cat = text(HX, {"prompt": cat, "max_tokens": 12})
    dry_cat = same("DRY greedy on a literal repeat", {"prompt": cat, "max_tokens": 12, "dry_multiplier": 0.8,
                                                      "dry_allowed_length": 2, "dry_penalty_last_n": 64})
    if dry_cat == plain_cat:
        FAILED.append("DRY changed nothing")
    dry = {"prompt": story, "max_tokens": 32, "dry_multiplier": 0.8, "dry_base": 1.75, "dry_allowed_length": 1,
           "dry_penalty_last_n": 64}
    same("greedy on a repetitive prompt", {"prompt": story, "max_tokens": 32})
    same("DRY greedy (allowed length 1)", dry)
    same("DRY with breakers [\"(\"]", dict(dry, dry_sequence_breakers=["("]))
    same("typical_p 0.3 greedy", {"prompt": p, "max_tokens": 12, "typical_p": 0.3})
    x = same("XTC probability 1, threshold 0.1, greedy", {"prompt": p, "max_tokens": 12, "xtc_probability": 1.0,
                                                          "xtc_threshold": 0.1})
    if x == base:
        FAILED.append("XTC changed nothing")
    same("samplers \"tx\" (XTC after greedy: no-op)",
         {"prompt": p, "max_tokens": 12, "xtc_probability": 1.0, "xtc_threshold": 0.1, "samplers": "tx"})
    same("samplers [\"xtc\", \"temperature\"]",
         {"prompt": p, "max_tokens": 12, "xtc_probability": 1.0, "xtc_threshold": 0.1,
          "samplers": ["xtc", "temperature"]})
    same("repeat + frequency + presence penalties", {"prompt": story, "max_tokens": 32, "repeat_penalty": 1.3,
                                                      "frequency_penalty": 0.5, "presence_penalty": 0.3})

    # Stochastic: the first token's distribution.
    draws = 640
    for name, extra in [("plain, temperature 1 (the engines' own difference)", {}),
                        ("top_n_sigma 1", {"top_n_sigma": 1.0}), ("typical_p 0.7", {"typical_p": 0.7}),
                        ("mirostat 2 (tau 3)", {"mirostat": 2, "mirostat_tau": 3.0}),
                        ("mirostat 1 (tau 3)", {"mirostat": 1, "mirostat_tau": 3.0}),
                        ("dynatemp 0.8 +- 0.5", {"temperature": 0.8, "dynatemp_range": 0.5}),
                        ("XTC 0.5 / 0.05", {"xtc_probability": 0.5, "xtc_threshold": 0.05}),
                        ("top_k 8 + min_p 0.02 at T 1.5", {"top_k": 8, "min_p": 0.02, "temperature": 1.5})]:
        body = dict(NEUTRAL, temperature=1.0, prompt="My favourite colour is")
        body.update(extra)
        ref = post(LL, "/completion", dict(body, n_predict=1, n_probs=200, post_sampling_probs=True, seed=1))
        want = {t["id"]: t["prob"] for t in ref["completion_probabilities"][0]["top_probs"]}
        if "xtc_probability" in extra:  # llama-server shows one coin's outcome: mix both by hand
            full = post(LL, "/completion", dict(body, n_predict=1, n_probs=200, post_sampling_probs=True,
                                                xtc_probability=0, seed=1))
            f = {t["id"]: t["prob"] for t in full["completion_probabilities"][0]["top_probs"]}
            cut = post(LL, "/completion", dict(body, n_predict=1, n_probs=200, post_sampling_probs=True,
                                               xtc_probability=1, seed=1))
            c = {t["id"]: t["prob"] for t in cut["completion_probabilities"][0]["top_probs"]}
            want = {k: 0.5 * f.get(k, 0) + 0.5 * c.get(k, 0) for k in set(f) | set(c)}
        got = {}
        for seed in range(draws // 16):
            r = post(HX, "/v1/completions", dict(body, max_tokens=1, n=16, seed=1000 * seed, logprobs=0))
            for ch in r["choices"]:
                tok = tokenize(HX, ch["text"]) if ch["text"] else []
                key = tok[0] if len(tok) == 1 else ch["text"]
                got[key] = got.get(key, 0) + 1
        tv = 0.5 * sum(abs(got.get(k, 0) / draws - want.get(k, 0)) for k in set(got) | set(want))
        # Expected TV of an empirical distribution: about sum sqrt(p(1-p)/(2 pi n)) * 2 / 2
        noise = sum(math.sqrt(q * (1 - q) / draws) for q in want.values()) * math.sqrt(2 / math.pi) / 2
        outside = sum(v for k, v in got.items() if want.get(k, 0) == 0) / draws
        ok = tv < 3 * noise + 0.05 and outside < 0.05
        print(f"{'same' if ok else 'DIFFERENT'}: {name}: {len(want)} tokens kept by llama.cpp, total variation "
              f"{tv:.3f} over {draws} draws (noise ~{noise:.3f}), outside its set {outside:.3f}")
        if not ok:
            FAILED.append(name)
    print("compare_llamacpp_samplers:", "all the same" if not FAILED else "DIFFERENT: " + ", ".join(FAILED))
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()

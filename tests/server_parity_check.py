#!/usr/bin/env python3
"""hetero-server where llama.cpp's own server tests (tools/server/tests)
found it answering otherwise than llama-server; each check is one such
behaviour, on 127.0.0.1 and free ports:
  - a streamed chat's first chunk: the role with content null;
  - an assistant prefill given as content parts is continued as its text
    parts joined with "\\n\\n"; two assistant messages at the end are a 400;
  - --host with a comma list listens on each address;
  - a batch of prompts in one /completion (a list of answers) or
    /v1/completions (one answer, the prompts' choices in order);
  - /metrics: 501 without --metrics; llama-server's llamacpp:* metrics
    (each with HELP and TYPE) agreeing with the answers' timings, and the
    Process-Start-Time-Unix header; the timings' generation rate over the
    decode steps (n tokens, n - 1 steps);
  - timings_per_token and return_progress on streams (/completion, chat);
  - /completion's generation_settings: ignore_eos, and logit_bias listing
    the request's biases and, with ignore_eos, each end-of-generation
    token's -inf (null);
  - n_probs on /completion: completion_probabilities, whole and one token
    an event streamed;
  - continue_final_message; a response_format schema with "items" as an
    array (draft 4's tuple form).
Prints one line per check; exits 1 at the first failure.

    server_parity_check.py BUILD_DIR      (HX_TEST_SMOLLM2: SmolLM2-135M-Instruct, else the embedded model)
"""
import http.client
import json
import os
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_native_check as nc  # noqa: E402
from server_native_check import Server, check  # noqa: E402

nc.BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"


def sse(port, path, body, host="127.0.0.1"):
    """The data: events of a streamed answer, parsed ([DONE] left out)."""
    c = http.client.HTTPConnection(host, port, timeout=120)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    raw = r.read().decode()
    c.close()
    check(r.status == 200, f"{path} streamed: {r.status} {raw[:300]}")
    return [json.loads(x[6:]) for x in raw.split("\n") if x.startswith("data: ") and x != "data: [DONE]"]


def chat_stream_and_prefill():
    tmpl = os.path.join(tempfile.mkdtemp(), "t.jinja")
    with open(tmpl, "w") as f:
        f.write("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
                "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    srv = Server("--chat-template-file", tmpl, "--verbose")
    try:
        ev = sse(srv.port, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
                                                    "stream": True})
        d = ev[0]["choices"][0]["delta"]
        check(d == {"role": "assistant", "content": None}, f"the first chunk's delta: {d}")
        check(all("role" not in e["choices"][0]["delta"] for e in ev[1:] if e["choices"]), f"role twice: {ev}")
        check(all(e["choices"][0]["delta"].get("content") != "" for e in ev), f"an empty content delta: {ev}")
        check(ev[-1]["choices"][0]["finish_reason"] and ev[-1]["choices"][0]["delta"] in ({}, ) or
              ev[-1]["choices"][0]["delta"].get("content"), f"the last chunk: {ev[-1]}")
        print("ok a streamed chat's first chunk: {role: assistant, content: null}, as llama-server's; no chunk "
              "with an empty content (the last one's delta is {} when it brings no text)")

        user = [{"role": "user", "content": "What is the best book"}]
        for prefill, want in (("Whill", "Whill"), ([{"type": "text", "text": "Wh"}, {"type": "text", "text": "ill"}],
                                                   "Wh\n\nill"),
                              ([{"type": "text", "text": "a"}, {"type": "text", "text": ""},
                                {"type": "text", "text": "b"}], "a\n\n\n\nb")):
            st, _, r = srv.req("POST", "/v1/chat/completions", {"max_tokens": 2, "messages": user + [
                {"role": "assistant", "content": prefill}]})
            p = r["__verbose"]["prompt"] if st == 200 else r
            check(st == 200 and p.endswith("<|user|>What is the best book<|end|><|assistant|>" + want),
                  f"prefill {prefill!r}: {st} {p!r}")
        print("ok an assistant prefill is continued; its text parts are joined with \\n\\n (llama-server's)")
        st, _, r = srv.req("POST", "/v1/chat/completions", {"messages": user + [
            {"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}]})
        check(st == 400 and "2 or more assistant messages" in r["error"]["message"], f"two assistants: {st} {r}")
        st, _, r = srv.req("POST", "/v1/chat/completions", {"max_tokens": 2, "messages": [
            {"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]})
        check(st == 200, f"two assistant messages not at the end are a conversation: {st} {r}")
        print("ok two assistant messages at the end: 400; earlier in the conversation: 200")
    finally:
        srv.stop()


def several_hosts():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        print("skip --host 127.0.0.1,::1: no IPv6 loopback here")
        return
    srv = Server("--host", "127.0.0.1,::1")
    try:
        # the second address's line comes after the first's, which is all the start waits for
        deadline = time.time() + 30
        while time.time() < deadline and not any("listening on http://[::1]:%d" % srv.port in x for x in srv.err):
            time.sleep(0.1)
        check(any("listening on http://[::1]:%d" % srv.port in x for x in srv.err), f"no [::1] line: {srv.err}")
        for host in ("127.0.0.1", "::1"):
            c = http.client.HTTPConnection(host, srv.port, timeout=60)
            c.request("GET", "/health")
            r = c.getresponse()
            check(r.status == 200, f"/health on {host}: {r.status}")
            c.close()
            ev = sse(srv.port, "/v1/completions", {"prompt": "Once", "max_tokens": 3, "stream": True}, host)
            check(len(ev) > 1, f"a stream on {host}: {ev}")
        print(f"ok --host 127.0.0.1,::1: both answer on port {srv.port}")
    finally:
        srv.stop()
    for bad in ("127.0.0.1,", ",::1", "127.0.0.1,no-such-host.invalid"):
        p = __import__("subprocess").run([f"{nc.BUILD}/hetero-server", "--host", bad, "--port", "0"],
                                         stderr=__import__("subprocess").PIPE, text=True, timeout=60)
        check(p.returncode != 0 and "--host" in p.stderr, f"--host {bad!r}: {p.returncode} {p.stderr}")
    print("ok --host with an empty or unknown address: refused at start, naming --host")


def batch():
    srv = Server("-np", "4")
    try:
        g = {"n_predict": 5, "temperature": 0}
        st, _, tk = srv.req("POST", "/tokenize", {"content": "I believe the meaning of life is", "add_special": True})
        text = "I believe the meaning of life is"
        st, _, one = srv.req("POST", "/completion", {"prompt": text, **g})
        check(st == 200 and isinstance(one, dict), f"one prompt: {st} {one}")
        for prompts in ([tk["tokens"], tk["tokens"]], [tk["tokens"], text], [tk["tokens"], {"prompt_string": text}],
                        [text, "Once upon a time", text]):
            st, _, r = srv.req("POST", "/completion", {"prompt": prompts, **g})
            check(st == 200 and isinstance(r, list) and len(r) == len(prompts), f"batch {prompts}: {st} {r}")
            check(r[0]["content"] == one["content"] and r[-1]["content"] == one["content"] and
                  all(x["tokens_predicted"] == 5 for x in r), f"batch {prompts}: {[x['content'] for x in r]}")
        check(r[1]["content"] != one["content"] or r[1]["tokens_evaluated"] != one["tokens_evaluated"],
              f"the middle prompt was answered as another: {r}")
        st, _, r = srv.req("POST", "/completion", {"prompt": [{"prompt_string": text}], **g})
        check(st == 200 and isinstance(r, dict) and r["content"] == one["content"], f"a batch of one: {st} {r}")
        st, _, r = srv.req("POST", "/completion", {"prompt": [1, 2, text, 3], **g})
        check(st == 200 and isinstance(r, dict), f"ids and text in one sequence are one prompt: {st} {r}")
        print("ok /completion with a batch of prompts (ids, text, {prompt_string}): a list of answers in order, each "
              "as the prompt alone; a batch of one and ids mixed with text are one answer")
        st, _, r = srv.req("POST", "/v1/completions", {"prompt": [text, "Once upon a time"], "n": 2, "max_tokens": 4,
                                                       "temperature": 0})
        st1, _, a = srv.req("POST", "/v1/completions", {"prompt": text, "max_tokens": 4, "temperature": 0})
        st2, _, b = srv.req("POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0})
        check(st == 200 and [c["index"] for c in r["choices"]] == [0, 1, 2, 3] and
              [c["text"] for c in r["choices"]] == [a["choices"][0]["text"]] * 2 + [b["choices"][0]["text"]] * 2 and
              r["usage"]["prompt_tokens"] == a["usage"]["prompt_tokens"] + b["usage"]["prompt_tokens"] and
              r["usage"]["completion_tokens"] == 16, f"/v1/completions batch: {st} {r}")
        print("ok /v1/completions with two prompts and n 2: four choices in order, usage summed")
        st, _, r = srv.req("POST", "/completion", {"prompt": [text, text], "stream": True})
        check(st == 400 and "not streamed" in r["error"]["message"], f"a streamed batch: {st} {r}")
        st, _, r = srv.req("POST", "/completion", {"prompt": [text, {"x": 1}], **g})
        check(st == 400 and "prompt_string" in r["error"]["message"], f"a bad prompt in a batch: {st} {r}")
        st, _, r = srv.req("POST", "/completion", {"prompt": ["a"] * 65, **g})
        check(st == 400 and "at most 64" in r["error"]["message"], f"65 prompts: {st} {r}")
        print("ok a streamed batch, a bad prompt in a batch, 65 prompts: 400 saying why")
    finally:
        srv.stop()


def llamacpp_metrics(text):
    out, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE llamacpp:"):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
        elif line.startswith("llamacpp:"):
            name, value = line.split(" ", 1)
            check(name in types and f"# HELP {name} " in text, f"{name} has no TYPE or HELP line")
            out[name] = (types[name], float(value))
    return out


def metrics():
    srv = Server("-np", "2")
    try:
        st, _, b = srv.req("GET", "/metrics")
        check(st == 501 and b["error"]["type"] == "not_supported_error" and "--metrics" in b["error"]["message"],
              f"/metrics without --metrics: {st} {b}")
        print("ok /metrics without --metrics: 501 not_supported_error, as llama-server's")
    finally:
        srv.stop()
    srv = Server("-np", "1", "--metrics")
    try:
        prompt = "the quick brown fox jumps over the lazy dog " * 6
        predicted = processed = cached = 0
        for n in (1, 16):
            st, _, r = srv.req("POST", "/completion", {"prompt": prompt, "n_predict": n, "temperature": 0,
                                                       "ignore_eos": True})
            t = r["timings"]
            check(st == 200 and t["predicted_n"] == n and all(v is not None and v >= 0 for v in t.values()),
                  f"timings: {st} {t}")
            if n == 1:
                check(t["predicted_per_second"] == 0 and t["predicted_per_token_ms"] == 0, f"one token: {t}")
            else:
                check(abs(t["predicted_per_second"] - 1e3 / t["predicted_ms"] * (n - 1)) < 1e-6 and
                      abs(t["predicted_per_token_ms"] - t["predicted_ms"] / (n - 1)) < 1e-9, f"16 tokens: {t}")
            predicted += t["predicted_n"]
            processed += t["prompt_n"]
            cached += t["cache_n"]
        check(cached > 0, "the second prompt took nothing from the prefix cache")
        st, h, text = srv.req("GET", "/metrics", raw=True)
        check(st == 200 and "process-start-time-unix" in h and
              abs(int(h["process-start-time-unix"]) - time.time()) < 600, f"/metrics headers: {h}")
        m = llamacpp_metrics(text)
        for name in ("prompt_tokens_total", "prompt_tokens_cached_total", "prompt_seconds_total",
                     "tokens_predicted_total", "tokens_predicted_seconds_total", "n_decode_total", "n_tokens_max",
                     "spec_decode_num_draft_tokens_total", "spec_decode_num_accepted_tokens_total",
                     "spec_decode_num_drafts_total"):
            check(m.get("llamacpp:" + name, ("",))[0] == "counter", f"llamacpp:{name} is not a counter: {m}")
        for name in ("prompt_tokens_seconds", "predicted_tokens_seconds", "requests_processing", "requests_deferred",
                     "n_busy_slots_per_decode"):
            check(m.get("llamacpp:" + name, ("",))[0] == "gauge", f"llamacpp:{name} is not a gauge: {m}")
        v = {k.split(":")[1]: x[1] for k, x in m.items()}
        check(v["tokens_predicted_total"] == predicted and v["prompt_tokens_total"] == processed and
              v["prompt_tokens_cached_total"] == cached, f"totals {v} against the answers' {predicted} {processed} "
              f"{cached}")
        check(v["n_decode_total"] > 0 and v["requests_processing"] == 0 and v["prompt_seconds_total"] > 0 and
              v["tokens_predicted_seconds_total"] > 0 and v["predicted_tokens_seconds"] > 0 and
              0 < v["n_busy_slots_per_decode"] <= 1 and v["spec_decode_num_drafts_total"] == 0, f"values: {v}")
        check("hetero_generation_tokens_total" in text, "hetero's own metrics are gone")
        m2 = llamacpp_metrics(srv.req("GET", "/metrics", raw=True)[2])
        check(m2["llamacpp:predicted_tokens_seconds"][1] == 0, f"the gauges' window did not restart: {m2}")
        print(f"ok /metrics with --metrics: llamacpp:* counters and gauges with HELP and TYPE, totals as the answers' "
              f"timings ({predicted} predicted, {processed} evaluated, {cached} cached), Process-Start-Time-Unix; "
              f"n tokens' rate over n - 1 steps")
    finally:
        srv.stop()


def progress():
    srv = Server("-np", "1", "-b", "32", "-c", "1024")
    try:
        prompt = "the quick brown fox jumps over the lazy dog " * 8
        ev = sse(srv.port, "/completion", {"prompt": prompt, "n_predict": 4, "stream": True,
                                           "timings_per_token": True, "return_progress": True})
        prog = [e for e in ev if "prompt_progress" in e]
        total = prog[0]["prompt_progress"]["total"]
        check(len(prog) == 1 + (total + 31) // 32, f"{total} tokens in steps of 32: {len(prog)} progress events")
        first = prog[0]
        check(first["prompt_progress"]["processed"] == first["prompt_progress"]["cache"] == 0 and
              first["timings"]["prompt_n"] == 0 and first["timings"]["prompt_ms"] == 0 and
              first["timings"]["predicted_n"] == 0, f"the first progress event: {first}")
        done = [p["prompt_progress"]["processed"] for p in prog]
        ms = [p["timings"]["prompt_ms"] for p in prog]
        check(done == sorted(done) and len(set(done)) == len(done) and done[-1] == total and ms == sorted(ms) and
              ms[-1] > 0 and all(v is not None and v >= 0 for p in prog for v in p["timings"].values()),
              f"progress: {done} {ms}")
        toks = [e for e in ev if "prompt_progress" not in e]
        check(all("timings" in e for e in toks) and toks[-1]["stop"] and toks[-1]["timings"]["predicted_n"] == 4 and
              [e["timings"]["predicted_n"] for e in toks[:-1]] == sorted(e["timings"]["predicted_n"] for e in toks[:-1]),
              f"token events' timings: {toks}")
        print(f"ok /completion return_progress: {len(prog)} events for {total} prompt tokens in steps of 32, the first "
              "before any is evaluated, processed growing to total; timings_per_token on every event")
        # the same prompt again: the cache's share shows from the first event
        ev = sse(srv.port, "/completion", {"prompt": prompt, "n_predict": 2, "stream": True, "return_progress": True})
        prog = [e["prompt_progress"] for e in ev if "prompt_progress" in e]
        check(prog[0]["cache"] > 0 and prog[0]["cache"] == prog[0]["processed"] and all(
            p["cache"] == prog[0]["cache"] for p in prog) and prog[-1]["processed"] == total and len(prog) == 2 and
              all("timings" not in e for e in ev if "prompt_progress" in e), f"cached: {prog}")
        print(f"ok return_progress again: the prefix cache's {prog[0]['cache']} tokens from the first event, one step")
        ev = sse(srv.port, "/v1/chat/completions", {"messages": [{"role": "user", "content": "This is a test" * 10}],
                                                    "max_tokens": 3, "stream": True, "return_progress": True})
        prog = [e for e in ev if "prompt_progress" in e]
        check(prog and all(e["choices"][0]["delta"] == {"role": "assistant", "content": None} for e in prog) and
              prog[-1]["prompt_progress"]["processed"] == prog[-1]["prompt_progress"]["total"], f"chat: {prog}")
        ev = sse(srv.port, "/v1/chat/completions", {"messages": [{"role": "user", "content": "test"}], "max_tokens": 5,
                                                    "stream": True, "stream_options": {"include_usage": True},
                                                    "timings_per_token": True})
        check("timings" not in ev[0] and all("timings" in e for e in ev[1:]) and ev[-1]["choices"] == [] and
              0 < ev[-1]["timings"]["predicted_n"] <= 5 and "prompt_per_second" in ev[-1]["timings"] and
              all("role" not in e["choices"][0]["delta"] for e in ev[1:] if e["choices"]), f"chat timings: {ev}")
        st, _, r = srv.req("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                                            "max_tokens": 2, "timings_per_token": "yes"})
        check(st == 400 and "timings_per_token" in r["error"]["message"], f"timings_per_token 'yes': {st} {r}")
        print("ok chat streams: return_progress as role deltas with prompt_progress; timings_per_token on every chunk "
              "after the role's, the usage chunk's the final ones; a non-boolean is a 400")
    finally:
        srv.stop()


def continue_and_schema():
    tmpl = os.path.join(tempfile.mkdtemp(), "t.jinja")
    with open(tmpl, "w") as f:
        f.write("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
                "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    srv = Server("--chat-template-file", tmpl, "--verbose")
    try:
        msgs = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "Whill"}]
        st, _, r = srv.req("POST", "/v1/chat/completions", {"max_tokens": 2, "messages": msgs,
                                                            "add_generation_prompt": False,
                                                            "continue_final_message": True})
        check(st == 200 and r["__verbose"]["prompt"].endswith("<|user|>Q<|end|><|assistant|>Whill"), f"{st} {r}")
        for body, why in (({"continue_final_message": True}, "both"),
                          ({"continue_final_message": True, "add_generation_prompt": False,
                            "messages": [{"role": "user", "content": "Q"}]}, "assistant"),
                          ({"continue_final_message": "reasoning_content", "add_generation_prompt": False},
                           "no thought tags"),
                          ({"continue_final_message": 3}, "boolean")):
            st, _, r = srv.req("POST", "/v1/chat/completions", {"max_tokens": 2, "messages": msgs, **body})
            check(st == 400 and why in r["error"]["message"], f"{body}: {st} {r}")
        print("ok continue_final_message: continues the assistant's message (add_generation_prompt false); with "
              "add_generation_prompt, a last user message, reasoning_content (a template with no thought tags) or a "
              "number: 400")
        st, _, r = srv.req("POST", "/v1/chat/completions", {"max_tokens": 8, "messages": msgs[:1], "response_format": {
            "type": "json_object", "schema": {"items": [{"type": "integer"}]}}})
        c = r["choices"][0]["message"]["content"] if st == 200 else ""
        check(st == 200 and c.startswith("[") and (c.rstrip().endswith("]") or r["choices"][0]["finish_reason"] ==
                                                   "length"), f"items as an array: {st} {r}")
        print(f"ok response_format with items as an array (a one-integer tuple): {c!r}")
    finally:
        srv.stop()


def n_probs():
    srv = Server()
    try:
        body = {"prompt": "I believe the meaning of life is", "n_probs": 10, "temperature": 0, "n_predict": 5}
        st, _, r = srv.req("POST", "/completion", body)
        cp = r.get("completion_probabilities", []) if st == 200 else []
        check(st == 200 and len(cp) == 5, f"n_probs: {st} {r}")
        for t in cp:
            check(isinstance(t["token"], str) and t["logprob"] <= 0 and isinstance(t["bytes"], list) and
                  len(t["top_logprobs"]) == 10 and all(p["logprob"] <= 0 and isinstance(p["token"], str)
                                                      for p in t["top_logprobs"]) and
                  t["top_logprobs"][0]["id"] == t["id"], f"an entry: {t}")
        check("".join(t["token"] for t in cp) == r["content"], f"tokens vs content: {cp} {r['content']!r}")
        ev = sse(srv.port, "/completion", {**body, "stream": True})
        parts = [e for e in ev if not e["stop"]]
        check(len(parts) == 5 and all(len(e["completion_probabilities"]) == 1 for e in parts) and
              [e["completion_probabilities"][0]["id"] for e in parts] == [t["id"] for t in cp] and
              "".join(e["content"] for e in parts) == r["content"] and "completion_probabilities" not in ev[-1],
              f"streamed: {ev}")
        for ie in (True, False):
            st, _, r = srv.req("POST", "/completion", {"prompt": "Once upon a time", "n_predict": 2, "ignore_eos": ie,
                                                       "logit_bias": [[5, -1.5], [6, False]]})
            g = r["generation_settings"]
            eog = [b for b in g["logit_bias"][2:]]
            check(st == 200 and g["ignore_eos"] is ie and g["logit_bias"][:2] == [{"bias": -1.5, "token": 5},
                                                                                 {"bias": None, "token": 6}] and
                  (len(eog) > 0 and all(b["bias"] is None for b in eog)) == ie and (ie or not eog),
                  f"ignore_eos {ie}: {g}")
        print("ok generation_settings: ignore_eos as asked; logit_bias the request's (false: null) and, with "
              "ignore_eos, each end-of-generation token's null (-inf)")
        st, _, r = srv.req("POST", "/completion", {**body, "n_probs": 0})
        check(st == 200 and "completion_probabilities" not in r, f"n_probs 0: {r}")
        # post_sampling_probs: the distribution each token was drawn from
        post = {"prompt": "Today was the day. Today I would finally become a", "n_probs": 10, "temperature": 1.0,
                "n_predict": 5, "post_sampling_probs": True, "seed": 3}
        for extra, most in (({}, 10), ({"top_k": 3}, 3), ({"temperature": 0}, 1)):
            st, _, r = srv.req("POST", "/completion", {**post, **extra})
            cp = r.get("completion_probabilities", []) if st == 200 else []
            check(st == 200 and len(cp) == 5 and r["generation_settings"]["post_sampling_probs"] is True,
                  f"post_sampling_probs {extra}: {st} {r}")
            for i, t in enumerate(cp):
                tops = t["top_probs"]
                ps = [q["prob"] for q in tops]
                check("logprob" not in t and 0 < t["prob"] <= 1 and 0 < len(tops) <= most and
                      all(0 < q <= 1 for q in ps) and ps == sorted(ps, reverse=True) and
                      any(q["id"] == t["id"] and abs(q["prob"] - t["prob"]) < 1e-6 for q in tops) and
                      all(isinstance(q["token"], str) and isinstance(q["bytes"], list) for q in tops),
                      f"post_sampling_probs {extra}: an entry: {t}")
                if len(tops) < 10:
                    check(abs(sum(ps) - 1) < 1e-4, f"post_sampling_probs {extra}: fewer than 10 sum to 1: {ps}")
            if extra.get("temperature") == 0:
                check(all(t["prob"] == 1 and len(t["top_probs"]) == 1 for t in cp), f"greedy post-sampling: {cp}")
            elif not extra:
                check(len(cp[0]["top_probs"]) == 10, f"10 alternatives at temperature 1: {cp[0]}")
        st, _, r = srv.req("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}],
                                                             "max_tokens": 3, "logprobs": True, "top_logprobs": 4,
                                                             "top_k": 2, "post_sampling_probs": True})
        c = r["choices"][0]["logprobs"]["content"] if st == 200 else []
        check(st == 200 and len(c) >= 1 and all("prob" in t and len(t["top_probs"]) <= 2 and
                                                abs(sum(q["prob"] for q in t["top_probs"]) - 1) < 1e-4 for t in c),
              f"post_sampling_probs on chat: {st} {r}")
        st, _, r = srv.req("POST", "/completion", {**post, "post_sampling_probs": "yes"})
        check(st == 400, f"post_sampling_probs not a boolean: {st} {r}")
        print("ok post_sampling_probs: each token's prob and top_probs from the distribution it was drawn from "
              "(most likely first, none zero, at most top_k, summing to 1 when fewer than asked; greedy: 1); on "
              "chat too; a non-boolean is a 400")
        print("ok n_probs on /completion: completion_probabilities of 5 tokens with 10 alternatives each, whole and "
              "one token an event streamed (greedy: the same tokens); none with n_probs 0")
    finally:
        srv.stop()


def main():
    n_probs()
    progress()
    continue_and_schema()
    metrics()
    batch()
    chat_stream_and_prefill()
    several_hosts()
    print("server_parity: all checks passed")


if __name__ == "__main__":
    main()

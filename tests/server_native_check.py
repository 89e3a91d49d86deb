#!/usr/bin/env python3
"""hetero-server's llama-server endpoints, on 127.0.0.1 and free ports:
/completion (whole, streamed, stop words, return_tokens, response_fields)
and /completions, /props (GET; POST with and without --props), /slots
(--slots, --no-slots, a request running), /apply-template, /models and
/v1/models, /detokenize keeping special tokens, /tokenize with_pieces,
CORS (preflight and every answer; --cors-origins), --api-key with
Authorization: Bearer and X-Api-Key on every route but /health, the error
types and statuses, and llama-server's flags (-c with -np, --kv-unified,
-ngl, --alias list, --tags, --cache-ram), id_slot, --sleep-idle-seconds
and the reasoning budget.  Prints one line per check; exits 1 at the
first failure.

    server_native_check.py BUILD_DIR      (HX_TEST_SMOLLM2: SmolLM2-135M-Instruct, for its vocabulary)
"""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
SMOLLM2 = os.environ.get("HX_TEST_SMOLLM2", "")
KEY = "sk-native-test"


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


class Server:
    """hetero-server on 127.0.0.1 (port 0: a free one), with `env` added
    to the environment."""

    def __init__(self, *args, env=None, port=0):
        model = ["-m", SMOLLM2] if SMOLLM2 and os.path.exists(SMOLLM2) else []
        self.p = subprocess.Popen([f"{BUILD}/hetero-server", "--port", str(port), "-t", "2", "--devices", "cpu",
                                   *model, *args], stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
        self.err, self.port = [], None
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.p.stderr.readline()
            if not line:
                break
            self.err.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        check(self.port, "hetero-server did not start: " + "".join(self.err))
        threading.Thread(target=lambda: [self.err.append(x) for x in self.p.stderr], daemon=True).start()

    def req(self, method, path, body=None, headers=None, raw=False):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        h = {"Content-Type": "application/json", **(headers or {})}
        c.request(method, path, json.dumps(body) if body is not None else None, h)
        r = c.getresponse()
        data = r.read().decode()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        c.close()
        if raw:
            return r.status, hdrs, data
        try:
            return r.status, hdrs, json.loads(data) if data else None
        except json.JSONDecodeError:
            return r.status, hdrs, data

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        rc = self.p.wait(timeout=60)
        check(rc == 0, f"hetero-server exited {rc}: {''.join(self.err[-5:])}")


def keyed(srv):
    A = {"Authorization": f"Bearer {KEY}"}
    # every route but /health asks for the key: 401 authentication_error
    st, _, b = srv.req("GET", "/health")
    check(st == 200, f"/health without a key: {st}")
    for method, path, body in (("GET", "/props", None), ("GET", "/slots", None), ("GET", "/models", None),
                               ("GET", "/v1/models", None), ("POST", "/completion", {"prompt": "a"}),
                               ("POST", "/completions", {"prompt": "a"}), ("POST", "/tokenize", {"content": "a"}),
                               ("POST", "/detokenize", {"tokens": [1]}), ("POST", "/apply-template", {"messages": []}),
                               ("POST", "/v1/chat/completions", {"messages": []}), ("GET", "/metrics", None)):
        for hdrs in ({}, {"Authorization": "Bearer wrong"}, {"X-Api-Key": "wrong"}):
            st, _, b = srv.req(method, path, body, hdrs)
            check(st == 401 and isinstance(b, dict) and b["error"]["type"] == "authentication_error",
                  f"{method} {path} {hdrs}: {st} {b}")
    st, _, b = srv.req("GET", "/props", None, {"X-Api-Key": KEY})
    check(st == 200, f"X-Api-Key: {st} {b}")
    print("ok --api-key: every route but /health answers 401 authentication_error without the key; Bearer and "
          "X-Api-Key both pass")

    # CORS: a preflight needs no key; every answer echoes the Origin (--cors-origins '*', credentials)
    st, h, _ = srv.req("OPTIONS", "/completions", None, {"Origin": "web.mydomain.fr",
                                                         "Access-Control-Request-Method": "POST"}, raw=True)
    check(st == 200 and h.get("access-control-allow-origin") == "web.mydomain.fr" and
          h.get("access-control-allow-credentials") == "true" and
          h.get("access-control-allow-methods") == "GET, POST, DELETE, OPTIONS" and
          h.get("access-control-allow-headers") == "*", f"preflight: {st} {h}")
    st, h, _ = srv.req("GET", "/props", None, {"Origin": "http://x.y", **A})
    check(st == 200 and h.get("access-control-allow-origin") == "http://x.y", f"CORS on an answer: {h}")
    st, h, _ = srv.req("GET", "/props", None, {"Origin": "http://x.y"})
    check(st == 401 and h.get("access-control-allow-origin") == "http://x.y", f"CORS on a 401: {h}")
    print("ok CORS: preflight 200 without a key (credentials true, methods, headers *); the Origin echoed on answers")

    # /props
    st, _, p = srv.req("GET", "/props", None, A)
    d = p["default_generation_settings"]
    check(st == 200 and p["total_slots"] == 2 and d["n_ctx"] == 256 and d["params"]["seed"] == 42 and
          abs(d["params"]["temperature"] - 0.8) < 1e-9 and p["model_path"].endswith(".gguf") and
          d["params"]["top_k"] == 40 and d["params"]["top_p"] == 0.95 and d["params"]["min_p"] == 0.05 and
          p["chat_template"] and p["endpoint_slots"] is True and p["endpoint_props"] is False and
          p["build_info"].startswith("hetero"), f"/props: {p}")
    st, _, b = srv.req("POST", "/props", {}, A)
    check(st == 501 and b["error"]["type"] == "not_supported_error", f"POST /props without --props: {st} {b}")
    print("ok /props: total_slots 2, n_ctx 512 / 2 = 256 (-c 512 -np 2), seed 42, temperature 0.8; POST needs --props "
          "(501 not_supported_error)")

    # /models: aliases sorted as llama-server (id = the first in alphabetical order), tags
    for path in ("/models", "/v1/models"):
        st, _, m = srv.req("GET", path, None, A)
        m0 = m["data"][0]
        check(st == 200 and m0["id"] == "a-model" and set(m0["aliases"]) == {"b-model", "a-model"} and
              set(m0["tags"]) == {"chat", "small"} and m0["meta"]["n_ctx"] == 256 and
              m["models"][0]["name"] == "a-model", f"{path}: {m}")
    print("ok /models and /v1/models: id a-model of --alias b-model,a-model, aliases, tags, meta")

    # /completion, whole
    body = {"prompt": "I believe the meaning of life is", "n_predict": 6, "temperature": 0, "seed": 7}
    st, _, r = srv.req("POST", "/completion", body, A)
    check(st == 200 and isinstance(r["content"], str) and r["content"] and r["stop"] is True and
          r["stop_type"] == "limit" and r["tokens_predicted"] == 6 and r["tokens"] == [] and
          r["timings"]["predicted_n"] == 6 and r["timings"]["prompt_n"] == r["tokens_evaluated"] and
          r["truncated"] is False and isinstance(r["has_new_line"], bool) and
          r["generation_settings"]["n_predict"] == 6 and r["generation_settings"]["seed"] == 7 and
          r["model"] == "a-model", f"/completion: {r}")
    whole = r["content"]
    st, _, r2 = srv.req("POST", "/completion", {**body, "return_tokens": True}, A)
    check(st == 200 and len(r2["tokens"]) == 6 and all(isinstance(t, int) for t in r2["tokens"]) and
          r2["content"] == whole, f"return_tokens: {r2}")
    st, _, r3 = srv.req("POST", "/completions", body, A)
    check(st == 200 and r3["content"] == whole, f"/completions is /completion: {r3}")
    st, _, r4 = srv.req("POST", "/v1/completions", {**body, "max_tokens": 6}, A)
    check(st == 200 and r4["object"] == "text_completion" and r4["choices"][0]["text"] == whole, f"/v1: {r4}")
    st, _, r5 = srv.req("POST", "/completion", {**body, "response_fields": ["content", "generation_settings/n_predict"]},
                        A)
    check(st == 200 and r5 == {"content": whole, "generation_settings/n_predict": 6}, f"response_fields: {r5}")
    st, _, r6 = srv.req("POST", "/completion", {**body, "prompt": {"prompt_string": body["prompt"]}}, A)
    check(st == 200 and r6["content"] == whole, f"prompt_string: {st} {r6}")
    st, _, tk = srv.req("POST", "/tokenize", {"content": body["prompt"]}, A)
    half = len(body["prompt"]) // 2
    cut = body["prompt"].rfind(" ", 0, half)
    st, _, r7 = srv.req("POST", "/completion", {**body, "prompt": [body["prompt"][:cut], body["prompt"][cut:]]}, A)
    check(st == 200 and isinstance(r7, list) and len(r7) == 2 and all(x["stop"] for x in r7),
          f"two strings are two prompts, a batch answered as a list (server_parity checks it further): {st} {r7}")
    st, _, r7 = srv.req("POST", "/completion", {**body, "prompt": tk["tokens"][:2] + [
        srv.req("POST", "/detokenize", {"tokens": tk["tokens"][2:]}, A)[2]["content"]]}, A)
    check(st == 200 and r7["tokens_evaluated"] == len(tk["tokens"]), f"ids and a string mixed: {st} {r7}")
    st, _, b = srv.req("POST", "/completion", {**body, "prompt": {"prompt_string": "a", "multimodal_data": "x"}}, A)
    check(st == 400 and "multimodal" in b["error"]["message"], f"multimodal_data: {st} {b}")
    print(f"ok /completion prompt forms: {{prompt_string}}, ids and text mixed in one sequence; multimodal_data "
          "refused")
    print(f"ok /completion: {whole!r}, stop_type limit, 6 tokens, timings, generation_settings; return_tokens, "
          "response_fields; /completions the same; /v1/completions OpenAI's shape")

    # a stop word: the second word of the greedy answer
    words = whole.split()
    if len(words) >= 2:
        st, _, r = srv.req("POST", "/completion", {**body, "stop": [words[1]]}, A)
        check(st == 200 and r["stop_type"] == "word" and r["stopping_word"] == words[1] and
              words[1] not in r["content"], f"stop word {words[1]!r}: {r}")
        print(f"ok stop word {words[1]!r}: stop_type word, stopping_word, the text before it")

    # streamed: data: lines, partials with their tokens, the summary last, no [DONE]
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
    c.request("POST", "/completion", json.dumps({**body, "stream": True}), {"Content-Type": "application/json", **A})
    raw = c.getresponse().read().decode()
    c.close()
    events = [json.loads(x[6:]) for x in raw.split("\n") if x.startswith("data: ")]
    check("[DONE]" not in raw and events and events[-1]["stop"] is True and
          events[-1]["timings"]["predicted_n"] == 6 and events[-1]["stop_type"] == "limit" and
          all(e["stop"] is False and e["tokens"] for e in events[:-1]) and
          "".join(e["content"] for e in events) == whole, f"stream: {raw[:600]}")
    print(f"ok /completion streamed: {len(events) - 1} partial events and the summary, no [DONE], the same text")

    # /slots: a request running shows in one slot
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
    c.request("POST", "/completion", json.dumps({"prompt": "Once", "n_predict": 400, "ignore_eos": True,
                                                 "stream": True}), {"Content-Type": "application/json", **A})
    resp = c.getresponse()
    resp.readline()  # its first event: it runs
    st, _, slots = srv.req("GET", "/slots", None, A)
    c.close()
    check(st == 200 and len(slots) == 2 and sum(s["is_processing"] for s in slots) == 1 and
          all(s["n_ctx"] == 256 and "params" not in s for s in slots), f"/slots: {slots}")
    print("ok /slots: 2 slots, the running request in one (is_processing, next_token), n_ctx 256")

    # /apply-template
    msgs = [{"role": "user", "content": "hello"}]
    st, _, t = srv.req("POST", "/apply-template", {"messages": msgs}, A)
    st2, _, t2 = srv.req("POST", "/apply-template", {"messages": msgs, "add_generation_prompt": False}, A)
    check(st == 200 and st2 == 200 and "hello" in t["prompt"] and t["prompt"].startswith(t2["prompt"]) and
          len(t["prompt"]) > len(t2["prompt"]), f"/apply-template: {t} {t2}")
    st, _, n = srv.req("POST", "/v1/chat/completions/input_tokens", {"messages": msgs}, A)
    st2, _, tk = srv.req("POST", "/tokenize", {"content": t["prompt"], "add_special": True}, A)
    check(st == 200 and n["input_tokens"] == len(tk["tokens"]), f"input_tokens: {st} {n} {tk}")
    st, _, v = srv.req("POST", "/chat/completions", {"messages": msgs, "max_tokens": 2, "verbose": True}, A)
    check(st == 200 and v["__verbose"]["prompt"].endswith(t["prompt"]), f"verbose: true: {v}")
    st, _, v = srv.req("POST", "/chat/completions", {"messages": msgs, "max_tokens": 2}, A)
    check(st == 200 and "__verbose" not in v, f"no verbose: {v}")
    st, _, v = srv.req("POST", "/chat/completions", {"messages": msgs, "max_tokens": 2, "verbose": "yes"}, A)
    check(st == 400, f"verbose not a boolean: {st} {v}")
    print(f"ok /chat/completions/input_tokens: {n['input_tokens']}; a request's verbose: true gives __verbose")
    st, _, b = srv.req("POST", "/apply-template", {"messages": msgs, "add_generation_prompt": True,
                                                   "continue_final_message": True}, A)
    check(st == 400 and "continue_final_message" in b["error"]["message"], f"both: {st} {b}")
    st, _, b = srv.req("POST", "/apply-template", {"messages": "no"}, A)
    check(st == 400 and b["error"]["type"] == "invalid_request_error", f"/apply-template bad: {st} {b}")
    # no messages: the generation prompt alone, and a chat answers it (as llama-server)
    st, _, e = srv.req("POST", "/apply-template", {"messages": []}, A)
    check(st == 200 and e["prompt"] and t["prompt"].endswith(e["prompt"]) and "hello" not in e["prompt"],
          f"/apply-template of no messages: {st} {e}")
    st, _, v = srv.req("POST", "/chat/completions", {"messages": [], "max_tokens": 2}, A)
    check(st == 200 and v["usage"]["completion_tokens"] == 2, f"a chat of no messages: {st} {v}")
    print(f"ok /apply-template: {t['prompt']!r}; add_generation_prompt false leaves the assistant's turn out; no "
          f"messages {e['prompt']!r}; bad messages 400")

    # /tokenize with_pieces, /detokenize keeping special tokens
    st, _, tk = srv.req("POST", "/tokenize", {"content": "hello world", "with_pieces": True}, A)
    check(st == 200 and all("id" in x and x["piece"] for x in tk["tokens"]) and
          "".join(x["piece"] for x in tk["tokens"]) == "hello world", f"with_pieces: {tk}")
    st, _, tk = srv.req("POST", "/tokenize", {"content": "媽 and 🤗", "with_pieces": True}, A)
    check(st == 200 and all(isinstance(x["piece"], str) and x["piece"] or isinstance(x["piece"], list) and
                            all(0 <= b < 256 for b in x["piece"]) for x in tk["tokens"]) and
          bytes(b for x in tk["tokens"] for b in (x["piece"].encode() if isinstance(x["piece"], str) else x["piece"]))
          == "媽 and 🤗".encode(), f"with_pieces, part of a character: {tk}")
    if SMOLLM2:
        st, _, dt = srv.req("POST", "/detokenize", {"tokens": [1, 4093, 198, 28120, 2]}, A)
        check(st == 200 and dt["content"] == "<|im_start|>user\nhello<|im_end|>", f"/detokenize: {dt}")
    st, _, b = srv.req("POST", "/detokenize", {"tokens": [-1]}, A)
    check(st == 400 and b["error"]["type"] == "invalid_request_error", f"/detokenize bad id: {st} {b}")
    print("ok /tokenize with_pieces (a piece that is part of a character as its bytes); /detokenize spells special tokens (<|im_start|>user\\nhello<|im_end|>)")

    # errors: their types and statuses
    st, _, b = srv.req("GET", "/nowhere", None, A)
    check(st == 404 and b["error"]["type"] == "not_found_error", f"404: {st} {b}")
    st, _, b = srv.req("POST", "/completion", {"prompt": "hello " * 400, "n_predict": 4}, A)
    check(st == 400 and b["error"]["type"] == "exceed_context_size_error" and b["error"]["n_ctx"] == 256 and
          b["error"]["n_prompt_tokens"] > 256, f"context exceeded: {st} {b}")
    n_prompt = b["error"]["n_prompt_tokens"]
    check("exceeds the available context size" in b["error"]["message"], f"context exceeded message: {b}")
    check(not r2["truncated"], f"truncated without a full context: {r2}")
    st, _, b = srv.req("POST", "/completion", {"prompt": "a", "n_predict": "x"}, A)
    check(st == 400 and b["error"]["type"] == "invalid_request_error", f"bad n_predict: {st} {b}")
    st, _, b = srv.req("POST", "/completion", {"prompt": "a", "n_predict": 0}, A)
    check(st == 400 and "n_predict" in b["error"]["message"], f"n_predict 0: {st} {b}")
    print(f"ok errors: 404 not_found_error; 400 exceed_context_size_error (n_prompt_tokens {n_prompt}, n_ctx 256); "
          "400 invalid_request_error")


def small_context():
    srv = Server("-c", "64", "-np", "2")
    try:
        st, _, r = srv.req("POST", "/completion", {"prompt": "Hi there", "n_predict": -1, "ignore_eos": True})
        check(st == 200 and r["truncated"] is True and r["stop_type"] == "limit" and
              r["tokens_evaluated"] + r["tokens_predicted"] == 32, f"n_predict -1 fills the context: {r}")
    finally:
        srv.stop()
    print(f"ok n_predict -1: {r['tokens_evaluated']} prompt + {r['tokens_predicted']} generated tokens fill the "
          "32-token context (-c 64 -np 2), truncated")


def named_slots():
    """id_slot: a request that names a busy slot waits for it; one that
    names another runs beside it; /slots shows each at the slot it named."""
    srv = Server("-c", "1024", "-np", "2", "--slots")
    done = {}

    def run(name, slot, n):
        st, _, r = srv.req("POST", "/completion", {"prompt": "Once upon a time", "id_slot": slot, "n_predict": n,
                                                    "ignore_eos": True})
        done[name] = (time.time(), st, r)

    try:
        a = threading.Thread(target=run, args=("a", 1, 400))  # long enough to be seen running
        a.start()
        deadline = time.time() + 30
        while time.time() < deadline:
            st, _, slots = srv.req("GET", "/slots")
            if slots[1].get("is_processing"):
                break
            time.sleep(0.02)
        check(slots[1].get("is_processing") and not slots[0].get("is_processing"), f"/slots while a runs: {slots}")
        b = threading.Thread(target=run, args=("b", 1, 2))  # waits for a
        c = threading.Thread(target=run, args=("c", 0, 2))  # runs beside a
        b.start()
        c.start()
        for t in (a, b, c):
            t.join(120)
        check(all(done[k][1] == 200 for k in "abc"), f"answers: {[(k, done[k][1]) for k in done]}")
        check(done["b"][0] >= done["a"][0], "b named a's slot and ended before a")
        check(done["c"][0] < done["a"][0], "c named the other slot and waited for a")
        check([done[k][2]["id_slot"] for k in "abc"] == [1, 1, 0], f"id_slot in the answers: {done}")
        st, _, r = srv.req("POST", "/completion", {"prompt": "hi", "id_slot": 2})
        check(st == 400 and "the server has 2 slots" in r["error"]["message"], f"id_slot 2: {st} {r}")
        # n answers: the first in the slot named, the others in free ones
        st, _, r = srv.req("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                            "id_slot": 0, "n": 2, "max_tokens": 4})
        check(st == 200 and len(r["choices"]) == 2, f"id_slot 0 with n 2: {st} {r}")
    finally:
        srv.stop()
    print("ok id_slot: a request naming a busy slot waits for it, one naming the other does not; /slots shows them "
          "there; a slot past -np is a 400; n > 1 answers beside the one in the slot named")


def prompt_cache_room():
    """--cache-ram: a prompt pushed out of a full pool by another comes back
    from the cache when the pool has the room, and is evaluated again when
    it has not (-c 512 -np 1: the requests' 512 tokens; two 300-token
    prompts do not fit there together)."""
    words = "river house garden music story water light city road market paper money night".split()
    got = {}
    for mib in ("0", "64"):
        srv = Server("-c", "512", "-np", "1", "--cache-ram", mib)
        try:
            line = next(x for x in srv.err if "KV pool" in x)
            # 300 tokens each, whatever the vocabulary
            prompts = []
            for k in (1, 7):
                text = " ".join(words[(i * k) % 13] + str(k) + str(i) for i in range(300))
                st, _, t = srv.req("POST", "/tokenize", {"content": text})
                check(st == 200 and len(t["tokens"]) >= 300, f"/tokenize: {st} {t}")
                prompts.append(t["tokens"][:300])
            runs = []
            for prompt in (prompts[0], prompts[1], prompts[0]):
                st, _, r = srv.req("POST", "/completion", {"prompt": prompt, "n_predict": 1})
                check(st == 200, f"--cache-ram {mib}: {st} {r}")
                runs.append(r["timings"])
        finally:
            srv.stop()
        got[mib] = (line, runs)
    n = got["0"][1][0]["prompt_n"]
    check(n == 300, f"a prompt of {n} tokens (wanted 300: two must not fit in 512)")
    check("(0 of them the prefix cache's" in got["0"][0], f"--cache-ram 0: {got['0'][0]}")
    check("64 MiB)" in got["64"][0], f"--cache-ram 64: {got['64'][0]}")
    again0, again64 = got["0"][1][2], got["64"][1][2]
    check(again64["cache_n"] >= n - 16 and again64["prompt_n"] <= 16,
          f"--cache-ram 64, the first prompt again: {again64}")
    check(again0["cache_n"] < n - 64, f"--cache-ram 0, the first prompt again: {again0} (its blocks were needed)")
    print(f"ok --cache-ram: a {n}-token prompt sent again after another: {again64['cache_n']} tokens from the cache "
          f"with 64 MiB of room, {again0['cache_n']} with none")


def unkeyed():
    # --no-slots, --props, --kv-unified, --cors-origins localhost, -ngl 0
    tmpl = ("{{ date_string }}|{{ datetime }}|{{ enable_thinking }}|{{ flavour }}|{{ messages[0].content }}"
            "{% if add_generation_prompt %}<think>\n{% endif %}")
    srv = Server("-c", "512", "-np", "2", "--kv-unified", "--no-slots", "--props", "--cors-origins", "localhost",
                 "-ngl", "0", "--offline", "--jinja", "--chat-template", tmpl, "--reasoning", "off", "--verbose",
                 "--backend_sampling")
    try:
        import datetime
        today = datetime.date.today()
        st, _, t = srv.req("POST", "/apply-template", {"messages": [{"role": "user", "content": "hi"}],
                                                       "chat_template_kwargs": {"flavour": "mint"}})
        want = f"{today.strftime('%d %b %Y')}|{today.strftime('%b %d %Y')}|False|mint|hi<think>\n</think>"
        check(st == 200 and t["prompt"] == want, f"template context: {t} (wanted {want!r})")
        st, _, c = srv.req("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                            "max_tokens": 3})
        check(st == 200 and c["__verbose"]["prompt"].endswith("|False||hi<think>\n</think>") and
              c["__verbose"]["content"] == c["choices"][0]["message"]["content"] and
              c["__verbose"]["tokens_predicted"] == c["usage"]["completion_tokens"], f"--verbose: {st} {c}")
        st, _, b = srv.req("POST", "/apply-template", {"messages": [{"role": "user", "content": "hi"}],
                                                       "chat_template_kwargs": {"enable_thinking": "yes"}})
        check(st == 400, f"enable_thinking not a boolean: {st} {b}")
        print(f"ok the template's context: date_string, datetime, enable_thinking false (--reasoning off) closing "
              f"the opened thought, chat_template_kwargs: {want!r}; --verbose's __verbose.prompt")
        st, _, b = srv.req("GET", "/slots")
        check(st == 501 and b["error"]["type"] == "not_supported_error", f"--no-slots: {st} {b}")
        st, _, p = srv.req("GET", "/props")
        check(p["default_generation_settings"]["n_ctx"] == 512 and p["endpoint_slots"] is False and
              p["endpoint_props"] is True, f"--kv-unified props: {p}")
        st, _, b = srv.req("POST", "/props", {})
        check(st == 200 and b == {"success": True}, f"POST /props: {st} {b}")
        st, _, b = srv.req("POST", "/props", {"n_threads": 4})
        check(st == 400 and "n_threads" in b["error"]["message"], f"POST /props a field: {st} {b}")
        st, h, _ = srv.req("GET", "/health", None, {"Origin": "http://localhost:3000"})
        check(h.get("access-control-allow-origin") == "http://localhost:3000", f"localhost origin: {h}")
        st, h, _ = srv.req("GET", "/health", None, {"Origin": "http://evil.example"})
        check("access-control-allow-origin" not in h, f"non-localhost origin: {h}")
        # --backend_sampling (llama-server's spelling with _): on the CPU, where hetero samples
        check(any("--backend-sampling: the logits are computed on the CPU" in line for line in srv.err),
              "--backend_sampling taken, said at start")
        body = {"prompt": "Once upon a time", "n_predict": 6, "seed": 7, "n_probs": 3}
        answers = [srv.req("POST", "/completion", dict(body, backend_sampling=bs))[2] for bs in (True, False)]
        check(answers[0]["content"] == answers[1]["content"] and
              answers[0]["completion_probabilities"] == answers[1]["completion_probabilities"],
              f"backend_sampling true and false: the same answer: {answers}")
        st, _, b = srv.req("POST", "/completion", dict(body, backend_sampling="on"))
        check(st == 400 and "backend_sampling" in b["error"]["message"], f"backend_sampling \"on\": {st} {b}")
    finally:
        srv.stop()
    print("ok --no-slots (501 not_supported_error), --props (POST {} succeeds, a field is refused), --kv-unified "
          "(n_ctx 512), --cors-origins localhost, -ngl 0, --offline, --backend_sampling (the same answer and "
          "probabilities with backend_sampling true and false)")
    p = subprocess.run([f"{BUILD}/hetero-server", "-fa", "on"], capture_output=True, text=True, timeout=30)
    check(p.returncode == 2 and "attention" in p.stderr, f"-fa refused: {p.returncode} {p.stderr}")
    p = subprocess.run([f"{BUILD}/hetero-server", "-ngl", "lots"], capture_output=True, text=True, timeout=30)
    check(p.returncode == 2 and "-ngl" in p.stderr, f"-ngl lots: {p.returncode} {p.stderr}")
    p = subprocess.run([f"{BUILD}/hetero-server", "-c", "4", "-np", "8"], capture_output=True, text=True, timeout=30)
    check(p.returncode != 0 and "-np" in p.stderr, f"-c 4 -np 8: {p.returncode} {p.stderr}")
    print("ok -fa refused naming why; -ngl lots refused; -c 4 -np 8 refused (no context left per request)")


def props_sleeping(srv):
    st, _, p = srv.req("GET", "/props")
    check(st == 200, f"/props: {st}")
    return p["is_sleeping"]


def wait_asleep(srv, what):
    deadline = time.time() + 10
    while time.time() < deadline:
        if props_sleeping(srv):
            return
        time.sleep(0.05)
    fail(f"{what}: the server did not fall asleep within 10 s")


def sleeping():
    """--sleep-idle-seconds: the model freed after the idle time, read-only
    routes answering without waking it, a request that needs it loading it
    again with the same answers, the idle time counted from the last
    answer, many requests at a sleeping server loading it once."""
    for bad in ("0", "x", "-2"):
        p = subprocess.run([f"{BUILD}/hetero-server", "--sleep-idle-seconds", bad], stderr=subprocess.PIPE,
                           text=True, timeout=30)
        check(p.returncode == 2 and "--sleep-idle-seconds" in p.stderr, f"--sleep-idle-seconds {bad} refused")
    srv = Server("-c", "1024", "-np", "8", "--metrics", "--sleep-idle-seconds", "1")
    try:
        body = {"prompt": "Once upon a time", "n_predict": 12, "temperature": 0}
        st, _, before = srv.req("POST", "/completion", body)
        check(st == 200 and not props_sleeping(srv), "awake while answering")
        srv.req("GET", "/metrics")  # the first scrape after an answer empties the throughput window
        st, _, awake = srv.req("GET", "/metrics")
        wait_asleep(srv, "idle")
        for path in ("/health", "/props", "/models", "/v1/models", "/metrics"):
            st, _, out = srv.req("GET", path)
            check(st == 200, f"GET {path} while asleep: {st}")
        check(props_sleeping(srv), "/health, /props, /models and /metrics do not wake it")
        st, _, m = srv.req("GET", "/metrics")
        check(re.search(r"^hetero_kv_blocks_used 0$", m, re.M), "asleep, /metrics shows no KV block held")
        check(re.search(r"^hetero_kv_blocks_cached [1-9]", m, re.M) and m == awake,
              "asleep, /metrics is the text of the last scrape awake (llama-server's snapshot)")
        st, _, mach = srv.req("GET", "/machine")
        check(st == 200 and mach["kv"]["blocks_cached"] == 0 and mach["kv"]["blocks_used"] == 0,
              f"asleep, /machine shows the KV pool freed: {mach.get('kv')}")
        # monitoring reads answered 2xx are not counted; a 404 is (seen once awake: asleep, the text stays)
        for path in ("/health", "/props", "/v1/models", "/metrics"):
            srv.req("GET", path)
        srv.req("GET", "/no-such-route")
        st, _, tok = srv.req("POST", "/tokenize", {"content": "Hello"})
        check(st == 200 and tok["tokens"] and not props_sleeping(srv), "/tokenize wakes it")
        st, _, m3 = srv.req("GET", "/metrics")
        n2xx = lambda text: int(re.search(r'^hetero_requests_total\{code="2xx"\} (\d+)$', text, re.M).group(1))  # noqa: E731
        check(n2xx(m3) == n2xx(m) + 1 and n2xx(m) >= 1, f"probes and scrapes not counted, /tokenize counted: "
              f"{n2xx(m)} -> {n2xx(m3)}")
        check(re.search(r'^hetero_requests_total\{code="other"\} 1$', m3, re.M), f"a 404 is counted: {m3}")
        st, _, after = srv.req("POST", "/completion", body)
        check(st == 200 and after["content"] == before["content"], "loaded again, the same greedy answer")
        # the idle time counts from the last answer
        st, _, again = srv.req("POST", "/completion", body)
        t_end = time.time()
        wait_asleep(srv, "after an answer")
        idle = time.time() - t_end
        st, _, m4 = srv.req("GET", "/metrics")
        check(n2xx(m4) == n2xx(m3) + 2, f"asleep with no scrape after the last answer, /metrics is rendered from the "
              f"counters, not the older text: {n2xx(m3)} -> {n2xx(m4)}")
        check(st == 200 and idle >= 0.9, f"asleep {idle:.2f} s after the last answer (--sleep-idle-seconds 1)")
        loads = sum("loaded again" in line for line in srv.err)
        out = []
        threads = [threading.Thread(target=lambda: out.append(srv.req("POST", "/completion", body)[2]["content"]))
                   for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(0.2)
        check(out == [before["content"]] * 8 and sum("loaded again" in line for line in srv.err) == loads + 1,
              "8 requests at a sleeping server: loaded once, each the same answer")
    finally:
        srv.stop()
    print(f"ok --sleep-idle-seconds 1: asleep {idle:.2f} s after the last answer (the model freed, /metrics shows no "
          "KV block), /health /props /models /metrics (the awake text) answer asleep, /tokenize wakes it, the same greedy answer "
          "after; 8 requests at once load it once; 0, x and -2 refused; probes and scrapes not counted, a 404 counted")


def reasoning_budget():
    """reasoning_budget_tokens (and --reasoning-budget by default): a
    prompt that opens a thought gets N free tokens, then the message and
    </think> forced, token for token."""
    srv = Server("-c", "1024", "-np", "2", "--reasoning-budget", "2")
    try:
        prompt = "Think about it.<think>\n"
        st, _, t = srv.req("POST", "/tokenize", {"content": "[enough]</think>", "parse_special": True})
        forced = t["tokens"]

        def run(**kw):
            st, _, r = srv.req("POST", "/completion", {"prompt": prompt, "n_predict": 24, "temperature": 0,
                                                       "ignore_eos": True, "return_tokens": True,
                                                       "reasoning_budget_message": "[enough]", **kw})
            check(st == 200, f"/completion with {kw}: {st} {r}")
            return r["tokens"]

        def forced_at(toks):
            return next((j for j in range(len(toks)) if toks[j:j + len(forced)] == forced), None)

        free = run(reasoning_budget_tokens=-1)
        check(forced_at(free) is None, "no budget (-1): nothing forced")
        for budget, kw in ((2, {}), (5, {"reasoning_budget_tokens": 5}), (0, {"thinking_budget_tokens": 0})):
            toks = run(**kw)
            j = forced_at(toks)
            check(j is not None and budget <= j <= budget + 3 and toks[:j] == free[:j],
                  f"budget {budget} ({kw or '--reasoning-budget 2'}): forced from token {j}")
        st, _, e = srv.req("POST", "/completion", {"prompt": prompt, "n_predict": 4, "reasoning_budget_tokens": 3,
                                                   "thinking_budget_tokens": 4})
        check(st == 400 and "disagree" in e["error"]["message"], "two budgets that disagree: 400")
        st, _, e = srv.req("POST", "/completion", {"prompt": prompt, "n_predict": 4, "reasoning_budget_tokens": 3,
                                                   "json_schema": {"type": "object"}})
        check(st == 400 and "reasoning budget" in e["error"]["message"], "a budget with a grammar: 400")
        st, _, e = srv.req("POST", "/completion", {"prompt": prompt, "n_predict": 4, "json_schema": {"type": "object"}})
        check(st == 200, "the server's default budget is left out with a grammar")
        st, _, e = srv.req("POST", "/completion", {"prompt": prompt, "n_predict": 4,
                                                   "reasoning_budget_end_tags": ["</a>", "</b>"]})
        check(st == 400 and "reasoning_budget_end_tags" in e["error"]["message"], "two end tags: 400")
    finally:
        srv.stop()
    print("ok reasoning budget: --reasoning-budget 2, reasoning_budget_tokens 5, thinking_budget_tokens 0 each force "
          "'[enough]</think>' token for token after the free ones; -1 forces nothing; two budgets that disagree, a "
          "budget with a grammar and two end tags are 400s")


def main():
    t0 = time.time()
    srv = Server("-c", "512", "-np", "2", "--api-key", KEY, "--seed", "42", "--temp", "0.8", "--alias",
                 "b-model,a-model", "--tags", "chat,small", "-b", "32")
    try:
        keyed(srv)
    finally:
        srv.stop()
    small_context()
    named_slots()
    prompt_cache_room()
    unkeyed()
    sleeping()
    reasoning_budget()
    print(f"server_native_check: all passed in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()

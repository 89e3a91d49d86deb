#!/usr/bin/env python3
"""hetero-server against the official openai client, on 127.0.0.1 and a
free port: every endpoint, streamed and whole; a greedy answer the same
alone and among 16 at once; 64 concurrent streams, each complete; the bad
input table; a client that leaves mid-stream, or before its whole answer;
cache_prompt; a slow reader; API keys; and
SIGTERM draining.  Prints one line per check; exits 1 at the first failure
(3 when the openai package is missing).

    server_check.py BUILD_DIR [--table]    (--table: print the bad-input table)
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

try:
    import openai
except ImportError:
    print("server_check: the openai package is missing (pip install -r tests/requirements.txt)")
    sys.exit(3)

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
TABLE = "--table" in sys.argv


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


class Server:
    """hetero-server on a free port of 127.0.0.1, stopped by SIGTERM."""

    def __init__(self, *args):
        self.log = tempfile.TemporaryFile(mode="w+")
        self.p = subprocess.Popen([f"{BUILD}/hetero-server", "--port", "0", "-t", "2", "--devices", "cpu", "--metrics", *args],
                                  stderr=subprocess.PIPE, text=True)
        self.port = None
        deadline = time.time() + 60
        lines = []
        while time.time() < deadline:
            line = self.p.stderr.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        check(self.port, "hetero-server did not start: " + "".join(lines))
        # Keep reading its stderr so it never blocks on a full pipe.
        self.err = lines
        threading.Thread(target=self._drain, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.port}"

    def _drain(self):
        for line in self.p.stderr:
            self.err.append(line)

    def client(self, key="none"):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, timeout=120)

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        rc = self.p.wait(timeout=60)
        check(rc == 0, f"hetero-server exited {rc} after SIGTERM: {''.join(self.err[-5:])}")


def http(srv, method, path, body=None, headers=None, raw=None):
    """(status, headers, parsed JSON or text) of one request."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(srv.url + path, data=data, method=method, headers=headers or {})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, hdrs, text = r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        status, hdrs, text = e.code, e.headers, e.read().decode()
    try:
        return status, hdrs, json.loads(text)
    except ValueError:
        return status, hdrs, text


def metric(srv, name):
    _, _, text = http(srv, "GET", "/metrics")
    m = re.search(rf"^hetero_{name} (\S+)$", text, re.M)
    check(m, f"/metrics has no hetero_{name}")
    return float(m.group(1))


def wait_idle(srv, what):
    """The engine holds no request and no KV block (within 10 s)."""
    for _ in range(200):
        if metric(srv, "kv_blocks_used") == 0 and metric(srv, "requests_running") == 0 \
                and metric(srv, "requests_waiting") == 0:
            return
        time.sleep(0.05)
    fail(f"{what}: KV blocks still held ({metric(srv, 'kv_blocks_used')})")


def endpoints(srv):
    c = srv.client()
    models = c.models.list()
    check(len(models.data) == 1 and models.data[0].id, "models.list")
    model = models.data[0].id

    r = c.completions.create(model=model, prompt="Once upon a time", max_tokens=8, temperature=0, logprobs=3,
                             seed=1)
    ch = r.choices[0]
    check(ch.finish_reason in ("length", "stop") and r.usage.completion_tokens == len(ch.logprobs.tokens),
          f"completion: {r}")
    check(r.usage.prompt_tokens > 0 and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens,
          "completion usage")
    check(all(len(t) <= 3 for t in ch.logprobs.top_logprobs) and all(lp <= 0 for lp in ch.logprobs.token_logprobs),
          "completion logprobs")
    print("ok completions (whole):", repr(ch.text), ch.finish_reason, r.usage.completion_tokens, "tokens")

    text, finish, usage = "", None, None
    for chunk in c.completions.create(model=model, prompt="Once upon a time", max_tokens=8, temperature=0,
                                      stream=True, stream_options={"include_usage": True}):
        if chunk.choices:
            text += chunk.choices[0].text
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage:
            usage = chunk.usage
    check(text == ch.text and finish == ch.finish_reason, f"stream {text!r} != whole {ch.text!r}")
    check(usage and usage.completion_tokens == r.usage.completion_tokens, "stream usage")
    print("ok completions (streamed) give the same text and usage")

    msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hi"}]
    r = c.chat.completions.create(model=model, messages=msgs, max_tokens=6, temperature=0, logprobs=True,
                                  top_logprobs=2, n=2)
    check(len(r.choices) == 2 and r.choices[0].message.role == "assistant", "chat n=2")
    check(r.choices[0].message.content == r.choices[1].message.content, "greedy n=2 differ")
    lp = r.choices[0].logprobs.content
    check(lp and all(len(t.top_logprobs) == 2 for t in lp), "chat top_logprobs")
    print("ok chat (whole, n=2, logprobs):", repr(r.choices[0].message.content))

    pieces, role, finish = [], None, None
    for chunk in c.chat.completions.create(model=model, messages=msgs, max_tokens=6, temperature=0, stream=True):
        d = chunk.choices[0].delta
        role = d.role or role
        if d.content:
            pieces.append(d.content)
        finish = chunk.choices[0].finish_reason or finish
    check(role == "assistant" and "".join(pieces) == r.choices[0].message.content and finish,
          f"chat stream {''.join(pieces)!r}")
    print("ok chat (streamed)")

    # A stop string: the text ends before it.
    full = c.completions.create(model=model, prompt="Once upon a time", max_tokens=12, temperature=0).choices[0].text
    stop = next((ch for ch in full[1:] if ch.isascii() and ch.isprintable()), None)
    check(stop, f"no printable character to stop at in {full!r}")
    if stop:
        r = c.completions.create(model=model, prompt="Once upon a time", max_tokens=12, temperature=0, stop=[stop])
        check(r.choices[0].finish_reason == "stop" and r.choices[0].text == full[:full.index(stop)],
              f"stop {stop!r}: {r.choices[0].text!r} from {full!r}")
        print("ok stop strings")
    # Seeds: the same seed, the same sampled text.
    a = c.completions.create(model=model, prompt="Hello", max_tokens=8, temperature=1, top_p=0.9, seed=42,
                             extra_body={"repeat_penalty": 1.1, "top_k": 40, "min_p": 0.05}).choices[0].text
    b = c.completions.create(model=model, prompt="Hello", max_tokens=8, temperature=1, top_p=0.9, seed=42,
                             extra_body={"repeat_penalty": 1.1, "top_k": 40, "min_p": 0.05}).choices[0].text
    check(a == b, "same seed, different text")
    print("ok seed, temperature, top_p, top_k, min_p, repeat_penalty")
    # OpenAI's penalties reach the sampler (tests/test_sampling.c checks
    # their arithmetic): they change a greedy text that repeats itself.
    plain = c.completions.create(model=model, prompt="a", max_tokens=40, temperature=0, logprobs=0)
    pen = c.completions.create(model=model, prompt="a", max_tokens=40, temperature=0, logprobs=0,
                               frequency_penalty=2.0, presence_penalty=1.0)
    ids = plain.choices[0].logprobs.tokens
    check(len(set(ids)) < len(ids), f"greedy text with no repeat to penalize: {ids}")
    check(pen.choices[0].logprobs.tokens != ids, "frequency_penalty and presence_penalty changed nothing")
    print("ok frequency_penalty, presence_penalty")

    st, _, tok = http(srv, "POST", "/tokenize", {"content": "Hello world", "with_pieces": False})
    check(st == 200 and tok["tokens"], f"/tokenize {st} {tok}")
    st, _, detok = http(srv, "POST", "/detokenize", {"tokens": tok["tokens"]})
    check(st == 200 and detok["content"] == "Hello world", f"/detokenize {detok}")
    st, _, h = http(srv, "GET", "/health")
    check(st == 200 and h["status"] == "ok", "/health")
    check(metric(srv, "generation_tokens_total") > 0, "/metrics tokens")
    _, _, text = http(srv, "GET", "/metrics")
    for name in ("time_to_first_token_seconds_bucket", "inter_token_latency_seconds_bucket",
                 "requests_waiting", "kv_blocks_used", "device_busy_ratio"):
        check("hetero_" + name in text, f"/metrics lacks {name}")
    print("ok /tokenize, /detokenize, /health, /metrics")
    return model


def prefix_cache(srv, model):
    """Two prompts that start with the same long text: the second takes the
    shared KV from the prefix cache (whole blocks, then the rows of the
    block where the prompts part), and says so in its usage
    (prompt_tokens_details.cached_tokens, as OpenAI does) and in /metrics."""
    c = srv.client()
    block = int(metric(srv, "kv_block_tokens"))
    shared = f"System {os.getpid()}-{time.time_ns()}: " + " ".join(f"rule {i} is to be brief." for i in range(6))
    names = ("hits", "misses", "tokens_reused", "cached")
    metrics = {"hits": "kv_prefix_hits_total", "misses": "kv_prefix_misses_total",
               "tokens_reused": "kv_tokens_reused_total", "cached": "prompt_tokens_cached_total"}
    before = {k: metric(srv, metrics[k]) for k in names}
    first = c.completions.create(model=model, prompt=shared + " Question one?", max_tokens=4, temperature=0)
    d = first.usage.prompt_tokens_details
    # A new prefix shares at most its first few tokens ("System") with
    # earlier prompts.
    check(first.usage.prompt_tokens >= 4 * block and d is not None and d.cached_tokens < block,
          f"a new prefix found cached: {first.usage}")
    second = c.completions.create(model=model, prompt=shared + " Question two?", max_tokens=4, temperature=0)
    cached = second.usage.prompt_tokens_details.cached_tokens
    # every token the two prompts share
    ids = [http(srv, "POST", "/tokenize", {"content": shared + q, "add_special": True})[2]["tokens"]
           for q in (" Question one?", " Question two?")]
    shared_tokens = next(i for i, (a, b) in enumerate(zip(*ids)) if a != b)
    check(cached == shared_tokens and cached >= 3 * block, f"the shared prefix not reused: {second.usage} "
          f"(blocks of {block}, {shared_tokens} tokens shared)")
    text, usage = "", None
    for chunk in c.completions.create(model=model, prompt=shared + " Question two?", max_tokens=4, temperature=0,
                                      stream=True, stream_options={"include_usage": True}):
        if chunk.choices:
            text += chunk.choices[0].text
        if chunk.usage:
            usage = chunk.usage
    check(text == second.choices[0].text, f"streamed with a cached prefix: {text!r} != {second.choices[0].text!r}")
    check(usage and usage.prompt_tokens_details.cached_tokens >= cached, f"streamed usage: {usage}")
    after = {k: metric(srv, metrics[k]) for k in names}
    each = (d.cached_tokens, cached, usage.prompt_tokens_details.cached_tokens)
    reused = sum(each)
    check(after["tokens_reused"] - before["tokens_reused"] == reused
          and after["cached"] - before["cached"] == reused
          and after["hits"] - before["hits"] == sum(n // block for n in each)
          and after["misses"] > before["misses"], f"/metrics prefix cache: {before} -> {after}, {each} reused")
    for name in ("kv_blocks_cached", "kv_blocks_shared", "kv_bytes_used", "kv_evictions_total"):
        metric(srv, name)
    check(metric(srv, "kv_blocks_cached") > 0, "/metrics: no cached KV block after three requests")
    print(f"ok prefix cache: {cached} of {second.usage.prompt_tokens} prompt tokens cached, in usage and /metrics")
    # cache_prompt: false (llama-server's): the request takes none of the
    # cached blocks, and leaves none of its own for the next.
    r = c.completions.create(model=model, prompt=shared + " Question two?", max_tokens=4, temperature=0,
                             extra_body={"cache_prompt": False})
    check(r.usage.prompt_tokens_details.cached_tokens == 0 and r.choices[0].text == second.choices[0].text,
          f"cache_prompt false took cached blocks: {r.usage}")
    fresh = f"Other {os.getpid()}-{time.time_ns()}: " + " ".join(f"point {i} holds." for i in range(8))
    for cache_prompt, expect in ((False, False), (True, False), (True, True)):
        r = c.completions.create(model=model, prompt=fresh + " Go.", max_tokens=2, temperature=0,
                                 extra_body={"cache_prompt": cache_prompt})
        got = r.usage.prompt_tokens_details.cached_tokens
        check((got >= block) == expect,
              f"cache_prompt {cache_prompt}: {got} cached, expected {'its prompt' if expect else 'none of it'}")
    st, _, e = http(srv, "POST", "/v1/completions", {"prompt": "x", "cache_prompt": "no"})
    check(st == 400 and "cache_prompt" in e["error"]["message"], f"cache_prompt not a boolean: {st} {e}")
    print("ok cache_prompt: false takes no cached block and leaves none")


def concurrent(srv, model):
    c = srv.client()
    prompts = [f"Request number {i} says" for i in range(16)]
    alone = [c.completions.create(model=model, prompt=p, max_tokens=10, temperature=0).choices[0].text
             for p in prompts]
    together = [None] * 16

    def one(i):
        together[i] = c.completions.create(model=model, prompt=prompts[i], max_tokens=10,
                                           temperature=0).choices[0].text
    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    check(alone == together, f"greedy alone != among 16: {alone} {together}")
    print("ok greedy text alone == among 16 concurrent")

    results = [None] * 64
    t0 = time.time()

    def stream(i):
        text, finish, n = "", None, 0
        for chunk in c.chat.completions.create(model=model, messages=[{"role": "user", "content": f"Hi {i}"}],
                                               max_tokens=12, temperature=0.7, seed=i, stream=True):
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
                n += 1
        results[i] = (finish, n)
    threads = [threading.Thread(target=stream, args=(i,)) for i in range(64)]
    [t.start() for t in threads]
    [t.join(timeout=120) for t in threads]
    check(all(r and r[0] in ("stop", "length") for r in results), f"64 streams: {results}")
    print(f"ok 64 concurrent streams complete in {time.time() - t0:.1f} s")
    wait_idle(srv, "after 64 streams")


def raw_request(srv, payload, read=True):
    """Sends bytes as they are; the status line and body."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.sendall(payload)
    data = b""
    while read:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    return data


def bad_input(srv, model):
    rows = []
    long_prompt = "x" * 3000  # the byte vocabulary: one token per byte, past -c 512

    def case(name, status, body=None, raw=None, headers=None, path="/v1/completions"):
        st, hdrs, resp = http(srv, "POST", path, body, headers, raw)
        err = resp.get("error") if isinstance(resp, dict) else None
        check(st == status, f"{name}: status {st}, expected {status}: {resp}")
        check(err and err.get("message") and err.get("type") and "code" in err, f"{name}: no error object: {resp}")
        rows.append((name, st, err["code"], err["message"]))

    case("malformed JSON", 400, raw=b'{"prompt": "x", ')
    case("not an object", 400, raw=b'[1, 2]')
    case("wrong type: max_tokens", 400, {"prompt": "x", "max_tokens": "ten"})
    case("wrong type: temperature", 400, {"prompt": "x", "temperature": "hot"})
    case("wrong type: stop", 400, {"prompt": "x", "stop": 3})
    case("wrong type: messages", 400, {"messages": "hi"}, path="/v1/chat/completions")
    case("missing prompt", 400, {"max_tokens": 3})
    case("unknown role", 400, {"messages": [{"role": "wizard", "content": "x"}]}, path="/v1/chat/completions")
    case("malformed tool (no function)", 400,
         {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]},
         path="/v1/chat/completions")
    case("grammar that does not parse", 400, {"prompt": "x", "grammar": "root ::= item\n"})
    case("JSON Schema keyword hetero cannot enforce", 400,
         {"prompt": "x", "json_schema": {"type": "string", "pattern": "^a"}})
    case("grammar and response_format together", 400,
         {"prompt": "x", "grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}})
    case("response_format of an unknown type", 400, {"prompt": "x", "response_format": {"type": "yaml"}})
    case("prompt longer than the context", 400, {"prompt": long_prompt, "max_tokens": 4})
    case("max_tokens = 0", 400, {"prompt": "x", "max_tokens": 0})
    case("max_tokens < 0", 400, {"prompt": "x", "max_tokens": -5})
    case("temperature out of range", 400, {"prompt": "x", "temperature": 7})
    case("presence_penalty out of range", 400, {"prompt": "x", "presence_penalty": 3})
    case("n out of range", 400, {"prompt": "x", "n": 99})
    case("token id out of the vocabulary", 400, {"prompt": [1, 2, 999999], "max_tokens": 2})
    case("invalid UTF-8", 400, raw=b'{"prompt": "\xff\xfe bad", "max_tokens": 2}')
    # An oversized body is refused from its Content-Length, before it is read.
    resp = raw_request(srv, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: 2097152\r\n\r\n{\"prompt\": \"aaaa")
    head, _, body = resp.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/") else 0
    err = json.loads(body)["error"] if body else {}
    check(status == 413 and err.get("message"), f"oversized body: {resp[:200]!r}")
    rows.append(("oversized body (2 MiB, --max-body 1 MiB)", status, err["code"], err["message"]))
    case("unknown route", 404, {"prompt": "x"}, path="/v1/nothing")
    # Headers past 64 KiB: 431 with an error object.  Past the connection's
    # memory (1 MiB) libmicrohttpd answers 431 itself, with its own page,
    # before the server sees the request.
    for size, ours in ((200000, True), (2000000, False)):
        resp = raw_request(srv, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * size + b"\r\n\r\n")
        head, _, body = resp.partition(b"\r\n\r\n")
        status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/") else 0
        check(status == 431, f"oversized header ({size} bytes): {resp[:80]!r}")
        name = f"oversized header ({size // 1000} kB)"
        if ours:
            err = json.loads(body)["error"]
            check(err["code"] == "request_header_fields_too_large" and err["message"], f"{name}: {body[:200]!r}")
            rows.append((name, status, err["code"], err["message"]))
        else:
            check(body.startswith(b"<html>"), f"{name}: {body[:200]!r}")
            rows.append((name + ", past libmicrohttpd's connection memory", status, "(none: libmicrohttpd's HTML page)",
                         re.sub(r"<[^>]+>", " ", body.decode()).strip()))
    st, _, h = http(srv, "GET", "/health")
    check(st == 200, "the server is down after bad input")
    wait_idle(srv, "after bad input")
    print(f"ok bad input: {len(rows)} cases, each its status and an error object; the server up")
    if TABLE:
        print("| case | status | code | message |\n| --- | --- | --- | --- |")
        for r in rows:
            print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} |")


def structured_output(srv, model):
    """response_format json_schema (whole and streamed, several at once),
    json_object, and a GBNF grammar: every answer parses and validates."""
    import jsonschema
    schema = {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 8},
        "kind": {"enum": ["cat", "dog", "fish"]},
        "tags": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
        "owner": {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]}},
        "required": ["name", "kind", "tags", "owner"], "additionalProperties": False}
    c = srv.client()
    fmt = {"type": "json_schema", "json_schema": {"name": "pet", "schema": schema}}
    answers = []

    def one(seed, stream):
        kw = dict(model=model, messages=[{"role": "user", "content": "A pet as JSON."}], max_tokens=200,
                  temperature=1.0, seed=seed, response_format=fmt)
        if stream:
            text = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(stream=True, **kw)
                           if ch.choices)
        else:
            text = c.chat.completions.create(**kw).choices[0].message.content
        answers.append(text)

    threads = [threading.Thread(target=one, args=(s, s % 2)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(len(answers) == 8, f"structured output: {len(answers)} of 8 answers")
    for a in answers:
        try:
            jsonschema.validate(json.loads(a), schema)
        except Exception as e:  # noqa: BLE001 - the message says which
            fail(f"structured output: {a!r} does not validate: {e}")
    r = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "JSON"}], max_tokens=300,
                                  temperature=0, response_format={"type": "json_object", "schema": {
                                      "type": "object", "properties": {"ok": {"type": "boolean"}},
                                      "required": ["ok"]}})
    check(isinstance(json.loads(r.choices[0].message.content)["ok"], bool), f"json_object: {r}")
    r = c.completions.create(model=model, prompt="Answer:", max_tokens=8, temperature=1.0, seed=3,
                             extra_body={"grammar": 'root ::= ("yes" | "no") "."'})
    check(r.choices[0].text in ("yes.", "no.") and r.choices[0].finish_reason == "stop", f"grammar: {r}")
    print(f"ok structured output: 8 json_schema answers (4 streamed, at once) validate, json_object, grammar")


def disconnect_and_slow_reader(srv, model):
    # A client that leaves mid-stream: its request is cancelled, its blocks freed.
    body = json.dumps({"model": model, "prompt": "Once", "max_tokens": 1500, "stream": True,
                       "temperature": 1}).encode()
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(body)).encode() + b"\r\n\r\n" + body)
    got = b""
    while got.count(b"data: ") < 3:
        got += s.recv(4096)
    check(metric(srv, "kv_blocks_used") > 0, "a running stream holds no blocks?")
    s.close()
    wait_idle(srv, "after a client left mid-stream")
    print("ok a client leaving mid-stream: cancelled, KV blocks freed")

    # A client that leaves before a whole (not streamed) answer: the server
    # sees its socket close, cancels the request and frees its blocks.  The
    # client leaves once the request is seen running (not after a time, which
    # a fast machine could outrun).
    cancelled = metric(srv, "requests_cancelled_total")
    whole = json.dumps({"model": model, "prompt": "Once", "max_tokens": 1500, "temperature": 1,
                        "ignore_eos": True}).encode()
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(whole)).encode() + b"\r\n\r\n" + whole)
    for _ in range(200):
        if metric(srv, "kv_blocks_used") > 0:
            break
        time.sleep(0.01)
    s.setblocking(False)
    try:
        early = s.recv(4096)
    except BlockingIOError:
        early = b""
    check(not early, f"the whole answer came back before the client could leave: {early[:80]!r}")
    s.close()
    wait_idle(srv, "after a client left before its whole answer")
    check(metric(srv, "requests_cancelled_total") == cancelled + 1, "the abandoned request was not cancelled")
    print("ok a client leaving before its whole answer: cancelled, KV blocks freed")

    # A slow reader: it reads nothing while another request completes.
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(body)).encode() + b"\r\n\r\n" + body)
    time.sleep(0.3)
    t0 = time.time()
    r = srv.client().completions.create(model=model, prompt="Hello", max_tokens=16, temperature=0)
    check(r.choices[0].finish_reason and time.time() - t0 < 30, "a slow reader stalled another request")
    s.close()
    wait_idle(srv, "after the slow reader left")
    print(f"ok a slow reader does not stall the batch (another request took {time.time() - t0:.2f} s)")


def tenants():
    with tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False) as f:
        f.write("# key name max_concurrent tokens_per_minute queue\nsk-alice alice 1 0 0\nsk-bob bob 4 40 4\n")
        path = f.name
    srv = Server("--api-keys", path, "-c", "1024", "--max-requests", "3")
    try:
        st, _, e = http(srv, "GET", "/v1/models")
        check(st == 401 and e["error"]["code"] == "invalid_api_key", f"no key: {st}")
        st, _, e = http(srv, "GET", "/v1/models", headers={"Authorization": "Bearer wrong"})
        check(st == 401, f"wrong key: {st}")
        st, _, _ = http(srv, "GET", "/health")
        check(st == 200, "/health needs no key")
        alice = srv.client("sk-alice")
        model = alice.models.list().data[0].id
        # alice may have one request in flight: a second at once gets 429 with Retry-After.
        # The stream must still be running then, so it may not stop at an end-of-text token
        # (sampled at random at temperature 1) and is long enough to outlast a fast machine.
        stream = alice.completions.create(model=model, prompt="Once", max_tokens=1000, stream=True, temperature=1,
                                          extra_body={"ignore_eos": True})
        next(iter(stream))
        st, hdrs, e = http(srv, "POST", "/v1/completions", {"prompt": "x", "max_tokens": 2},
                           headers={"Authorization": "Bearer sk-alice"})
        check(st == 429 and hdrs.get("Retry-After") and e["error"]["type"] == "rate_limit_error",
              f"over alice's limit: {st} {e}")
        # bob is not held up by alice's slot.
        bob = srv.client("sk-bob")
        r = bob.completions.create(model=model, prompt="Hi there, bob speaking", max_tokens=30, temperature=0,
                                   extra_body={"ignore_eos": True})
        # bob's 40 tokens a minute: the prompt, then tokens as they come, stopping at 40.
        check(r.choices[0].finish_reason == "length" and r.usage.total_tokens == 40,
              f"bob's answer stops at his 40 tokens a minute: {r.usage} {r.choices[0].finish_reason}")
        stream.close()
        # bob's 40 tokens a minute are spent: 429 with the seconds to wait.
        st, hdrs, e = http(srv, "POST", "/v1/completions", {"prompt": "x", "max_tokens": 2},
                           headers={"Authorization": "Bearer sk-bob"})
        check(st == 429 and int(hdrs.get("Retry-After", "0")) > 1, f"over bob's tokens per minute: {st} {e}")
        print("ok API keys: 401 without or with a wrong key, 429 with Retry-After over a tenant's limits")
    finally:
        srv.stop()
        os.unlink(path)


def too_many_and_drain():
    srv = Server("-c", "256", "--max-requests", "2")
    model = srv.client().models.list().data[0].id
    c = srv.client()
    # The two streams must still run when the third request comes: no end-of-text token (sampled
    # at random at temperature 1) may stop them early on a fast machine.
    streams = [c.completions.create(model=model, prompt="Once", max_tokens=400, stream=True, temperature=1,
                                    extra_body={"ignore_eos": True})
               for _ in range(2)]
    for s in streams:
        next(iter(s))
    st, _, e = http(srv, "POST", "/v1/completions", {"prompt": "x", "max_tokens": 2})
    check(st == 503 and e["error"]["code"] == "server_busy", f"over --max-requests: {st} {e}")
    print("ok too many requests at once: 503 with an error object")
    # SIGTERM while two streams run: both end with [DONE], then the server exits 0.
    srv.p.send_signal(signal.SIGTERM)
    for s in streams:
        finish = None
        for chunk in s:
            finish = chunk.choices[0].finish_reason or finish
        check(finish in ("length", "stop"), "a stream cut by SIGTERM")
    rc = srv.p.wait(timeout=60)
    check(rc == 0, f"exit {rc} after SIGTERM")
    print("ok SIGTERM drains the streams in flight and exits 0")


def serve_bench(srv):
    """bench/serve-bench drives the server: every request completes, with its asked length."""
    with tempfile.TemporaryDirectory() as d:
        rc = subprocess.run([sys.executable, "bench/serve-bench", "--base-url", srv.url, "--num-prompts", "6",
                             "--max-concurrency", "3", "--input-len", "8", "--output-len", "5", "--quiet",
                             "--json", f"{d}/r.json", "--svg", f"{d}/r.svg"], timeout=120).returncode
        check(rc == 0, f"serve-bench exited {rc}")
        r = json.load(open(f"{d}/r.json"))
        check(r["completed"] == 6 and r["total_output_tokens"] == 30 and r["ttft_ms"]["p99"] > 0,
              f"serve-bench: {r}")
        check("<svg" in open(f"{d}/r.svg").read(), "serve-bench drew no SVG")
    print("ok serve-bench: 6 requests of 5 tokens (ignore_eos), JSON and SVG")
    with tempfile.TemporaryDirectory() as d:
        rc = subprocess.run([sys.executable, "bench/serve-bench", "--base-url", srv.url, "--num-prompts", "4",
                             "--max-concurrency", "1", "--shared-prefix-tokens", "64", "--input-len", "8",
                             "--output-len", "3", "--extra-body", '{"user": "bench"}', "--quiet",
                             "--json", f"{d}/r.json"], timeout=120).returncode
        check(rc == 0, f"serve-bench --shared-prefix-tokens exited {rc}")
        r = json.load(open(f"{d}/r.json"))
        # One after another: the last three find the first's blocks.
        check(r["completed"] == 4 and r["total_cached_input_tokens"] >= 3 * 48, f"serve-bench shared prefix: {r}")
    print(f"ok serve-bench --shared-prefix-tokens 64: {r['total_cached_input_tokens']} prompt tokens cached")


def main():
    t0 = time.time()
    srv = Server("-c", "512", "--kv-tokens", "8192", "--max-requests", "80", "-np", "16")
    try:
        model = endpoints(srv)
        prefix_cache(srv, model)
        concurrent(srv, model)
        bad_input(srv, model)
        structured_output(srv, model)
        disconnect_and_slow_reader(srv, model)
        serve_bench(srv)
    finally:
        srv.stop()
    tenants()
    too_many_and_drain()
    print(f"server_check: all passed in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""hetero-server where llama.cpp's own server tests (tools/server/tests)
found it answering otherwise than llama-server; each check is one such
behaviour, on 127.0.0.1 and free ports:
  - a streamed chat's first chunk: the role with content null;
  - an assistant prefill given as content parts is continued as its text
    parts joined with "\\n\\n"; two assistant messages at the end are a 400;
  - --host with a comma list listens on each address;
  - a batch of prompts in one /completion (a list of answers) or
    /v1/completions (one answer, the prompts' choices in order).
Prints one line per check; exits 1 at the first failure.

    server_parity_check.py BUILD_DIR      (HX_TEST_SMOLLM2: SmolLM2-135M-Instruct, else the embedded model)
"""
import http.client
import json
import os
import socket
import sys
import tempfile

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
        print("ok a streamed chat's first chunk: {role: assistant, content: null}, as llama-server's")

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


def main():
    batch()
    chat_stream_and_prefill()
    several_hosts()
    print("server_parity: all checks passed")


if __name__ == "__main__":
    main()

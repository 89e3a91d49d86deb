#!/usr/bin/env python3
"""hetero-server's other APIs over its chat, on 127.0.0.1 and free ports:

- Anthropic's Messages (/v1/messages, /v1/messages/count_tokens): a
  greedy answer equal to the same conversation's /v1/chat/completions
  answer, whole and streamed (the event sequence, each event named as its
  type, the deltas adding up to the whole text), usage against the chat's,
  stop_sequences (stop_reason and the sequence), max_tokens; tools with a
  forced call (tool_use, its input; streamed as input_json_delta), a
  tool_result conversation counted as its OpenAI form is; output_config's
  JSON schema; the official anthropic client, whole and streamed; bad
  input (no messages, an image, fields for what it does not do, a bad
  thinking or output_config) a 400 naming it, the server still answering.
- OpenAI's Responses (/v1/responses, /v1/responses/input_tokens): the same
  greedy equality, status incomplete at max_output_tokens, the stream's
  numbered events and the text they add up to, a forced function call and
  a function_call_output conversation counted as its chat form,
  text.format's JSON schema, return_progress and timings_per_token,
  previous_response_id and non-function tools refused; the openai client.
- mutated bodies for each route (a 200 or a 4xx, never a 5xx); a stream
  cut by the drain ending with its API's error event.
- Vertex AI's /predict (AIP_MODE=PREDICTION): instances to several routes
  answered in order, a bad @requestFormat an error in its place, the
  health route, the port from AIP_HTTP_PORT, and the API key asked for.

Prints one line per check; exits 1 at the first failure.

    server_compat_check.py BUILD_DIR   (HX_TEST_SMOLLM2: SmolLM2-135M-Instruct; else the embedded model)
"""
import http.client
import json
import os
import random
import signal
import socket
import sys
import tempfile
import time

try:
    import anthropic
    import jsonschema
    import openai
except ImportError as e:
    print(f"server_compat_check: {e.name} is missing (pip install -r tests/requirements.txt)")
    sys.exit(3)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_native_check as nc  # noqa: E402 - the Server class
from server_tools_check import HERMES  # noqa: E402 - Qwen 2.5's tool template

BUILD = nc.BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
SMOLLM2 = nc.SMOLLM2
KEY = "sk-compat-test"


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok:", msg)


class Server(nc.Server):
    def post(self, path, body, headers=None):
        """(status, parsed body) of a POST."""
        st, _, out = self.req("POST", path, body, headers)
        return st, out

    def events(self, path, body):
        """A stream's events: (the event: name or None, the data)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        check(r.status == 200, f"POST {path} streamed: 200 ({r.status})")
        out, name = [], None
        for raw in r.read().decode().split("\n"):
            if raw.startswith("event: "):
                name = raw[7:]
            elif raw.startswith("data: ") and raw != "data: [DONE]":
                out.append((name, json.loads(raw[6:])))
                name = None
        c.close()
        return out


CONV = [{"role": "user", "content": "Name three colors."}]
SYSTEM = "You answer briefly."
TOOL = {"name": "get_weather", "description": "Get the weather in a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
                         "required": ["city"]}}
FN = {"type": "function", "function": {"name": TOOL["name"], "description": TOOL["description"],
                                       "parameters": TOOL["input_schema"]}}
SCHEMA = {"type": "object", "properties": {"color": {"type": "string", "enum": ["red", "green", "blue"]},
                                           "count": {"type": "integer"}}, "required": ["color", "count"]}


def chat_greedy(srv, n):
    st, out = srv.post("/v1/chat/completions", {"messages": [{"role": "system", "content": SYSTEM}, *CONV],
                                               "max_tokens": n, "temperature": 0})
    check(st == 200, "the chat's greedy answer")
    return out


def anthropic_api(srv):
    chat = chat_greedy(srv, 12)
    text = chat["choices"][0]["message"]["content"]
    body = {"model": "m", "max_tokens": 12, "temperature": 0, "system": SYSTEM, "messages": CONV}
    st, m = srv.post("/v1/messages", body)
    check(st == 200 and m["type"] == "message" and m["role"] == "assistant" and m["id"].startswith("msg_"),
          f"/v1/messages answers a message ({st})")
    check(m["content"] == [{"type": "text", "text": text}], f"its text is the chat's greedy text: {text!r}")
    u, cu = m["usage"], chat["usage"]
    check(u["input_tokens"] + u["cache_read_input_tokens"] == cu["prompt_tokens"] and
          u["output_tokens"] == cu["completion_tokens"], f"usage as the chat's: {u} / {cu}")
    check(m["stop_reason"] == ("max_tokens" if chat["choices"][0]["finish_reason"] == "length" else "end_turn"),
          f"stop_reason {m['stop_reason']} for the chat's {chat['choices'][0]['finish_reason']}")
    # streamed: Anthropic's events, each named as its type
    ev = srv.events("/v1/messages", {**body, "stream": True})
    types = [d["type"] for _, d in ev]
    check(all(n == d["type"] for n, d in ev), "each event's name is its type")
    check(types[0] == "message_start" and types[1] == "content_block_start" and types[-3:] ==
          ["content_block_stop", "message_delta", "message_stop"] and
          set(types[2:-3]) == {"content_block_delta"}, f"the event sequence: {types[:3]} ... {types[-3:]}")
    check(ev[0][1]["message"]["usage"]["input_tokens"] == cu["prompt_tokens"], "message_start counts the prompt")
    streamed = "".join(d["delta"]["text"] for _, d in ev if d["type"] == "content_block_delta")
    check(streamed == text, "the text deltas add up to the whole answer")
    check(ev[-2][1]["delta"]["stop_reason"] == m["stop_reason"] and
          ev[-2][1]["usage"]["output_tokens"] == u["output_tokens"], "message_delta: stop_reason and output_tokens")
    # a stop sequence met: its reason and which one
    words = text.split()
    if len(words) >= 3:
        stop = " " + words[2]
        st, ms = srv.post("/v1/messages", {**body, "stop_sequences": ["zzzz", stop]})
        check(st == 200 and ms["stop_reason"] == "stop_sequence" and ms["stop_sequence"] == stop and
              ms["content"][0]["text"] == text[:text.index(stop)], f"stop_sequences: stopped at {stop!r}")
    # thinking's switch reaches the template (these templates have none: the same answer)
    st, mt = srv.post("/v1/messages", {**body, "thinking": {"type": "adaptive"}})
    check(st == 200 and mt["content"] == m["content"], f"thinking adaptive: the template's switch ({st})")
    st, mt = srv.post("/v1/messages", {**body, "thinking": {"type": "enabled", "budget_tokens": 5}})
    check(st == 200 and mt["content"] == m["content"],
          f"thinking enabled with budget_tokens 5: the reasoning budget (no thought opened here: the same answer; {st})")
    # count_tokens: the prompt's tokens, as the chat counts them
    st, ct = srv.post("/v1/messages/count_tokens", {"model": "m", "system": SYSTEM, "messages": CONV})
    check(st == 200 and ct == {"input_tokens": cu["prompt_tokens"]}, f"count_tokens: {ct}")
    # a forced tool call: a tool_use block and its input
    tb = {"model": "m", "max_tokens": 400, "temperature": 0, "tools": [TOOL], "tool_choice": {"type": "any"},
          "messages": [{"role": "user", "content": "Weather in Paris?"}]}
    st, mt = srv.post("/v1/messages", tb)
    uses = [b for b in mt.get("content", []) if b["type"] == "tool_use"] if st == 200 else []
    check(st == 200 and uses and uses[0]["name"] == "get_weather" and isinstance(uses[0]["input"], dict) and
          mt["stop_reason"] == "tool_use", f"tool_choice any: a tool_use ({st}, {str(mt)[:160]})")
    ev = srv.events("/v1/messages", {**tb, "stream": True})
    starts = [d for _, d in ev if d["type"] == "content_block_start"]
    tool_start = [d for d in starts if d["content_block"]["type"] == "tool_use"]
    args = "".join(d["delta"]["partial_json"] for _, d in ev
                   if d["type"] == "content_block_delta" and d["delta"]["type"] == "input_json_delta")
    check(tool_start and json.loads(args) == uses[0]["input"] and
          [d["index"] for d in starts] == list(range(len(starts))),
          f"streamed: a tool_use block whose input_json_delta adds up to {uses[0]['input']}")
    # a tool_result conversation: counted as its OpenAI form
    conv = [{"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "get_weather",
                                               "input": {"city": "Paris"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1",
                                          "content": [{"type": "text", "text": "Sunny, 25 C"}]}]}]
    oai = [{"role": "user", "content": "Weather in Paris?"},
           {"role": "assistant", "content": "", "tool_calls": [
               {"id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"}, separators=(",", ":"))}}]},
           {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 25 C"}]
    st, a = srv.post("/v1/messages/count_tokens", {"model": "m", "tools": [TOOL], "messages": conv})
    st2, o = srv.post("/chat/completions/input_tokens", {"tools": [FN], "messages": oai})
    check(st == 200 and st2 == 200 and a == o, f"a tool_result conversation counts as its OpenAI form: {a} / {o}")
    # output_config: the answer follows the schema
    st, mj = srv.post("/v1/messages", {**body, "max_tokens": 200, "output_config": {
        "format": {"type": "json_schema", "schema": SCHEMA}}})
    check(st == 200, f"output_config json_schema ({st})")
    jsonschema.validate(json.loads(mj["content"][0]["text"]), SCHEMA)
    check(True, "its answer validates against the schema")
    # the official client, whole and streamed
    client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{srv.port}", api_key="none", max_retries=0)
    cm = client.messages.create(model="m", max_tokens=12, system=SYSTEM, messages=CONV,
                                extra_body={"temperature": 0})
    check(cm.content[0].text == text, "the anthropic client reads the message")
    with client.messages.stream(model="m", max_tokens=12, system=SYSTEM, messages=CONV,
                                extra_body={"temperature": 0}) as s:
        check("".join(s.text_stream) == text and s.get_final_message().stop_reason == m["stop_reason"],
              "the anthropic client reads the stream")
    # bad input: a 400 that says why; the server still answers
    for name, b, word in [("no messages", {"max_tokens": 8}, "messages"),
                          ("an image", {"max_tokens": 8, "messages": [{"role": "user", "content": [
                              {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                           "data": "AAAA"}}]}]}, "image input is not supported"),
                          ("container", {**body, "container": "c1"}, "container"),
                          ("mcp_servers", {**body, "mcp_servers": [{"url": "x"}]}, "mcp_servers"),
                          ("logprobs", {**body, "logprobs": True}, "logprobs"),
                          ("thinking type", {**body, "thinking": {"type": "sometimes"}}, "thinking.type"),
                          ("thinking budget", {**body, "thinking": {"type": "enabled", "budget_tokens": 99}},
                           "budget_tokens"),
                          ("output_config.effort", {**body, "output_config": {"effort": "high"}}, "effort"),
                          ("a server tool", {**body, "tools": [{"type": "web_search_20250305", "name": "w"}]},
                           "server tools"),
                          ("tool_choice", {**body, "tool_choice": {"type": "sometimes"}}, "tool_choice"),
                          ("broken JSON", None, "JSON")]:
        if b is None:
            c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
            c.request("POST", "/v1/messages", "{\"messages\": [", {"Content-Type": "application/json"})
            r = c.getresponse()
            st, e = r.status, json.loads(r.read().decode())
            c.close()
        else:
            st, e = srv.post("/v1/messages", b)
        check(st == 400 and word in e["error"]["message"], f"{name}: 400 naming it ({st}: {str(e)[:120]})")
    st, again = srv.post("/v1/messages", body)
    check(st == 200 and again["content"][0]["text"] == text, "the server answers as before after the bad input")


def responses_api(srv):
    chat = chat_greedy(srv, 12)
    text = chat["choices"][0]["message"]["content"]
    body = {"model": "m", "max_output_tokens": 12, "temperature": 0, "instructions": SYSTEM,
            "input": CONV[0]["content"]}
    st, r = srv.post("/v1/responses", body)
    check(st == 200 and r["object"] == "response" and r["id"].startswith("resp_") and
          r["output"][0]["id"].startswith("msg_"), f"/v1/responses answers a response ({st})")
    check(r["output"][0]["content"][0]["text"] == text, f"its text is the chat's greedy text: {text!r}")
    length = chat["choices"][0]["finish_reason"] == "length"
    check(r["status"] == ("incomplete" if length else "completed") and
          (r["incomplete_details"] == {"reason": "max_output_tokens"}) == length, f"status {r['status']}")
    check(r["usage"]["input_tokens"] == chat["usage"]["prompt_tokens"] and
          r["usage"]["output_tokens"] == chat["usage"]["completion_tokens"], "usage as the chat's")
    st, it = srv.post("/v1/responses/input_tokens", {"instructions": SYSTEM, "input": CONV[0]["content"]})
    check(st == 200 and it == {"input_tokens": chat["usage"]["prompt_tokens"]}, f"input_tokens: {it}")
    ev = srv.events("/v1/responses", {**body, "stream": True})
    types = [d["type"] for _, d in ev]
    check(all(n == d["type"] for n, d in ev) and [d["sequence_number"] for _, d in ev] == list(range(len(ev))),
          "each event named as its type and numbered from 0")
    check(types[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                        "response.content_part.added"] and
          types[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                         "response.completed"], f"the event sequence: {types[:4]} ... {types[-4:]}")
    deltas = "".join(d["delta"] for _, d in ev if d["type"] == "response.output_text.delta")
    done = ev[-1][1]["response"]
    check(deltas == text and done["output"][0]["content"][0]["text"] == text and done["status"] == r["status"],
          "the deltas add up to the completed response's text")
    # return_progress and timings_per_token, as llama-server sends them
    ev = srv.events("/v1/responses", {**body, "stream": True, "return_progress": True, "timings_per_token": True})
    prog = [d for _, d in ev if "prompt_progress" in d]
    check(prog and all(d["type"] == "response.in_progress" and d["prompt_progress"]["total"] > 0 for d in prog) and
          prog[-1]["prompt_progress"]["processed"] == prog[-1]["prompt_progress"]["total"],
          f"return_progress: {len(prog)} response.in_progress events with prompt_progress")
    check(all("timings" in d for _, d in ev if d["type"] == "response.output_text.delta") and
          "timings" in ev[-1][1], "timings_per_token: timings on the deltas and the completed event")
    # a forced function call, and a conversation with its output
    fb = {"model": "m", "max_output_tokens": 400, "temperature": 0, "input": "Weather in Paris?",
          "tools": [{"type": "function", "name": "get_weather", "parameters": TOOL["input_schema"]}],
          "tool_choice": "required"}
    st, rf = srv.post("/v1/responses", fb)
    calls = [o for o in rf.get("output", []) if o["type"] == "function_call"] if st == 200 else []
    check(calls and calls[0]["name"] == "get_weather" and isinstance(json.loads(calls[0]["arguments"]), dict),
          f"tool_choice required: a function_call item ({st})")
    ev = srv.events("/v1/responses", {**fb, "stream": True})
    args = "".join(d["delta"] for _, d in ev if d["type"] == "response.function_call_arguments.delta")
    check(args == calls[0]["arguments"] and ev[-1][1]["response"]["output"][-1]["arguments"] == args,
          "streamed: the arguments' deltas add up to the whole call's")
    conv = [{"role": "user", "content": "Weather in Paris?"},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "Sunny, 25 C"}]
    oai = [{"role": "user", "content": "Weather in Paris?"},
           {"role": "assistant", "content": "", "tool_calls": [
               {"id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
           {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 25 C"}]
    st, a = srv.post("/v1/responses/input_tokens", {"input": conv, "tools": fb["tools"]})
    st2, o = srv.post("/chat/completions/input_tokens", {"tools": [{**FN, "function": {
        "name": "get_weather", "parameters": TOOL["input_schema"]}}], "messages": oai})
    check(st == 200 and a == o, f"a function_call_output conversation counts as its chat form: {a} / {o}")
    st, rj = srv.post("/v1/responses", {**body, "max_output_tokens": 200, "text": {"format": {
        "type": "json_schema", "name": "c", "schema": SCHEMA}}})
    check(st == 200, f"text.format json_schema ({st})")
    jsonschema.validate(json.loads(rj["output"][0]["content"][0]["text"]), SCHEMA)
    check(True, "its answer validates against the schema")
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key="none", max_retries=0)
    cr = client.responses.create(model="m", input=CONV[0]["content"], instructions=SYSTEM, max_output_tokens=12,
                                 temperature=0)
    check(cr.output_text == text, "the openai client reads the response")
    got = "".join(e.delta for e in client.responses.create(model="m", input=CONV[0]["content"], instructions=SYSTEM,
                                                           max_output_tokens=12, temperature=0, stream=True)
                  if e.type == "response.output_text.delta")
    check(got == text, "the openai client reads the stream")
    for name, b, word in [("previous_response_id", {**body, "previous_response_id": "resp_x"}, "previous_response_id"),
                          ("a web search tool", {**body, "tools": [{"type": "web_search"}]}, "function tools only"),
                          ("no input", {"model": "m"}, "input"),
                          ("an image", {**body, "input": [{"role": "user", "content": [
                              {"type": "input_image", "image_url": "data:,"}]}]}, "input_image"),
                          ("background", {**body, "background": True}, "background"),
                          ("n_probs", {**body, "n_probs": 3}, "n_probs")]:
        st, e = srv.post("/v1/responses", b)
        check(st == 400 and word in e["error"]["message"], f"{name}: 400 naming it ({st}: {str(e)[:120]})")


def mutate(rng, v, depth=0):
    """v with one part replaced by a value of another shape."""
    odd = [None, True, 0, -1, 2 ** 40, 1.5, "", "x" * 300, "\u00e9\ud83d\ude00", [], {}, [1, "a"], {"type": "text"},
           [{"type": "tool_use"}], [{"type": "tool_result", "content": [{"type": "image"}]}]]
    if depth > 4 or not isinstance(v, (dict, list)) or not v or rng.random() < 0.25:
        return rng.choice(odd)
    v = json.loads(json.dumps(v))
    if isinstance(v, dict):
        k = rng.choice(list(v))
        if rng.random() < 0.15:
            del v[k]
        else:
            v[k] = mutate(rng, v[k], depth + 1)
    else:
        i = rng.randrange(len(v))
        v[i] = mutate(rng, v[i], depth + 1)
    return v


def fuzz(srv):
    """Mutated bodies for each API: an answer (200 or a 4xx), never a
    5xx or a dropped connection; the server answers as before after."""
    rng = random.Random(1234)
    seeds = {
        "/v1/messages": {"max_tokens": 2, "system": [{"type": "text", "text": "s"}], "tools": [TOOL],
                         "tool_choice": {"type": "auto"}, "stop_sequences": ["x"],
                         "thinking": {"type": "enabled", "budget_tokens": 1},
                         "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                                      {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "n",
                                                                         "input": {}}]},
                                      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a",
                                                                    "content": "r"}]}]},
        "/v1/responses": {"max_output_tokens": 2, "instructions": "s", "tools": [
            {"type": "function", "name": "n", "parameters": {"type": "object"}}], "tool_choice": "auto",
            "text": {"format": {"type": "json_object"}},
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                      {"type": "function_call", "call_id": "a", "name": "n", "arguments": "{}"},
                      {"type": "function_call_output", "call_id": "a", "output": "r"},
                      {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "t"}]}]},
    }
    seeds["/v1/messages/count_tokens"] = seeds["/v1/messages"]
    seeds["/v1/responses/input_tokens"] = seeds["/v1/responses"]
    n = 0
    for path, seed in seeds.items():
        for _ in range(60):
            body = mutate(rng, seed)
            if isinstance(body, dict) and rng.random() < 0.3:
                body["stream"] = True
            st, out = srv.post(path, body)
            if st >= 500 or st < 200:
                fail(f"fuzz {path}: {st} for {json.dumps(body)[:300]}: {str(out)[:200]}")
            n += 1
    check(True, f"{n} mutated bodies: each a 200 or a 4xx")


def cut_streams():
    """A stream the drain cuts (SIGTERM, --drain-timeout 0) ends with the
    API's own error event: Anthropic's {"type": "error", "error": {...}},
    the Responses API's numbered "error" event; the server exits 0."""
    for path, body, check_error in (
            ("/v1/messages", {"max_tokens": 4000, "messages": CONV, "stream": True, "ignore_eos": True,
                              "temperature": 1},
             lambda n, d: n == "error" and d["type"] == "error" and d["error"]["type"] == "api_error" and
             "drain" in d["error"]["message"]),
            ("/v1/responses", {"max_output_tokens": 4000, "input": "Hi", "stream": True, "ignore_eos": True,
                               "temperature": 1},
             lambda n, d: n == "error" and d["type"] == "error" and "drain" in d["message"] and
             isinstance(d["sequence_number"], int))):
        srv = Server("-c", "8192", "--drain-timeout", "0")
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        first = r.read(6)
        srv.p.send_signal(signal.SIGTERM)
        try:
            rest = r.read()
        except http.client.IncompleteRead as e:
            # the process may close the socket before the chunked body's
            # last (empty) chunk: what came before it is what is judged
            rest = e.partial
        events, name = [], None
        for raw in (first + rest).decode().split("\n"):
            if raw.startswith("event: "):
                name = raw[7:]
            elif raw.startswith("data: "):
                events.append((name, json.loads(raw[6:])))
        c.close()
        rc = srv.p.wait(timeout=60)
        check(rc == 0 and events and check_error(*events[-1]) and not any(n == "error" for n, _ in events[:-1]),
              f"{path}: a stream cut by the drain ends with its API's error event ({events[-1] if events else None})")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def predict():
    port = free_port()
    srv = Server("--api-key", KEY, env={"AIP_MODE": "PREDICTION", "AIP_HTTP_PORT": str(port),
                                        "AIP_HEALTH_ROUTE": "healthz"})
    try:
        check(srv.port == port, f"the port is AIP_HTTP_PORT's ({srv.port})")
        auth = {"Authorization": f"Bearer {KEY}"}
        st, _ = srv.post("/predict", {"instances": []})
        check(st == 401, f"/predict asks for the key ({st})")
        st, out = srv.post("/predict", {"instances": [
            {"@requestFormat": "chatCompletions", "max_tokens": 4, "messages": CONV},
            {"@requestFormat": "/tokenize", "content": "Hello"},
            {"@requestFormat": "noSuchRoute"},
            {"max_tokens": 4}]}, headers=auth)
        p = out["predictions"] if st == 200 else []
        check(len(p) == 4 and p[0]["choices"][0]["message"]["role"] == "assistant" and p[1]["tokens"] and
              "noSuchRoute" in p[2]["error"]["message"] and "@requestFormat" in p[3]["error"]["message"],
              f"predictions in order, errors in their places ({st})")
        st, _, h = srv.req("GET", "/healthz")
        check(st == 200 and h == {"status": "ok"}, "AIP_HEALTH_ROUTE answers as /health")
    finally:
        srv.stop()


# Without SmolLM2, the embedded model gets server_tools_check's Hermes
# template, which offers tools and writes calls as Qwen 2.5 does.


def main():
    t0 = time.time()
    template = []
    if not (SMOLLM2 and os.path.exists(SMOLLM2)):
        d = tempfile.mkdtemp()
        open(f"{d}/hermes.jinja", "w").write(HERMES)
        template = ["--chat-template-file", f"{d}/hermes.jinja"]
    srv = Server("-c", "2048", "-np", "2", "--seed", "7", *template)
    try:
        anthropic_api(srv)
        responses_api(srv)
        fuzz(srv)
        st, again = srv.post("/v1/messages", {"max_tokens": 4, "messages": CONV})
        check(st == 200 and again["content"], "the server answers after the fuzzing")
    finally:
        srv.stop()
    predict()
    cut_streams()
    print(f"server_compat_check: all passed in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""hetero-server's function calling through the official openai client:
malformed tools, tool choices and tool messages refused with a 400 naming
the field; tool_choice "required" and a named function forced by the
grammar (generic and Hermes formats, whole and streamed: the arguments
validate against the function's schema, the call text never comes as
content); an answer in a call's shape read as a call under "auto" and left
as text under "none"; and, when HX_TEST_SMOLLM2 names its GGUF file, a
round trip on a real model: the forced call, the tool's result sent back
with role "tool", the final answer.  Prints one line per check; exits 1 at
the first failure (3 when the openai package is missing).

    server_tools_check.py BUILD_DIR [--tool-use-model FILE]   (FILE: a model whose template has a tool_use variant)
"""
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_check as sc  # noqa: E402 - the Server class, http() and check()

try:
    import jsonschema
except ImportError:
    print("server_tools_check: the jsonschema package is missing (pip install -r tests/requirements.txt)")
    sys.exit(3)

check, http = sc.check, sc.http

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                            "unit": {"enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "The time now",
                                           "parameters": {"type": "object", "properties": {}}}}]
USER = [{"role": "user", "content": "What is the weather in Paris?"}]
# The xml format writes a string as text: a grammar holds it to a length, not to a pattern.
PATTERNED = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "pattern": "^[A-Z]"}}}}}]
DAYS_TOOL = {"type": "function", "function": {"name": "forecast", "parameters": {
    "type": "object", "properties": {"days": {"type": "integer"}}}}}
# Qwen3-Coder's way of writing calls (xml), its arguments as parameters.
XML = ("{% if tools %}<|im_start|>system\nYou may call:{% for t in tools %}\n{{ t | tojson }}{% endfor %}\n"
       "Call as <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>"
       "<|im_end|>\n{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
       "{% for c in m.tool_calls %}<tool_call>\n<function={{ c.function.name }}>\n"
       "{% for k, v in c.function.arguments.items() %}<parameter={{ k }}>\n{{ v }}\n</parameter>\n{% endfor %}"
       "</function>\n</tool_call>{% endfor %}<|im_end|>\n{% endfor %}"
       "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

# ChatML that offers tools, written as generic templates do (no <tool_call>).
CHATML_TOOLS = ("{% if tools %}<|im_start|>system\nTools: {{ tools | tojson }}<|im_end|>\n{% endif %}"
                "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                "{% if m.tool_calls %}{{ m.tool_calls | tojson }}{% endif %}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# Qwen 2.5's way of writing calls (Hermes).
HERMES = ("{% if tools %}<|im_start|>system\n<tools>{% for t in tools %}\n{{ t | tojson }}{% endfor %}\n</tools>\n"
          "Return calls in <tool_call></tool_call> tags.<|im_end|>\n{% endif %}"
          "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}{% for c in m.tool_calls %}"
          "<tool_call>\n{\"name\": \"{{ c.function.name }}\", \"arguments\": {{ c.function.arguments | tojson }}}\n"
          "</tool_call>{% endfor %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
          "{% endif %}")


# GLM 4.5-4.7's: the name after <tool_call>, each argument in <arg_key> and <arg_value>.
GLM = ("{% if tools %}<|im_start|>system\nYou may call:{% for t in tools %}\n{{ t | tojson }}{% endfor %}\n"
       "Call as <tool_call>NAME\n<arg_key>KEY</arg_key>\n<arg_value>VALUE</arg_value>\n</tool_call><|im_end|>\n"
       "{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
       "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def bad_requests(srv):
    rows = []

    def case(name, body, want):
        body = dict({"messages": USER, "max_tokens": 4}, **body)
        st, _, resp = http(srv, "POST", "/v1/chat/completions", body)
        err = resp.get("error") if isinstance(resp, dict) else None
        check(st == 400 and err and want in err.get("message", ""),
              f"{name}: status {st}, expected 400 naming '{want}': {resp}")
        rows.append(name)

    fn = TOOLS[0]["function"]
    case("tools not an array", {"tools": {"type": "function"}}, "'tools' must be an array")
    case("tool of another type", {"tools": [{"type": "retrieval", "function": fn}]}, "tools[0].type")
    case("unknown field of a tool", {"tools": [{"type": "function", "function": fn, "x": 1}]}, "tools[0].x")
    case("unknown field of a function", {"tools": [{"type": "function", "function": dict(fn, examples=[])}]},
         "tools[0].function.examples")
    case("function without a name", {"tools": [{"type": "function", "function": {"parameters": WEATHER}}]},
         "tools[0].function.name")
    case("function name with a space", {"tools": [{"type": "function", "function": {"name": "get weather"}}]},
         "tools[0].function.name")
    case("two functions of one name", {"tools": [TOOLS[0], TOOLS[0]]}, "tools[1].function.name")
    case("parameters not an object", {"tools": [{"type": "function", "function": dict(fn, parameters=[1])}]},
         "tools[0].function.parameters")
    case("tool_choice of an unknown kind", {"tools": TOOLS, "tool_choice": "always"}, "'tool_choice' is 'always'")
    case("tool_choice naming no tool", {"tools": TOOLS, "tool_choice": {"type": "function",
                                                                       "function": {"name": "nope"}}}, "'nope'")
    case("tool_choice required without tools", {"tool_choice": "required"}, "needs 'tools'")
    case("parallel_tool_calls not a boolean", {"tools": TOOLS, "parallel_tool_calls": "yes"}, "parallel_tool_calls")
    case("tool message without tool_call_id", {"messages": USER + [{"role": "tool", "content": "sunny"}]},
         "messages[1].tool_call_id")
    case("tool_calls on a user message", {"messages": [dict(USER[0], tool_calls=[])]}, "messages[0].tool_calls")
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": "}}
    case("arguments that are not JSON", {"messages": USER + [{"role": "assistant", "content": None,
                                                               "tool_calls": [call]}]},
         "messages[1].tool_calls[0].function.arguments")
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}, "x": 1}
    case("unknown field of a tool call", {"messages": USER + [{"role": "assistant", "tool_calls": [call]}]},
         "messages[1].tool_calls[0].x")
    case("unknown field of a message", {"messages": [dict(USER[0], mood="happy")]}, "messages[0].mood")
    case("a forced call and a grammar", {"tools": TOOLS, "tool_choice": "required", "grammar": "root ::= \"a\""},
         "cannot be combined")
    case("a schema the grammar cannot enforce", {"tools": [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}}}}],
        "tool_choice": "required"}, "minimum")
    sc.wait_idle(srv, "after bad tool requests")
    print(f"ok tools: {len(rows)} malformed requests, each a 400 naming its field")


def validate_call(tc, where, schema=WEATHER):
    check(tc.type == "function" and tc.id and tc.function.name in ("get_weather", "get_time"), f"{where}: {tc}")
    args = json.loads(tc.function.arguments)
    if tc.function.name == "get_weather":
        jsonschema.validate(args, schema)
    return args


def streamed(c, **kw):
    """(content, {index: [id, name, arguments]}, finish_reason) of a streamed answer."""
    content, calls, finish = "", {}, None
    for ch in c.chat.completions.create(stream=True, **kw):
        if not ch.choices:
            continue
        d = ch.choices[0].delta
        content += d.content or ""
        for t in d.tool_calls or []:
            if t.index not in calls:
                check(t.id and t.function.name, f"the first delta of call {t.index} has no id or name: {t}")
                calls[t.index] = [t.id, t.function.name, ""]
            calls[t.index][2] += t.function.arguments or ""
        finish = ch.choices[0].finish_reason or finish
    return content, calls, finish


def forced(srv, model, fmt, tools=TOOLS, schema=WEATHER):
    c = srv.client()
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        for seed in range(3):
            kw = dict(model=model, messages=USER, tools=tools, tool_choice=choice, temperature=1.0, seed=seed,
                      max_tokens=400)
            r = c.chat.completions.create(**kw)
            m = r.choices[0].message
            check(r.choices[0].finish_reason == "tool_calls" and m.tool_calls and len(m.tool_calls) == 1,
                  f"{fmt} {choice}: no call: {r}")
            check(m.content is None, f"{fmt}: the call came as content too: {m.content!r}")
            validate_call(m.tool_calls[0], f"{fmt} {choice}", schema)
            if isinstance(choice, dict):
                check(m.tool_calls[0].function.name == "get_weather", f"{fmt}: the named function was not called")
            content, calls, finish = streamed(c, **kw)
            check(finish == "tool_calls" and len(calls) == 1 and content == "",
                  f"{fmt} streamed: content {content!r}, calls {calls}, finish {finish}")
            (cid, name, args), = calls.values()
            # The same seed gives the same call, whole or streamed.
            check(name == m.tool_calls[0].function.name and args == m.tool_calls[0].function.arguments,
                  f"{fmt}: streamed {name} {args} but whole {m.tool_calls[0].function}")
    print(f"ok tools ({fmt}): tool_choice required and a named function give one call whose arguments validate, "
          f"whole and streamed alike")


def xml(srv, model):
    """Qwen3-Coder's format: a forced call through its hand-written
    grammar (the city's maxLength held), a call the model writes under
    auto read with its values typed by the schema, a keyword a text value
    cannot be held to a 400."""
    forced(srv, model, "xml")
    c = srv.client()
    text = ("I will look it up.\n<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n"
            "<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>")
    r = c.chat.completions.create(model=model, messages=USER, tools=TOOLS + [DAYS_TOOL], max_tokens=200,
                                  extra_body={"grammar": "root ::= " + json.dumps(text)})
    m = r.choices[0].message
    check(m.content == "I will look it up." and len(m.tool_calls) == 1 and
          json.loads(m.tool_calls[0].function.arguments) == {"city": "42", "unit": "celsius"} and
          r.choices[0].finish_reason == "tool_calls",
          f"xml under auto: the call read, '42' a string as its schema says: {m}")
    content, calls, finish = streamed(c, model=model, messages=USER, tools=TOOLS, max_tokens=200,
                                      extra_body={"grammar": "root ::= " + json.dumps(text)})
    check(content == "I will look it up." and [v[1:] for v in calls.values()] ==
          [["get_weather", '{"city": "42", "unit": "celsius"}']] and finish == "tool_calls",
          f"xml streamed: the same call, its arguments adding up ({calls})")
    st, _, e = http(srv, "POST", "/v1/chat/completions", {"messages": USER, "tools": PATTERNED,
                                                         "tool_choice": "required"})
    check(st == 400 and "pattern" in e["error"]["message"],
          f"xml: a pattern on a text value cannot be forced: 400 naming it ({st})")
    print("ok tools (xml): forced calls validate, a written call is read with typed values, whole and streamed")


def auto_and_none(srv, model):
    """A grammar makes the tiny model write a call in the generic format:
    under auto it is read as a call, under none it is the answer's text."""
    c = srv.client()
    text = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}, ' \
           '{"name": "get_time", "arguments": {}}]}'
    g = "root ::= " + json.dumps(text)
    kw = dict(model=model, messages=USER, tools=TOOLS, max_tokens=200, temperature=0, extra_body={"grammar": g})
    r = c.chat.completions.create(tool_choice="auto", **kw)
    m = r.choices[0].message
    check(r.choices[0].finish_reason == "tool_calls" and [t.function.name for t in m.tool_calls] ==
          ["get_weather", "get_time"] and m.content is None, f"auto: {r}")
    check(json.loads(m.tool_calls[0].function.arguments) == {"city": "Paris", "unit": "celsius"}, f"auto: {r}")
    check(len({t.id for t in m.tool_calls}) == 2, f"auto: call ids not distinct: {m.tool_calls}")
    content, calls, finish = streamed(c, tool_choice="auto", **kw)
    check(content == "" and finish == "tool_calls" and [calls[i][1] for i in sorted(calls)] ==
          ["get_weather", "get_time"] and json.loads(calls[1][2]) == {}, f"auto streamed: {content!r} {calls}")
    r = c.chat.completions.create(tool_choice="none", **kw)
    check(r.choices[0].message.content == text and not r.choices[0].message.tool_calls and
          r.choices[0].finish_reason == "stop", f"none: {r}")
    print("ok tools: under auto an answer in the call format is two calls (whole and streamed); under none, text")


def history(srv, model):
    """A conversation with a call and its result renders, arguments as objects."""
    c = srv.client()
    msgs = USER + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                          "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]},
                   {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees and sunny"}]
    r = c.chat.completions.create(model=model, messages=msgs, tools=TOOLS, max_tokens=3, temperature=0)
    check(r.choices[0].finish_reason in ("stop", "length") and r.usage.prompt_tokens > 0, f"history: {r}")
    print("ok tools: a conversation with a call and the tool's result is answered")


def smollm2_round_trip(path):
    srv = sc.Server("-m", path, "-c", "8192", "-np", "4")
    try:
        c = srv.client()
        model = c.models.list().data[0].id
        r = c.chat.completions.create(model=model, messages=USER, tools=TOOLS, tool_choice="required",
                                      temperature=0, max_tokens=200)
        m = r.choices[0].message
        check(r.choices[0].finish_reason == "tool_calls" and m.tool_calls, f"SmolLM2: no call: {r}")
        args = validate_call(m.tool_calls[0], "SmolLM2")
        msgs = USER + [{"role": "assistant", "content": m.content, "tool_calls": [
            {"id": t.id, "type": "function", "function": {"name": t.function.name, "arguments": t.function.arguments}}
            for t in m.tool_calls]},
                       {"role": "tool", "tool_call_id": m.tool_calls[0].id, "content": "21 degrees and sunny"}]
        r2 = c.chat.completions.create(model=model, messages=msgs, tools=TOOLS, temperature=0, max_tokens=40)
        check(r2.choices[0].finish_reason in ("stop", "length", "tool_calls"), f"SmolLM2 final: {r2}")
        check(r2.usage.prompt_tokens > r.usage.prompt_tokens, f"SmolLM2: the history did not reach the prompt: {r2}")
        final = r2.choices[0].message.content or r2.choices[0].message.tool_calls
        check(final, f"SmolLM2 final answer empty: {r2}")
        print(f"ok tools (SmolLM2): forced call {m.tool_calls[0].function.name}({json.dumps(args)}), the result "
              f"sent back, then {r2.choices[0].finish_reason}: {str(final)[:60]!r}")
    finally:
        srv.stop()


def tool_use_template(path):
    """A file's own template with a tool_use variant (tokenizer.chat_template.tool_use):
    a request that offers tools is rendered with it, one that does not with
    the default; the same after the model slept and was loaded again."""
    srv = sc.Server("-m", path, "-c", "512", "--sleep-idle-seconds", "1")
    try:
        msgs = [{"role": "user", "content": "Hi"}]
        for when in ("loaded", "after a sleep"):
            st, _, with_tools = sc.http(srv, "POST", "/apply-template", {"messages": msgs, "tools": TOOLS})
            st2, _, without = sc.http(srv, "POST", "/apply-template", {"messages": msgs})
            sc.check(st == 200 and with_tools["prompt"].startswith(f"[tool_use template: {len(TOOLS)} tools][user:Hi]") and
                     st2 == 200 and without["prompt"].startswith("[default template][user:Hi]"),
                     f"{when}: tools render with the file's tool_use template, else its default: {with_tools} "
                     f"{without}")
            if when == "loaded":
                for _ in range(200):
                    if sc.http(srv, "GET", "/props")[2]["is_sleeping"]:
                        break
                    time.sleep(0.05)
                sc.check(sc.http(srv, "GET", "/props")[2]["is_sleeping"], "the server fell asleep")
    finally:
        srv.stop()
    print("ok the file's tool_use template serves requests with tools, its default the others, before and after a "
          "sleep")


def main():
    if "--tool-use-model" in sys.argv:
        tool_use_template(sys.argv[sys.argv.index("--tool-use-model") + 1])
    d = tempfile.mkdtemp()
    generic, hermes = f"{d}/chatml-tools.jinja", f"{d}/hermes.jinja"
    open(generic, "w").write(CHATML_TOOLS)
    open(hermes, "w").write(HERMES)
    srv = sc.Server("-c", "8192", "-np", "8", "--chat-template-file", generic)
    try:
        model = srv.client().models.list().data[0].id
        bad_requests(srv)
        forced(srv, model, "generic")
        auto_and_none(srv, model)
        history(srv, model)
    finally:
        srv.stop()
    srv = sc.Server("-c", "8192", "-np", "8", "--chat-template-file", hermes)
    try:
        forced(srv, srv.client().models.list().data[0].id, "hermes")
    finally:
        srv.stop()
    glm_file = f"{d}/glm.jinja"
    open(glm_file, "w").write(GLM)
    srv = sc.Server("-c", "8192", "-np", "8", "--chat-template-file", glm_file)
    try:
        forced(srv, srv.client().models.list().data[0].id, "glm")
    finally:
        srv.stop()
    xml_file = f"{d}/xml.jinja"
    open(xml_file, "w").write(XML)
    srv = sc.Server("-c", "8192", "-np", "8", "--chat-template-file", xml_file)
    try:
        xml(srv, srv.client().models.list().data[0].id)
    finally:
        srv.stop()
    smollm2 = os.environ.get("HX_TEST_SMOLLM2")
    if smollm2 and os.path.isfile(smollm2):
        smollm2_round_trip(smollm2)
    else:
        print("server_tools_check: skipped the SmolLM2 round trip: HX_TEST_SMOLLM2 names no file")
    print("server_tools_check: all passed")


if __name__ == "__main__":
    main()

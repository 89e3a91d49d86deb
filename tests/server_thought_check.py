#!/usr/bin/env python3
"""hetero-server's reasoning formats (--reasoning-format, reasoning_format),
on 127.0.0.1 and free ports:

- a template that opens a thought (tests/fixtures/think-chatml.jinja) and
  a reasoning budget that closes it: reasoning_content is the thought and
  content the answer, as the raw text (reasoning_format none: the prompt's
  <think> first, as llama-server gives it) splits at </think>; streamed, the reasoning deltas come first and add up to the
  thought, the content deltas to the answer, no tag in either;
  deepseek-legacy keeps the text in content too; usage counts the
  thought's tokens; the thought goes back with the next turn;
- a grammar shapes the text from its first token: a grammar's text is the
  answer even where the prompt opened a thought, and one that writes
  <think>...</think> itself is split;
- tools (Qwen 2.5's Hermes template, which writes no thought tags): auto
  reads no thought there, deepseek reads <think>: a call after the thought
  is a call, one inside it is thought, whole and streamed;
- Anthropic's thinking blocks and OpenAI's Responses reasoning items,
  whole and streamed, as the chat's;
- reasoning_effort: "none" closes a thought the prompt opened, a level
  reaches the template;
- continue_final_message "reasoning_content" (and true, and the prefill,
  for a last message with a thought and no content) continues the
  thought: the prompt opens it after the generation prompt and writes it
  as far as it went, the answer's reasoning_content goes on from there;
  continuing the content closes the thought before it (llama.cpp's
  continuation), so a prefill is never read as thought;
  tool calls in that message, or a template without thought tags, a 400;
- --reasoning-format none on the server, a bad format a 400 (request) or
  an error at start (flag), reasoning_format on a plain completion refused.

Prints one line per check; exits 1 at the first failure.

    server_thought_check.py BUILD_DIR   (HX_TEST_SMOLLM2: SmolLM2-135M-Instruct; else the embedded model)
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_native_check as nc  # noqa: E402 - the Server class
from server_compat_check import Server, check  # noqa: E402 - with post() and events()
from server_tools_check import HERMES  # noqa: E402 - Qwen 2.5's tool template

BUILD = nc.BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
THINK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "think-chatml.jinja")
ASK = [{"role": "user", "content": "Tell me a story."}]
FN = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def chat(srv, **kw):
    st, out = srv.post("/v1/chat/completions", {"messages": ASK, "temperature": 0, "max_tokens": 24, **kw})
    check(st == 200, f"a chat request with {sorted(kw)}: 200 ({st} {out if st != 200 else ''})")
    return out


def streamed(srv, **kw):
    """(the deltas in order, the finish reason, the usage)"""
    ev = srv.events("/v1/chat/completions", {"messages": ASK, "temperature": 0, "max_tokens": 24, "stream": True,
                                             "stream_options": {"include_usage": True}, **kw})
    deltas = [c["choices"][0]["delta"] for _, c in ev if c.get("choices")]
    finish = [c["choices"][0]["finish_reason"] for _, c in ev if c.get("choices")][-1]
    return deltas, finish, ev[-1][1].get("usage")


def joined(deltas, key):
    return "".join(d.get(key) or "" for d in deltas)


def gbnf(text):
    return "root ::= " + json.dumps(text)


def thinking_template(srv):
    raw = chat(srv, reasoning_budget_tokens=4, reasoning_format="none")["choices"][0]["message"]["content"]
    check(raw.startswith("<think>\n") and "</think>" in raw,
          f"none: content begins with the thought the prompt opened, its end forced by the budget: {raw[:50]!r}...")
    thought, answer = raw[len("<think>\n"):].split("</think>", 1)
    out = chat(srv, reasoning_budget_tokens=4)
    m = out["choices"][0]["message"]
    check(m["reasoning_content"] == thought and m["content"] == answer.lstrip("\n"),
          f"auto (the default): reasoning_content {m['reasoning_content']!r} as written, content the rest")
    u = out["usage"]
    check(0 < u["completion_tokens_details"]["reasoning_tokens"] < u["completion_tokens"],
          f"usage: {u['completion_tokens_details']['reasoning_tokens']} of {u['completion_tokens']} tokens thought")
    legacy = chat(srv, reasoning_budget_tokens=4, reasoning_format="deepseek-legacy")["choices"][0]["message"]
    check(legacy["content"] == raw and legacy["reasoning_content"] == m["reasoning_content"],
          "deepseek-legacy: the text stays in content, the thought in reasoning_content too")

    deltas, finish, usage = streamed(srv, reasoning_budget_tokens=4)
    kinds = [k for d in deltas for k in ("reasoning_content", "content") if d.get(k)]
    check(joined(deltas, "reasoning_content") == m["reasoning_content"] and
          joined(deltas, "content") == m["content"], "streamed: the deltas add up to the thought and the answer")
    check(kinds == sorted(kinds, key=lambda k: k == "content") and kinds[0] == "reasoning_content",
          f"streamed: the thought's deltas come first ({kinds.count('reasoning_content')} of them), then the answer's")
    check(not any("think>" in (d.get("content") or "") + (d.get("reasoning_content") or "") for d in deltas),
          "streamed: no tag in any delta")
    check(usage["completion_tokens_details"] == u["completion_tokens_details"], "streamed: the same usage")
    deltas, _, _ = streamed(srv, reasoning_budget_tokens=4, reasoning_format="deepseek-legacy")
    check(joined(deltas, "content") == raw and not joined(deltas, "reasoning_content"),
          "deepseek-legacy streamed: the text in content only")

    # the thought goes back with the next turn: the template writes it
    back = ASK + [{"role": "assistant", "content": m["content"], "reasoning_content": m["reasoning_content"]},
                  {"role": "user", "content": "And then?"}]
    st, t = srv.post("/apply-template", {"messages": back})
    check(st == 200 and f"<think>\n{m['reasoning_content']}\n</think>" in t["prompt"],
          "the next turn's prompt holds the thought sent back as reasoning_content")

    continue_thought(srv)

    # reasoning_effort: "none" closes the opened thought, a level reaches the template
    m = chat(srv, reasoning_budget_tokens=4, reasoning_effort="none")["choices"][0]["message"]
    check("reasoning_content" not in m and "</think>" not in m["content"],
          "reasoning_effort none: the prompt's thought is closed, the answer has none")
    st, t = srv.post("/apply-template", {"messages": ASK, "reasoning_effort": "high"})
    check(st == 200 and "Reasoning: high" in t["prompt"] and t["prompt"].endswith("<think>\n"),
          "reasoning_effort high reaches the template")
    st, t = srv.post("/apply-template", {"messages": ASK, "reasoning_effort": "none"})
    check(st == 200 and t["prompt"].endswith("<think>\n</think>"), "reasoning_effort none: the thought closed")

    # a grammar: its text is the answer, unless it writes the tags itself
    m = chat(srv, grammar=gbnf("Once upon a time."), max_tokens=100)["choices"][0]["message"]
    check(m["content"] == "Once upon a time." and "reasoning_content" not in m,
          "a grammar's text is the answer although the prompt opened a thought")
    m = chat(srv, grammar=gbnf("<think>A fox.</think>\n\nOnce."), max_tokens=100)["choices"][0]["message"]
    check(m == {"role": "assistant", "content": "Once.", "reasoning_content": "A fox."},
          "a grammar that writes <think>...</think> is split")

    # Anthropic's thinking blocks
    body = {"model": "m", "max_tokens": 24, "temperature": 0, "messages": ASK,
            "thinking": {"type": "enabled", "budget_tokens": 4}}
    st, a = srv.post("/v1/messages", body)
    m = chat(srv, reasoning_budget_tokens=4)["choices"][0]["message"]
    check(st == 200 and a["content"][0] == {"type": "thinking", "thinking": m["reasoning_content"], "signature": ""}
          and a["content"][1] == {"type": "text", "text": m["content"]},
          "Anthropic: a thinking block (empty signature), then the text, as the chat's")
    ev = [d for _, d in srv.events("/v1/messages", {**body, "stream": True})]
    starts = [d["content_block"]["type"] for d in ev if d["type"] == "content_block_start"]
    think = "".join(d["delta"].get("thinking", "") for d in ev if d["type"] == "content_block_delta" and d["index"] == 0)
    sig = [d for d in ev if d["type"] == "content_block_delta" and d["delta"]["type"] == "signature_delta"]
    check(starts == ["thinking", "text"] and think == m["reasoning_content"] and len(sig) == 1 and
          sig[0]["index"] == 0, "Anthropic streamed: thinking_delta events, a signature_delta, then the text block")

    # OpenAI's Responses: a reasoning item
    rbody = {"model": "m", "input": "Tell me a story.", "max_output_tokens": 24, "temperature": 0,
             "reasoning_budget_tokens": 4}
    st, r = srv.post("/v1/responses", rbody)
    item = r["output"][0]
    check(st == 200 and item["type"] == "reasoning" and item["content"] == [{"type": "reasoning_text",
                                                                              "text": m["reasoning_content"]}] and
          r["output"][1]["content"][0]["text"] == m["content"] and
          r["usage"]["output_tokens_details"]["reasoning_tokens"] > 0,
          "Responses: a reasoning item, then the message, reasoning_tokens counted")
    ev = [d for _, d in srv.events("/v1/responses", {**rbody, "stream": True})]
    rt = "".join(d["delta"] for d in ev if d["type"] == "response.reasoning_text.delta")
    done = [d for d in ev if d["type"] == "response.output_item.done"]
    check(rt == m["reasoning_content"] and done[0]["item"]["type"] == "reasoning" and
          done[0]["item"]["content"][0]["text"] == rt and
          [d["text"] for d in ev if d["type"] == "response.reasoning_text.done"] == [rt],
          "Responses streamed: reasoning_text deltas, .done, the item done with the whole thought")

    # bad input
    st, e = srv.post("/v1/chat/completions", {"messages": ASK, "reasoning_format": "chain"})
    check(st == 400 and "reasoning_format" in e["error"]["message"], "reasoning_format 'chain': 400 naming it")
    st, e = srv.post("/v1/chat/completions", {"messages": ASK, "reasoning_effort": 3})
    check(st == 400 and "reasoning_effort" in e["error"]["message"], "reasoning_effort 3: 400 naming it")
    st, e = srv.post("/v1/completions", {"prompt": "a", "reasoning_format": "deepseek", "max_tokens": 2})
    check(st == 400 and "reasoning_format" in e["error"]["message"], "reasoning_format on a plain completion: 400")
    st, _ = srv.post("/v1/completions", {"prompt": "a", "reasoning_format": "none", "max_tokens": 2})
    check(st == 200, "reasoning_format none on a plain completion: 200")


def continue_thought(srv):
    begun = ASK + [{"role": "assistant", "reasoning_content": "The story is about"}]
    want = "<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\n<think>The story is about"
    for how, extra in (("\"reasoning_content\"", {"continue_final_message": "reasoning_content"}),
                       ("true", {"continue_final_message": True}), ("the prefill", {})):
        body = dict({"messages": begun, "add_generation_prompt": False}, **extra)
        if not extra:
            del body["add_generation_prompt"]
        st, t = srv.post("/apply-template", body)
        check(st == 200 and t["prompt"] == want, f"continue {how}: the thought opened and written as far as it went "
              f"({t.get('prompt', t)!r})")
    body = {"messages": begun, "continue_final_message": "reasoning_content", "add_generation_prompt": False}
    # the budget counts the thought's tokens in the prompt too (4 here), as llama.cpp's does
    raw = chat(srv, reasoning_budget_tokens=8, reasoning_format="none", **body)["choices"][0]["message"]["content"]
    check("</think>" in raw and not raw.startswith(("<think>", "</think>")),
          f"continued, none: the text goes on inside the thought, then closes it ({raw[:40]!r}...)")
    m = chat(srv, reasoning_budget_tokens=8, **body)["choices"][0]["message"]
    thought, answer = raw.split("</think>", 1)
    check(m["reasoning_content"] == thought and m["content"] == answer.lstrip("\n"),
          f"continued: reasoning_content {m['reasoning_content']!r} goes on from the last one, content the rest")
    with_content = ASK + [{"role": "assistant", "reasoning_content": "Hm.", "content": "Once"}]
    st, t = srv.post("/apply-template", {"messages": with_content, "continue_final_message": True,
                                         "add_generation_prompt": False})
    check(st == 200 and t["prompt"] == want.replace("The story is about", "Hm.</think>Once"),
          f"continue true with content: the thought written and closed, then the content continued ({t['prompt']!r})")
    called = [dict(begun[-1], tool_calls=[{"id": "c1", "type": "function", "function": {
        "name": "get_weather", "arguments": "{}"}}])]
    st, e = srv.post("/v1/chat/completions", {"messages": ASK + called, "max_tokens": 2,
                                              "continue_final_message": "reasoning_content",
                                              "add_generation_prompt": False})
    check(st == 400 and "tool calls" in e["error"]["message"], f"a message with tool calls: 400 ({e['error']['message']})")
    st, e = srv.post("/v1/chat/completions", {"messages": ASK, "max_tokens": 2,
                                              "continue_final_message": "reasoning_content",
                                              "add_generation_prompt": False})
    check(st == 400 and "assistant" in e["error"]["message"], "no assistant message to continue: 400")
    st, e = srv.post("/v1/chat/completions", {"messages": begun, "max_tokens": 2, "continue_final_message": "thought",
                                              "add_generation_prompt": False})
    check(st == 400 and "reasoning_content" in e["error"]["message"], "continue_final_message \"thought\": 400")


def tools(srv):
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    text = "<think>It is about weather.</think>\n" + call
    m = chat(srv, tools=[FN], grammar=gbnf(text), max_tokens=200)["choices"][0]["message"]
    check("reasoning_content" not in m and m["content"] == "<think>It is about weather.</think>" and
          m["tool_calls"][0]["function"]["name"] == "get_weather",
          "auto, a template with no thought tags: no thought read (the call still is)")
    out = chat(srv, tools=[FN], grammar=gbnf(text), reasoning_format="deepseek", max_tokens=200)
    m = out["choices"][0]["message"]
    check(m["reasoning_content"] == "It is about weather." and
          json.loads(m["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"} and
          out["choices"][0]["finish_reason"] == "tool_calls", "deepseek: the thought, then the call after it")
    deltas, finish, _ = streamed(srv, tools=[FN], grammar=gbnf(text), reasoning_format="deepseek", max_tokens=200)
    calls = [c for d in deltas for c in d.get("tool_calls", [])]
    check(joined(deltas, "reasoning_content") == "It is about weather." and calls and
          calls[0]["function"]["name"] == "get_weather" and finish == "tool_calls",
          "deepseek streamed: the thought's deltas, then the call")
    begun = [{"role": "user", "content": "Weather?"}, {"role": "assistant", "reasoning_content": "Hm"}]
    st, e = srv.post("/v1/chat/completions", {"messages": begun, "max_tokens": 2,
                                              "continue_final_message": "reasoning_content",
                                              "add_generation_prompt": False})
    check(st == 400 and "thought tags" in e["error"]["message"],
          "continuing a thought with a template that writes no thought tags: 400")
    inside = "<think>I could write " + call + " here.</think>\nNo call."
    m = chat(srv, tools=[FN], grammar=gbnf(inside), reasoning_format="deepseek", max_tokens=200)["choices"][0]["message"]
    check(m["content"] == "No call." and "tool_calls" not in m and "<tool_call>" in m["reasoning_content"],
          "deepseek: a call written inside the thought is thought, not a call")


def main():
    srv = Server("-c", "2048", "-np", "2", "--chat-template-file", THINK)
    try:
        thinking_template(srv)
    finally:
        srv.stop()
    with tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False) as f:
        f.write(HERMES)
    srv = Server("-c", "2048", "-np", "2", "--chat-template-file", f.name)
    try:
        tools(srv)
    finally:
        srv.stop()
        os.unlink(f.name)
    srv = Server("-c", "1024", "--chat-template-file", THINK, "--reasoning-format", "none")
    try:
        m = chat(srv, reasoning_budget_tokens=2)["choices"][0]["message"]
        check("</think>" in m["content"] and "reasoning_content" not in m,
              "--reasoning-format none: the thought stays in content")
    finally:
        srv.stop()
    p = subprocess.run([f"{BUILD}/hetero-server", "--reasoning-format", "chain"], capture_output=True, text=True,
                       timeout=30)
    check(p.returncode != 0 and "--reasoning-format" in p.stderr, f"--reasoning-format chain: {p.stderr.strip()}")
    print("server_thought_check: all passed")


if __name__ == "__main__":
    main()

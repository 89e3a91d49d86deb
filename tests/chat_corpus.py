#!/usr/bin/env python3
"""The chat template corpus' reference: every template of a folder (llama.cpp's
models/templates) rendered by Python's jinja2 for a set of conversations, set
up as transformers' apply_chat_template sets it up (ImmutableSandboxedEnvironment
with trim_blocks and lstrip_blocks, the loopcontrols extension, its generation
block, tojson as json.dumps, raise_exception, strftime_now), with a fixed clock,
and llama.cpp's None or undefined + string (hetero's one deliberate difference).

    chat_corpus.py TEMPLATE_DIR OUT_DIR

writes OUT_DIR/conversations/NAME.{messages,tools,options} (what hetero is given)
and OUT_DIR/expected/TEMPLATE@NAME.{out,err} (jinja2's text, or the error it
raised), and OUT_DIR/manifest.tsv listing every pair.  tests/test_chat_corpus.c
renders the same with hetero and compares.
"""
import json
import os
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = 1768478400  # 2026-01-15 12:00:00 UTC: strftime_now's fixed clock
BOS, EOS = "<s>", "</s>"

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city's name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}},
}

# name: (messages, tools, add_generation_prompt, continue_final)
CONVERSATIONS = {
    "user": ([{"role": "user", "content": "Hi"}], None, True, False),
    "system": ([{"role": "system", "content": "You are a terse assistant."},
                {"role": "user", "content": "Hi"}], None, True, False),
    "multi": ([{"role": "system", "content": "You are helpful."},
               {"role": "user", "content": "Hello"},
               {"role": "assistant", "content": "Hi! How can I help?"},
               {"role": "user", "content": "What is 2+2?\nAnswer \"briefly\", s'il vous plaît: 日本語 ok?"}],
              None, True, False),
    "parts": ([{"role": "system", "content": [{"type": "text", "text": "Answer in French."}]},
               {"role": "user", "content": [{"type": "text", "text": "Good "}, {"type": "text", "text": "morning"}]}],
              None, True, False),
    "no_gen": ([{"role": "user", "content": "Hello"},
                {"role": "assistant", "content": "Hi there."}], None, False, False),
    "prefill": ([{"role": "user", "content": "Write a haiku about the sea."},
                 {"role": "assistant", "content": "Waves fold"}], None, True, True),
    "prefill_after_thought": ([{"role": "user", "content": "Write a haiku about the sea."},
                               {"role": "assistant", "reasoning_content": "Five, seven, five.",
                                "content": "Waves fold"}], None, True, True),
    "prefill_thought": ([{"role": "user", "content": "Write a haiku about the sea."},
                         {"role": "assistant", "reasoning_content": "Five, seven"}], None, True, True),
    "tools_offered": ([{"role": "user", "content": "What's the weather in Paris?"}], [WEATHER_TOOL], True, False),
    "tool_call": ([{"role": "system", "content": "You can call tools."},
                   {"role": "user", "content": "What's the weather in Paris?"},
                   {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
                   {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
                    "content": "{\"temperature\": 18, \"sky\": \"clear\"}"}],
                  [WEATHER_TOOL], True, False),
}


class Generation(jinja2.ext.Extension):
    """transformers' {% generation %} block (AssistantTracker), rendering its body as is."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


class Raised(Exception):
    pass


def raise_exception(message):
    raise Raised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.fromtimestamp(NOW).strftime(fmt)


class LlamaCppAdd(ImmutableSandboxedEnvironment):
    """hetero's one deliberate difference from jinja2, llama.cpp's: None or
    an undefined value added (+) to a string is the string
    (docs/chat-templates.md); every other + is jinja2's own."""
    intercepted_binops = frozenset(["+"])

    def call_binop(self, context, operator, left, right):
        blank = lambda v: v is None or isinstance(v, jinja2.Undefined)
        if operator == "+" and isinstance(left, str) and blank(right):
            return left
        if operator == "+" and isinstance(right, str) and blank(left):
            return right
        return super().call_binop(context, operator, left, right)


def environment():
    env = LlamaCppAdd(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


# text/reasoning.c's pairs, in its order: the first the template writes both of.
THOUGHT_TAGS = [("<think>", "</think>"), ("<seed:think>", "</seed:think>"), ("<mm:think>", "</mm:think>"),
                ("[THINK]", "[/THINK]"), ("<|START_THINKING|>", "<|END_THINKING|>"),
                ("\u25c1think\u25b7", "\u25c1/think\u25b7")]


def render(template, source, messages, tools, add_gen, continue_final):
    def run(msgs, gen):
        return template.render(messages=msgs, tools=tools, documents=None, add_generation_prompt=gen,
                               bos_token=BOS, eos_token=EOS)
    last = messages[-1] if messages else {}
    if not (continue_final and last.get("role") == "assistant" and not last.get("tool_calls")):
        return run(messages, add_gen)
    # llama-server: the rest with the generation prompt; where the template
    # writes thought tags, that prompt up to the start tag it opens, the tag,
    # the message's thought and (continuing the content) the end tag; then
    # the content.  A thought alone (no content) is continued as a thought.
    content, thought = last.get("content") or "", last.get("reasoning_content") or ""
    if isinstance(content, list):
        content = "\n\n".join(p["text"] for p in content)
    thought_only = bool(thought) and not content
    text = run(messages[:-1], True)
    tags = next(((a, b) for a, b in THOUGHT_TAGS if a in source and b in source), None)
    if not tags:
        if thought_only:
            raise ValueError("the chat template writes no thought tags, so there is no thought to continue")
        return text + content
    bare = run(messages[:-1], False)
    at = text.find(tags[0], len(bare) if text.startswith(bare) else len(text))
    keep = text[:at] if at >= 0 else text
    return keep + tags[0] + thought + ("" if thought_only else tags[1] + content)


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(os.path.join(out, "conversations"), exist_ok=True)
    os.makedirs(os.path.join(out, "expected"), exist_ok=True)
    for name, (messages, tools, add_gen, cont) in CONVERSATIONS.items():
        base = os.path.join(out, "conversations", name)
        with open(base + ".messages", "w", encoding="utf-8") as f:
            json.dump(messages, f, ensure_ascii=False)
        with open(base + ".tools", "w", encoding="utf-8") as f:
            f.write(json.dumps(tools, ensure_ascii=False) if tools is not None else "")
        with open(base + ".options", "w") as f:
            f.write(f"{int(add_gen)} {int(cont)} {NOW} {BOS} {EOS}\n")
    env = environment()
    rows = []
    for file in sorted(os.listdir(src)):
        if not file.endswith(".jinja"):
            continue
        with open(os.path.join(src, file), encoding="utf-8") as f:
            source = f.read()
        try:
            template = env.from_string(source)
            compile_error = None
        except Exception as e:  # the template itself does not compile
            compile_error = f"{type(e).__name__}: {e}"
        for name, (messages, tools, add_gen, cont) in CONVERSATIONS.items():
            base = os.path.join(out, "expected", f"{file}@{name}")
            for ext in (".out", ".err"):
                if os.path.exists(base + ext):
                    os.remove(base + ext)
            if compile_error:
                status, text = "err", "compile: " + compile_error
            else:
                try:
                    status, text = "ok", render(template, source, json.loads(json.dumps(messages)), tools, add_gen,
                                                cont)
                except Raised as e:
                    status, text = "raised", str(e)
                except Exception as e:
                    status, text = "err", f"{type(e).__name__}: {e}"
            with open(base + (".out" if status == "ok" else ".err"), "w", encoding="utf-8", newline="") as f:
                f.write(text)
            rows.append(f"{file}\t{name}\t{status}\n")
    with open(os.path.join(out, "manifest.tsv"), "w") as f:
        f.writelines(rows)
    print(f"{len(rows)} renders of {len(rows) // len(CONVERSATIONS)} templates x {len(CONVERSATIONS)} conversations")


if __name__ == "__main__":
    main()

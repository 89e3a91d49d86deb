"""Chat templates: a conversation as the prompt text the model was trained on
(hetero's built-in template families, as llama.cpp applies them)."""
from __future__ import annotations

import ctypes
from typing import Any, Dict, List, Mapping, Sequence

from . import _capi as C
from . import errors

# llama-cpp-python's chat_format names whose format is one of hetero's
# built-in families ("qwen" is ChatML there).  Other names are looked up
# as hetero's own family names.
LLAMA_CPP_PYTHON_FORMATS: Dict[str, str] = {
    "llama-2": "llama2",
    "llama-3": "llama3",
    "chatml": "chatml",
    "qwen": "chatml",
    "zephyr": "zephyr",
    "gemma": "gemma",
    "vicuna": "vicuna",
    "openchat": "openchat",
    "chatglm3": "chatglm3",
}


def builtins() -> List[str]:
    """hetero's built-in template families."""
    out = []
    i = 0
    while True:
        n = C.hx_chat_template_builtin(i)
        if not n:
            return out
        out.append(n.decode())
        i += 1


def template_name(template: str) -> str:
    """The built-in family a template is (a family name, or a Jinja source
    recognised as llama.cpp recognises it); UnsupportedError otherwise."""
    name = ctypes.c_char_p()
    errors.check(C.hx_chat_template_name(template.encode(), ctypes.byref(name)), "hx_chat_template_name")
    return name.value.decode()


def _content(m: Mapping[str, Any]) -> str:
    c = m.get("content")
    if c is None:
        return ""
    if isinstance(c, str):
        return c
    if isinstance(c, list):  # OpenAI content parts: text only
        parts = []
        for p in c:
            if isinstance(p, Mapping) and p.get("type") == "text":
                parts.append(str(p.get("text", "")))
            else:
                kind = p.get("type") if isinstance(p, Mapping) else type(p).__name__
                raise errors.UnsupportedArgument("messages", f"a content part of type {kind!r}: hetero "
                                                 "reads text parts only")
        return "".join(parts)
    raise errors.InvalidArgument(errors.ERR_INVALID_ARG, f"a message's content is a {type(c).__name__}",
                                 "messages")


def apply(template: str, messages: Sequence[Mapping[str, Any]], add_assistant: bool = True) -> str:
    """Formats OpenAI-shaped messages ({"role", "content"}) with a template."""
    if not messages:
        raise errors.InvalidArgument(errors.ERR_INVALID_ARG, "no messages", "chat.apply")
    keep = []
    arr = (C.hx_chat_message * len(messages))()
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or "role" not in m:
            raise errors.InvalidArgument(errors.ERR_INVALID_ARG, f"message {i} has no role", "chat.apply")
        for k in ("tool_calls", "function_call", "tool_call_id", "name"):
            if m.get(k) is not None:
                raise errors.UnsupportedArgument(f"messages[{i}].{k}", "hetero's chat templates format roles "
                                                 "and text only")
        keep.append((str(m["role"]).encode(), _content(m).encode()))
        arr[i].role, arr[i].content = keep[-1]
    n = ctypes.c_size_t()
    tmpl = template.encode()
    st = C.hx_chat_apply_template(tmpl, arr, len(messages), int(add_assistant), None, 0, ctypes.byref(n))
    if st not in (errors.OK, errors.ERR_RANGE):
        errors.check(st, "hx_chat_apply_template")
    buf = ctypes.create_string_buffer(n.value + 1)
    errors.check(C.hx_chat_apply_template(tmpl, arr, len(messages), int(add_assistant), buf, len(buf),
                                          ctypes.byref(n)), "hx_chat_apply_template")
    return buf.raw[: n.value].decode("utf-8", "replace")

"""Grammars for constrained output, as llama-cpp-python's ``LlamaGrammar``:
GBNF text (llama.cpp's format) or a JSON Schema turned into one by hetero
(``hx_json_schema_to_grammar``, keywords it cannot enforce refused by name)."""
from __future__ import annotations

import ctypes
import json
from typing import Any, Mapping, Union

from . import _capi as C
from . import errors


def json_schema_to_gbnf(schema: Union[str, Mapping[str, Any]]) -> str:
    """The GBNF grammar of a JSON Schema (a dict or its JSON text)."""
    text = (schema if isinstance(schema, str) else json.dumps(schema)).encode()
    n = ctypes.c_size_t()
    st = C.hx_json_schema_to_grammar(text, None, 0, ctypes.byref(n))
    if st != errors.ERR_RANGE:
        errors.check(st, "hx_json_schema_to_grammar")
    buf = ctypes.create_string_buffer(n.value + 1)
    errors.check(C.hx_json_schema_to_grammar(text, buf, len(buf), ctypes.byref(n)), "hx_json_schema_to_grammar")
    return buf.raw[: n.value].decode()


class LlamaGrammar:
    """A grammar for ``grammar=`` of ``Llama``'s completion calls.  The text
    is checked when a generation starts (a bad one raises there, with its
    line and column)."""

    def __init__(self, gbnf: str) -> None:
        self._grammar = gbnf

    @classmethod
    def from_string(cls, grammar: str, verbose: bool = True) -> "LlamaGrammar":
        return cls(grammar)

    @classmethod
    def from_file(cls, file: str, verbose: bool = True) -> "LlamaGrammar":
        with open(file, encoding="utf-8") as f:
            return cls(f.read())

    @classmethod
    def from_json_schema(cls, json_schema: Union[str, Mapping[str, Any]], verbose: bool = True) -> "LlamaGrammar":
        return cls(json_schema_to_gbnf(json_schema))

    def __str__(self) -> str:
        return self._grammar


def gbnf_of(grammar: Any) -> str:
    """GBNF text from what a caller may pass as ``grammar``."""
    if isinstance(grammar, LlamaGrammar):
        return grammar._grammar
    if isinstance(grammar, str):
        return grammar
    raise TypeError(f"grammar must be a LlamaGrammar or GBNF text, not {type(grammar).__name__}")


def response_format_gbnf(response_format: Mapping[str, Any]) -> Union[str, None]:
    """The grammar of an OpenAI / llama-cpp-python ``response_format``:
    ``text`` (none), ``json_object`` (any object, or its ``schema``),
    ``json_schema`` (``json_schema.schema``)."""
    kind = response_format.get("type", "text")
    if kind == "text":
        return None
    if kind == "json_object":
        return json_schema_to_gbnf(response_format.get("schema") or {"type": "object"})
    if kind == "json_schema":
        js = response_format.get("json_schema") or {}
        schema = js.get("schema") if isinstance(js, Mapping) else None
        if schema is None:
            raise ValueError("response_format json_schema needs json_schema.schema")
        return json_schema_to_gbnf(schema)
    raise ValueError(f"response_format type {kind!r}: text, json_object or json_schema")

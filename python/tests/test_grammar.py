"""Grammars from Python: GBNF and JSON Schemas hold the output, as
llama-cpp-python's grammar= and response_format= do."""
import json

import pytest

from hetero import LlamaGrammar
from hetero.errors import InvalidArgument


def test_gbnf_grammar_holds_a_completion(smollm2):
    g = LlamaGrammar.from_string('root ::= ("yes" | "no") "." ')
    for seed in (1, 2, 3):
        text = smollm2("Is the sky blue? Answer:", max_tokens=8, temperature=1.0, seed=seed, grammar=g)
        assert text["choices"][0]["text"] in ("yes.", "no.")


def test_json_schema_response_format(smollm2):
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                               "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    out = smollm2.create_chat_completion(
        messages=[{"role": "user", "content": "Describe a person as JSON."}], max_tokens=64, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": schema}})
    doc = json.loads(out["choices"][0]["message"]["content"])
    assert set(doc) == {"name", "age"} and isinstance(doc["age"], int)


def test_json_object_response_format(smollm2):
    # llama-cpp-python's json_object with its optional schema; a bounded
    # one, so that greedy decoding ends inside max_tokens.
    fmt = {"type": "json_object", "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}},
                                             "required": ["ok"]}}
    out = smollm2.create_chat_completion(messages=[{"role": "user", "content": "Is water wet? JSON please."}],
                                         max_tokens=48, temperature=0, response_format=fmt)
    assert out["choices"][0]["finish_reason"] == "stop"
    assert isinstance(json.loads(out["choices"][0]["message"]["content"])["ok"], bool)


def test_bad_grammars_and_schemas_say_where(smollm2):
    with pytest.raises(InvalidArgument, match="line 1, column 10: rule 'nope'"):
        smollm2("Hi", max_tokens=2, grammar=LlamaGrammar.from_string("root ::= nope\n"))
    with pytest.raises(InvalidArgument, match="keyword 'pattern'"):
        LlamaGrammar.from_json_schema({"type": "string", "pattern": "^a$"})
    with pytest.raises(TypeError):
        smollm2("Hi", max_tokens=2, grammar=object())

#!/usr/bin/env python3
"""Walks docs/server-fields.md against hetero-server: each row's example
value is sent (to /v1/completions, /v1/chat/completions or both, as the
row says); a supported field must give a 200, a refused one a 400 whose
message names the field.  Every llama-server request field listed below
(its README's /completion and /v1/chat/completions options and its request
schema) must be a row of the table.  Exits 1 at the first failure.

    server_fields.py BUILD_DIR [DOCS]
"""
import json
import os
import tempfile
import re
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_check import Server, check  # noqa: E402

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
DOCS = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs",
                                                          "server-fields.md")

# llama-server's request fields (tools/server/README.md, server-schema.cpp).
LLAMA_SERVER_FIELDS = """
prompt temperature dynatemp_range dynatemp_exponent top_k top_p min_p n_predict n_indent n_keep n_cmpl
n_cache_reuse stream stop typical_p repeat_penalty repeat_last_n presence_penalty frequency_penalty
dry_multiplier dry_base dry_allowed_length dry_penalty_last_n dry_sequence_breakers xtc_probability
xtc_threshold mirostat mirostat_tau mirostat_eta grammar json_schema seed ignore_eos logit_bias n_probs
min_keep t_max_predict_ms id_slot cache_prompt return_tokens samplers timings_per_token return_progress
sse_ping_interval post_sampling_probs response_fields lora verbose stream_options n_discard top_n_sigma
adaptive_target adaptive_decay backend_sampling grammar_lazy grammar_triggers preserved_tokens chat_format
reasoning_format generation_prompt parse_tool_calls chat_parser continue_final_message echo reasoning_control
reasoning_budget_tokens reasoning_budget_start_tag reasoning_budget_end_tags reasoning_budget_end_tag
reasoning_budget_message max_tokens max_completion_tokens n messages tools tool_choice chat_template_kwargs
reasoning_effort response_format logprobs top_logprobs model
""".split()

ROW = re.compile(r"^\| `([a-z_]+)` \| (both|completions|chat) \| (supported|refused) \| `(.*)` \| (.*)\|$")


def rows():
    out = []
    with open(DOCS, encoding="utf-8") as f:
        for line in f:
            m = ROW.match(line.rstrip("\n"))
            if m:
                out.append((m.group(1), m.group(2), m.group(3), json.loads(m.group(4))))
    return out


def post(srv, path, body):
    req = urllib.request.Request(srv.url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def main():
    table = rows()
    names = {r[0] for r in table}
    missing = [f for f in LLAMA_SERVER_FIELDS if f not in names]
    check(not missing, f"llama-server fields missing from {DOCS}: {missing}")
    check(len(table) >= len(LLAMA_SERVER_FIELDS), "the table lost rows")
    # A Jinja template, so that the fields that need one (tools,
    # chat_template_kwargs) go through it as with a real model's.
    template = os.path.join(tempfile.mkdtemp(), "chatml.jinja")
    with open(template, "w") as f:
        f.write("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    srv = Server("-c", "1024", "--chat-template-file", template)
    supported = refused = 0
    try:
        for name, where, status, example in table:
            for path in (["/v1/completions"] if where == "completions" else ["/v1/chat/completions"]
                         if where == "chat" else ["/v1/completions", "/v1/chat/completions"]):
                chat = path.endswith("chat/completions")
                body = {"messages": [{"role": "user", "content": "Hi"}]} if chat else {"prompt": "Hi"}
                if name not in ("n_predict", "max_tokens", "max_completion_tokens"):
                    body["max_tokens"] = 3
                body[name] = example
                if name == "top_logprobs":
                    body["logprobs"] = True
                code, text = post(srv, path, body)
                if status == "supported":
                    check(code == 200, f"{name} = {json.dumps(example)} on {path}: {code} {text[:300]}")
                    supported += 1
                else:
                    check(code == 400 and f"'{name}'" in text,
                          f"{name} = {json.dumps(example)} on {path}: expected a 400 naming it, got {code} {text[:300]}")
                    refused += 1
                print(f"ok: {status} {name} = {json.dumps(example)} on {path}: {code}")
    finally:
        srv.stop()
    print(f"server_fields: {len(table)} rows, {supported} supported and {refused} refused requests as the table says; "
          f"all {len(LLAMA_SERVER_FIELDS)} llama-server fields listed")


if __name__ == "__main__":
    main()

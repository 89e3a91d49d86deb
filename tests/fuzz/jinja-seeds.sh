#!/bin/sh
# Seeds for the Jinja fuzz target: each template of tests/jinja_cases.h as
# a file of DIR, and llama.cpp's chat templates when HX_LLAMACPP_MODELS
# names its models/ folder.
#
#   sh tests/fuzz/jinja-seeds.sh DIR
set -eu
dir=${1:?usage: jinja-seeds.sh DIR}
mkdir -p "$dir"
python3 - "$dir" <<'PY'
import ast, re, sys
text = open("tests/jinja_cases.h", encoding="utf-8").read()
for i, m in enumerate(re.finditer(r'^    \{("(?:[^"\\]|\\.)*"), ("(?:[^"\\]|\\.)*")', text, re.M)):
    src = ast.literal_eval("b" + m.group(2)).decode("utf-8", "replace")
    open(f"{sys.argv[1]}/case-{i:03d}", "w", encoding="utf-8").write(src)
PY
if [ -n "${HX_LLAMACPP_MODELS:-}" ] && [ -d "$HX_LLAMACPP_MODELS/templates" ]; then
    cp "$HX_LLAMACPP_MODELS"/templates/*.jinja "$dir"/
fi

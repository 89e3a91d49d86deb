#!/bin/sh
# The tokenizer test data of the suites: llama.cpp's vocabulary-only GGUF
# files (models/ggml-vocab-*.gguf) with their test vectors (*.gguf.inp: the
# strings, *.gguf.out: the ids llama.cpp gives them), as the llama-cpp-python
# source distribution on PyPI ships them (MIT, the LICENSE is kept beside).
# Fetched once with pip, checked against the sdist's known SHA-256, and only
# those files are extracted into DIR/vocab; prints DIR on stdout (the suites'
# HX_TEST_DATA).  A second run finds DIR/vocab complete and fetches nothing.
#
#   sh tests/fetch-vocab.sh DIR
#
# When the package registry cannot be reached it says so on stderr, naming
# what it could not fetch, prints nothing on stdout and exits 1: the suites
# that need the vocabularies then report themselves skipped, with this reason.
set -u
dir=${1:?usage: fetch-vocab.sh DIR}
package=llama-cpp-python
version=0.3.36
sdist=llama_cpp_python-$version.tar.gz
sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
stamp=$dir/vocab/.complete

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sha256" ]; then
    echo "$dir"
    exit 0
fi
say() { echo "fetch-vocab: $*" >&2; }
mkdir -p "$dir/sdist" || exit 1
say "downloading $package==$version (source, 77 MB: llama.cpp's ggml-vocab-*.gguf test vocabularies) with pip into $dir"
if ! python3 -m pip download -q --retries 2 --no-deps --no-binary :all: "$package==$version" -d "$dir/sdist" \
    >"$dir/pip.log" 2>&1; then
    say "pip could not download $package==$version (the tokenizer test vocabularies," \
        "ggml-vocab-*.gguf): is the package registry reachable?" \
        "The tokenizer, gguf and context tests that read them will be skipped. pip said:"
    tail -n 3 "$dir/pip.log" >&2
    exit 1
fi
if [ "$(sha256sum "$dir/sdist/$sdist" | cut -d' ' -f1)" != "$sha256" ]; then
    say "$sdist does not have the expected SHA-256 ($sha256); not using it"
    rm -rf "$dir/sdist"
    exit 1
fi
rm -rf "$dir/vocab.part"
python3 - "$dir/sdist/$sdist" "$dir/vocab.part" <<'EOF' || { say "cannot extract the vocabularies from $sdist"; exit 1; }
import os, re, shutil, sys, tarfile
sdist, out = sys.argv[1:]
os.makedirs(out)
want = re.compile(r"^[^/]+/vendor/llama\.cpp/(models/(ggml-vocab-[a-z0-9.-]+\.gguf(\.inp|\.out)?)|(LICENSE))$")
n = 0
with tarfile.open(sdist) as t:
    for m in t:
        w = want.match(m.name)
        if not w or not m.isfile():
            continue
        name = w.group(2) or "LICENSE.llama.cpp"
        with t.extractfile(m) as src, open(os.path.join(out, name), "wb") as dst:
            shutil.copyfileobj(src, dst)
        n += 1
if n < 3:
    sys.exit("no ggml-vocab files found")
EOF
rm -rf "$dir/vocab" && mv "$dir/vocab.part" "$dir/vocab" && echo "$sha256" > "$stamp" &&
    rm -rf "$dir/sdist" "$dir/pip.log"
say "$(ls "$dir/vocab" | grep -c '\.gguf$') vocabularies in $dir/vocab"
echo "$dir"

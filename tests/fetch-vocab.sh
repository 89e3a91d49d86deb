#!/bin/sh
# The tokenizer test data of the suites: llama.cpp's vocabulary-only GGUF
# files (models/ggml-vocab-*.gguf) with their test vectors (*.gguf.inp: the
# strings, *.gguf.out: the ids llama.cpp gives them), as the llama-cpp-python
# source distribution on PyPI ships them (MIT, the LICENSE is kept beside).
# The sdist is fetched and checked by tests/fetch-llamacpp-sdist.sh into
# SDIST_DIR (default DIR; the Makefile shares it with the chat-template
# corpus, so it is downloaded once); the vocabularies are copied into
# DIR/vocab; prints DIR on stdout (the suites' HX_TEST_DATA).  A second run
# finds DIR/vocab complete and does nothing.
#
#   sh tests/fetch-vocab.sh DIR [SDIST_DIR]
#
# When the package registry cannot be reached it says so on stderr (naming
# what it could not fetch), prints nothing on stdout and exits 1: the
# suites that need the vocabularies then report themselves skipped, with
# this reason.
set -u
dir=${1:?usage: fetch-vocab.sh DIR [SDIST_DIR]}
sdist_dir=${2:-$dir}
stamp=$dir/vocab/.complete
say() { echo "fetch-vocab: $*" >&2; }

if [ -f "$stamp" ]; then
    echo "$dir"
    exit 0
fi
if ! models=$(sh "$(dirname "$0")/fetch-llamacpp-sdist.sh" "$sdist_dir"); then
    say "no tokenizer test vocabularies (ggml-vocab-*.gguf): the tokenizer, gguf and context tests that read" \
        "them will be skipped"
    exit 1
fi
rm -rf "$dir/vocab.part" && mkdir -p "$dir/vocab.part" || exit 1
if ! cp "$models"/ggml-vocab-* "$dir/vocab.part/" || ! cp "$models/../LICENSE" "$dir/vocab.part/LICENSE.llama.cpp"; then
    say "cannot copy the vocabularies from $models"
    exit 1
fi
rm -rf "$dir/vocab" && mv "$dir/vocab.part" "$dir/vocab" && touch "$stamp" || exit 1
say "$(ls "$dir/vocab" | grep -c '\.gguf$') vocabularies in $dir/vocab"
echo "$dir"

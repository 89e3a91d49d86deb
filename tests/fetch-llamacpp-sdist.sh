#!/bin/sh
# llama.cpp's models/ folder (its chat templates in templates/, its
# tokenizer test vocabularies ggml-vocab-*) and its server test suite
# (tools/server/tests, for bench/llama-server-tests), from the source distribution of
# the PyPI package llama-cpp-python, which vendors llama.cpp (MIT).  Fetched
# once with pip into DIR, checked against its known SHA-256, its
# vendor/llama.cpp/models/ and LICENSE extracted there once; prints the
# models/ folder's path (the LICENSE is beside it, in ../LICENSE).
#
#   sh tests/fetch-llamacpp-sdist.sh DIR
#
# When the package registry cannot be reached it says so on stderr, naming
# what could not be fetched, prints nothing on stdout and exits 1: the
# suites that need the folder then report themselves skipped, with this
# reason.
set -u
dir=${1:?usage: fetch-llamacpp-sdist.sh DIR}
version=0.3.36
sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
name=llama_cpp_python-$version
models=$dir/$name/vendor/llama.cpp/models

tests=$dir/$name/vendor/llama.cpp/tools/server/tests
if [ -f "$dir/$name.extracted" ] && [ -d "$models" ] && [ -d "$tests" ]; then
    echo "$models"
    exit 0
fi
say() { echo "fetch-llamacpp-sdist: $*" >&2; }
mkdir -p "$dir/sdist" || exit 1
sdist=$dir/sdist/$name.tar.gz
if [ ! -s "$sdist" ]; then
    say "downloading llama-cpp-python==$version's source distribution (77 MB) with pip into $dir"
    # --no-binary for this package alone: with :all: pip also builds its
    # build tools (cmake) from source to read the metadata, which fails on
    # a machine without OpenSSL's headers (Debian 13).
    if ! python3 -m pip download -q --retries 2 --no-deps --no-binary llama-cpp-python "llama-cpp-python==$version" \
        -d "$dir/sdist" >"$dir/pip.log" 2>&1 || [ ! -s "$sdist" ]; then
        say "pip could not download llama-cpp-python==$version (its sdist, for llama.cpp's models/ folder:" \
            "chat templates and tokenizer vocabularies): is the package registry reachable?" \
            "The suites that need them will be skipped. pip said:"
        tail -n 3 "$dir/pip.log" >&2
        rm -f "$sdist"
        exit 1
    fi
fi
if [ "$(sha256sum "$sdist" | cut -d' ' -f1)" != "$sha256" ]; then
    say "$sdist does not have the expected SHA-256 ($sha256); not using it"
    rm -f "$sdist"
    exit 1
fi
rm -rf "$dir/$name"
if ! tar -xzf "$sdist" -C "$dir" "$name/vendor/llama.cpp/models" "$name/vendor/llama.cpp/LICENSE" \
    "$name/vendor/llama.cpp/tools/server/tests"; then
    say "could not extract vendor/llama.cpp/models from $sdist"
    exit 1
fi
touch "$dir/$name.extracted" && rm -f "$sdist" "$dir/pip.log"
echo "$models"

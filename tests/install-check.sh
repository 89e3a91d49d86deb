#!/bin/sh
# Installs hetero into a temporary prefix and compiles and runs README.md's
# embedding example against the installed hetero.pc, as a user would.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make -s -C "$top" install PREFIX="$tmp/prefix" >/dev/null
awk '/<!-- example:/{f=1; next} f && /^```c/{g=1; next} g && /^```/{exit} g' "$top/README.md" > "$tmp/example.c"
test -s "$tmp/example.c"
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
cc -std=c11 -Wall -Werror "$tmp/example.c" -o "$tmp/example" $(pkg-config --cflags --libs hetero) -Wl,-rpath,"$tmp/prefix/lib"
out=$(HX_DEVICES=cpu "$tmp/example")
echo "$out"
case "$out" in *"z[21] = 42"*) echo "install-check: ok" ;; *) echo "install-check: wrong output" >&2; exit 1 ;; esac

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
case "$out" in *"z[21] = 42"*) ;; *) echo "install-check: wrong output" >&2; exit 1 ;; esac
# The installed tools link the installed libhetero.so, found through their
# run path ($ORIGIN/../lib): no LD_LIBRARY_PATH, run from elsewhere.
lib=$(cd / && env -u LD_LIBRARY_PATH ldd "$tmp/prefix/bin/hetero-info" | sed -n 's/.*libhetero\.so => \([^ ]*\).*/\1/p')
[ "$(readlink -f "$lib")" = "$(readlink -f "$tmp/prefix/lib/libhetero.so")" ] || { echo "install-check: hetero-info loads '$lib'" >&2; exit 1; }
(cd / && env -u LD_LIBRARY_PATH HX_DEVICES=cpu "$tmp/prefix/bin/hetero-info" --json >/dev/null) ||
    { echo "install-check: the installed hetero-info does not run" >&2; exit 1; }
# The shared library exports the HX_API functions of hetero.h and nothing
# else: the runtime's internal hx_ functions stay out of users' namespace.
grep -v '^#' "$top/include/hetero.h" | grep -o 'HX_API[^(]*(' | sed 's/ *($//; s/.*[ *]//' | sort > "$tmp/api"
nm -D --defined-only "$tmp/prefix/lib/libhetero.so" | awk '{print $3}' | sort > "$tmp/exported"
if ! cmp -s "$tmp/api" "$tmp/exported"; then
    echo "install-check: libhetero.so exports other than hetero.h's HX_API functions:" >&2
    diff "$tmp/api" "$tmp/exported" >&2
    exit 1
fi
echo "install-check: ok ($(wc -l < "$tmp/exported") functions exported, all of hetero.h's HX_API)"

#!/bin/sh
# Plants one wrong-way include of the given form in a copy of the tree's
# sources and runs tools/check-arrows.sh on the copy; prints what the check
# printed and exits with its status (tests/test_arrows.c expects 1, and 0
# for "none", the copy without a plant).  Run from the repository's root.
#
#   sh tests/arrows-plant.sh none|quoted|angled|relative|bare|macro|stale
#   HX_BUILD=build sh tests/arrows-plant.sh prototype
# "prototype" plants a call by a local prototype, which no include shows:
# the check then reads the links of the build's objects (HX_BUILD/obj,
# copied) and of the planted one, compiled with $CC.
set -eu
form=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hx-arrows.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
if [ "$(git rev-parse --show-toplevel 2>/dev/null || true)" = "$(pwd -P)" ]; then
    git ls-files '*.c' '*.h' '*.cu' '*.cuh' '*.cl' tools/arrows-allowed.txt tools/check-arrows.sh
else
    find . \( -name .git -o -name 'build*' \) -prune -o -type f \( -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' \
        -o -name '*.cl' -o -path ./tools/arrows-allowed.txt -o -path ./tools/check-arrows.sh \) -print
fi | while IFS= read -r f; do
    mkdir -p "$tmp/$(dirname "$f")"
    cp "$f" "$tmp/$f"
done

# Each plant names a header that exists, in a room the including room may
# not reach, as a programmer might write it.
case "$form" in
none) ;;
quoted) echo '#include "engine/session.h"' >>"$tmp/runtime/task.c" ;;
angled) echo '#include <engine/session.h>' >>"$tmp/ops/types.c" ;;
relative) echo '#include "../engine/session.h"' >>"$tmp/model/arch.c" ;;
# A bare name the compiler finds through -Iinclude: the OpenCL sources,
# built at run time, may include nothing of the library's.
bare) echo '#include "hetero.h"' >>"$tmp/kernels_cl/attention.cl" ;;
# A header named by a macro: the check cannot tell where it lands.
macro) printf '#define HDR "engine/session.h"\n#include HDR\n' >>"$tmp/gguf/gguf.c" ;;
# An exception no include needs any more.
stale) echo 'text/unicode.c -> engine/session.h' >>"$tmp/tools/arrows-allowed.txt" ;;
# The kernels calling the engine through a prototype of their own.
prototype)
    obj=${HX_BUILD:-build}/obj
    find "$tmp" -name '*.c' | sed "s#^$tmp/##" | while IFS= read -r f; do
        if [ -f "$obj/${f%.c}.o" ]; then
            mkdir -p "$tmp/obj/$(dirname "$f")"
            cp "$obj/${f%.c}.o" "$tmp/obj/${f%.c}.o"
        fi
    done
    cat >"$tmp/kernels_cpu/planted.c" <<'PLANT'
int hx_session_open(void *model, void **out);
int hx_planted(void) { return hx_session_open(0, 0); }
PLANT
    ${CC:-cc} -c -o "$tmp/obj/kernels_cpu/planted.o" "$tmp/kernels_cpu/planted.c"
    sh "$tmp/tools/check-arrows.sh" "$tmp" "$tmp/obj"
    exit
    ;;
*) echo "arrows-plant.sh: unknown form '$form'" >&2; exit 64 ;;
esac
sh "$tmp/tools/check-arrows.sh" "$tmp"

#!/bin/sh
# The arrows of DESIGN.md's rooms table, checked on every #include "room/...".
# A room may include from its own folder and from the rooms listed for it
# below; tests/ may include anything.  An include that crosses an arrow the
# wrong way fails the check unless it is listed, with the including file,
# in tools/arrows-allowed.txt (each entry justified in docs/architecture.md),
# so an old exception stays visible and a new one cannot slip in.
#
# Usage: sh tools/check-arrows.sh [ROOT]   (exit 1 on a wrong-way include)
set -eu
cd "${1:-.}"

# The table, once.  ops/ is the shared vocabulary: every room that may
# reach a room above it may also use ops/ directly.
allowed() {
    case "$1" in
    include) echo "" ;;
    ops) echo "include" ;;
    runtime) echo "include ops" ;;
    kernels_cpu) echo "include ops" ;;
    kernels_cl) echo "" ;;
    kernels_cu) echo "include ops" ;;
    devices) echo "include runtime ops kernels_cpu kernels_cl kernels_cu" ;;
    text) echo "include runtime ops" ;;
    model) echo "include runtime ops text" ;;
    partitioner) echo "include runtime model ops" ;;
    engine) echo "include partitioner model runtime ops" ;;
    tools) echo "include" ;;
    # bench/ shares the tools' header-only command-line helpers (tools/cli_num.h).
    bench) echo "include tools" ;;
    tests) echo "*" ;;
    *) echo "" ;;
    esac
}

ALLOW_FILE=tools/arrows-allowed.txt
bad=0
listed=0
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    files=$(git ls-files '*.c' '*.h' '*.cu' '*.cuh' '*.cl')
else
    files=$(find . -type f \( -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cl' \) | sed 's#^\./##')
fi
for f in $files; do
    room=${f%%/*}
    [ "$room" = "$f" ] && continue
    ok=$(allowed "$room")
    [ "$ok" = "*" ] && continue
    # #include "room/file.h": the first path component names the room.
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_0-9]*\)\/\([^"]*\)".*/\1\/\2/p' "$f"); do
        target=${inc%%/*}
        [ "$target" = "$room" ] && continue
        case " $ok " in *" $target "*) continue ;; esac
        if [ -f "$ALLOW_FILE" ] && grep -qx "$f -> $inc" "$ALLOW_FILE"; then
            listed=$((listed + 1))
            continue
        fi
        echo "check-arrows: $f includes \"$inc\": $room/ may include from: ${ok:-nothing}" >&2
        bad=$((bad + 1))
    done
done
if [ "$bad" -ne 0 ]; then
    echo "check-arrows: $bad wrong-way include(s); see DESIGN.md's rooms and docs/architecture.md" >&2
    exit 1
fi
echo "check-arrows: every include follows the arrows ($listed listed exception(s) in $ALLOW_FILE)"

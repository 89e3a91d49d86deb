#!/bin/sh
# The arrows of DESIGN.md's rooms table, checked on every #include.
# A room may include from its own folder and from the rooms listed for it
# below; tests/ may include anything.  An include that crosses an arrow the
# wrong way fails the check unless it is listed, with the including file,
# in tools/arrows-allowed.txt (each entry justified in docs/architecture.md),
# so an old exception stays visible and a new one cannot slip in; an entry
# that no longer matches an include fails too, so the list cannot rot.
#
# Every form the compiler accepts is resolved as the compiler resolves it
# (the Makefile's -I. -Iinclude): #include "room/x.h", #include <room/x.h>,
# a relative "../room/x.h", and a bare "x.h" found beside the including
# file; the room is the first folder of the resolved path.  An include of
# a path in no room (<stdio.h>, "hetero.h" through -Iinclude) is no arrow.
# One that names a header by a macro cannot be resolved and is refused.
#
# Given the build's object folder, it checks the links too: a function one
# room calls and another defines follows the same arrows, so a local
# prototype (or a declaration in a lower room of what a higher one
# defines) cannot carry a call the wrong way.  An object counts only while
# its source exists (a moved file's old object is ignored).
#
# Usage: sh tools/check-arrows.sh [ROOT [OBJDIR]]   (exit 1 on a wrong-way
# include or call)
set -eu
cd "${1:-.}"
OBJDIR=${2:-}

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
    gguf) echo "include runtime ops" ;;
    text) echo "include gguf runtime ops" ;;
    model) echo "include gguf text runtime ops" ;;
    quantize) echo "include model text gguf kernels_cpu runtime ops" ;;
    partitioner) echo "include runtime model ops" ;;
    engine) echo "include partitioner model text runtime ops" ;;
    # the pipeline's transport over MPI: it hands the engine its link
    # (engine/pipeline.h) and the model its stage (model/stage.c)
    dist) echo "include engine partitioner model text runtime ops" ;;
    tools) echo "include" ;;
    # bench/ shares the tools' header-only command-line helpers (tools/cli_num.h).
    bench) echo "include tools" ;;
    tests) echo "*" ;;
    *) echo "" ;;
    esac
}
ROOMS="include ops runtime kernels_cpu kernels_cl kernels_cu devices gguf text model quantize partitioner engine
       dist bitstreams tools bench tests"

ALLOW_FILE=tools/arrows-allowed.txt
table=$(for r in $ROOMS; do printf '%s|%s\n' "$r" "$(allowed "$r")"; done)

# The sources: git's list inside a checkout (ROOT its top), else every
# source file outside build folders (a copy, an unpacked tarball).
if [ "$(git rev-parse --show-toplevel 2>/dev/null || true)" = "$(pwd -P)" ]; then
    files=$(git ls-files '*.c' '*.h' '*.cu' '*.cuh' '*.cl')
else
    files=$(find . \( -name .git -o -name 'build*' \) -prune -o -type f \
        \( -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cl' \) -print | sed 's#^\./##' | sort)
fi

status=0
printf '%s\n' "$files" | awk -v table="$table" -v allow_file="$ALLOW_FILE" '
function exists(p,    line, r) {
    if (p in seen) return seen[p]
    r = (getline line < p) >= 0
    close(p)
    seen[p] = r
    return r
}
# a/b/../c -> a/c; ./a -> a; a path that climbs out of the tree -> ""
function normalize(p,    n, i, k, part, out) {
    n = split(p, part, "/")
    k = 0
    for (i = 1; i <= n; i++) {
        if (part[i] == "" || part[i] == ".") continue
        if (part[i] == "..") { if (k == 0) return ""; k--; continue }
        out[++k] = part[i]
    }
    p = ""
    for (i = 1; i <= k; i++) p = p (i > 1 ? "/" : "") out[i]
    return p
}
function dirname(p) { return p ~ /\// ? substr(p, 1, match(p, /\/[^\/]*$/) - 1) : "" }
function room_of(p,    r) {
    if (p !~ /\//) return ""
    r = substr(p, 1, index(p, "/") - 1)
    return (r in may) ? r : ""
}
# The path an include names, as the compiler finds it; "" when it is in
# no room of the tree (a system header).
function resolve(f, form, name,    d, p) {
    if (form == "\"") {
        d = dirname(f)
        p = normalize((d == "" ? "" : d "/") name)
        if (p != "" && exists(p)) return p
    }
    p = normalize(name)
    if (p != "" && exists(p)) return p
    p = normalize("include/" name)
    if (p != "" && exists(p)) return p
    # Not found (a header still to be written, a typo): the compiler will
    # say so; the arrow is judged by the path as written.
    p = normalize(name)
    return room_of(p) != "" ? p : ""
}
BEGIN {
    n = split(table, line, "\n")
    for (i = 1; i <= n; i++) {
        split(line[i], kv, "|")
        may[kv[1]] = " " kv[2] " "
    }
    while ((getline l < allow_file) > 0) {
        if (l ~ /^[ \t]*(#|$)/) continue
        listed[l] = 0
        order[++nlisted] = l
    }
    close(allow_file)
    bad = 0
}
{
    f = $0
    room = room_of(f)
    if (room == "" || may[room] == " * ") next
    lineno = 0
    while ((getline src < f) > 0) {
        lineno++
        if (src !~ /^[ \t]*#[ \t]*include/) continue
        rest = src
        sub(/^[ \t]*#[ \t]*include(_next)?[ \t]*/, "", rest)
        form = substr(rest, 1, 1)
        if (form == "<") close_ch = ">"
        else if (form == "\"") close_ch = "\""
        else {
            printf "check-arrows: %s:%d: #include names no header the check can resolve: %s\n", f, lineno, src > "/dev/stderr"
            bad++
            continue
        }
        rest = substr(rest, 2)
        name = substr(rest, 1, index(rest, close_ch) - 1)
        target = resolve(f, form, name)
        troom = room_of(target)
        if (troom == "" || troom == room || index(may[room], " " troom " ")) continue
        key = f " -> " target
        if (key in listed) { listed[key]++; continue }
        shown = form name close_ch
        printf "check-arrows: %s:%d includes %s (%s/): %s/ may include from: %s\n", f, lineno, shown, troom, room,
            (may[room] ~ /^ *$/ ? "nothing" : substr(may[room], 2, length(may[room]) - 2)) > "/dev/stderr"
        bad++
    }
    close(f)
}
END {
    used = 0
    for (i = 1; i <= nlisted; i++) {
        if (listed[order[i]]) { used++; continue }
        printf "check-arrows: %s lists \"%s\", which no include needs: remove it\n", allow_file, order[i] > "/dev/stderr"
        bad++
    }
    if (bad) {
        printf "check-arrows: %d wrong-way include(s) or stale exception(s); see DESIGN.md'"'"'s rooms and docs/architecture.md\n", bad > "/dev/stderr"
        exit 1
    }
    printf "check-arrows: every include follows the arrows (%d listed exception(s) in %s)\n", used, allow_file
}' || status=1

# The links: "symbol room" for every global definition, "symbol room
# object" for every undefined reference, joined on the symbol.
if [ -n "$OBJDIR" ]; then
    objs=$(printf '%s\n' "$files" | sed -n "s#^\([a-z_0-9]*\)/\([^/]*\)\.c\$#\1/\2#p" | while read -r f; do
        if [ -f "$OBJDIR/$f.o" ]; then echo "$f"; fi
    done)
    if [ -z "$objs" ]; then
        echo "check-arrows: no object of a source under $OBJDIR: build first" >&2
        exit 1
    fi
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/hx-links.XXXXXX")
    paths=$(for f in $objs; do echo "$OBJDIR/$f.o"; done)
    # nm -A: "OBJDIR/room/file.o: [address] type symbol"
    # shellcheck disable=SC2086
    nm -A --defined-only -g $paths | awk -v o="$OBJDIR/" '
        NF >= 3 && $(NF - 1) ~ /^[TDBRVW]$/ { f = substr($1, length(o) + 1); print $NF, substr(f, 1, index(f, "/") - 1) }' |
        sort -u >"$tmp/defs"
    # shellcheck disable=SC2086
    nm -A -u $paths | awk -v o="$OBJDIR/" '
        { f = substr($1, length(o) + 1); sub(/\.o:$/, ".c", f); print $NF, substr(f, 1, index(f, "/") - 1), f }' |
        sort >"$tmp/uses"
    join "$tmp/uses" "$tmp/defs" | awk -v table="$table" '
    BEGIN {
        n = split(table, line, "\n")
        for (i = 1; i <= n; i++) { split(line[i], kv, "|"); may[kv[1]] = " " kv[2] " " }
        bad = 0
    }
    # symbol, calling room, calling file, defining room
    $2 != $4 && may[$2] != " * " && !index(may[$2], " " $4 " ") {
        printf "check-arrows: %s calls %s, defined in %s/: %s/ may reach: %s\n", $3, $1, $4, $2,
            (may[$2] ~ /^ *$/ ? "nothing" : substr(may[$2], 2, length(may[$2]) - 2)) > "/dev/stderr"
        bad++
    }
    END {
        if (bad) { printf "check-arrows: %d wrong-way call(s)\n", bad > "/dev/stderr"; exit 1 }
        print "check-arrows: every call from one room to another follows the arrows"
    }' || status=1
    rm -rf "$tmp"
fi
exit $status

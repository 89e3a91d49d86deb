#!/bin/sh
# Compiles and runs the C examples of include/hetero.h and README.md against
# the build, taken from the files themselves so that they cannot drift from
# the API:
#   - hetero.h: each indented block of a comment that starts with a line
#     "// example: NAME" (to the first line that is not indented as deep).
#     A block is a fragment: it runs inside main() after this script's
#     set-up for NAME (a runtime, a model ...), and the checks for NAME
#     follow it (a fragment without set-up here is an error);
#   - README.md: each ```c block after a line "<!-- example: NAME ... -->",
#     a whole program, whose output must hold what this script expects.
#
#   sh tests/check-examples.sh BUILD [HEADER [README]]
#
# Compiled with -Wall -Wextra -Werror against include/hetero.h, so a
# planted wrong argument in a copy of the files fails it too.  Exits 1 naming
# each example that did not compile or run as expected.
set -u
build=$(cd "${1:?usage: check-examples.sh BUILD [HEADER [README]]}" && pwd)
top=$(cd "$(dirname "$0")/.." && pwd)
header=${2:-$top/include/hetero.h}
readme=${3:-$top/README.md}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hx-examples-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cc=${CC:-cc}
fails=0 runs=0
fail() { echo "check-examples: $*" >&2; fails=$((fails + 1)); }

# Each example of FILE written to $tmp/NAME.frag (header) or NAME.c (README).
awk -v dir="$tmp" '
/^ \*     \/\/ example: / { name = $4; out = dir "/" name ".frag"; printf "" > out; next }
out != "" && /^ \*     / { sub(/^ \*     /, ""); print >> out; next }
{ out = "" }' "$header"
awk -v dir="$tmp" '
/<!-- example: / { name = $3; next }
name != "" && /^```c/ { out = dir "/" name ".c"; printf "" > out; next }
out != "" && /^```/ { out = ""; name = ""; next }
out != "" { print >> out }' "$readme"

# The set-up before and the checks after each header fragment.
before() {
    case $1 in
    runtime) echo 'size_t n = 1024;' ;;
    model) cat <<'EOF'
hx_runtime *rt;
if (hx_runtime_open(&rt, NULL) != HX_OK || hx_model_write_synthetic("model.gguf", "tiny", "q8_0", 1) != HX_OK)
    return fprintf(stderr, "set-up: %s\n", hx_last_error()), 1;
EOF
    ;;
    embeddings) cat <<'EOF'
hx_runtime *rt;
hx_model *m;
if (hx_runtime_open(&rt, NULL) != HX_OK || hx_model_write_synthetic("model.gguf", "tiny", "q8_0", 1) != HX_OK ||
    hx_model_load(rt, "model.gguf", NULL, &m) != HX_OK)
    return fprintf(stderr, "set-up: %s\n", hx_last_error()), 1;
EOF
    ;;
    engine) cat <<'EOF'
hx_runtime *rt;
hx_model *model;
if (hx_runtime_open(&rt, NULL) != HX_OK || hx_model_write_synthetic("model.gguf", "tiny", "q8_0", 1) != HX_OK ||
    hx_model_load(rt, "model.gguf", NULL, &model) != HX_OK)
    return fprintf(stderr, "set-up: %s\n", hx_last_error()), 1;
EOF
    ;;
    *) return 1 ;;
    esac
}
after() {
    case $1 in
    runtime) echo 'puts("runtime: opened and closed"); return 0;' ;;
    model) cat <<'EOF'
if (!logits || n < 2) return fprintf(stderr, "no logits for %zu tokens: %s\n", n, hx_last_error()), 1;
printf("model: %zu prompt tokens, logits[0] = %g\n", n, logits[0]);
hx_session_close(s), hx_model_free(m), hx_runtime_close(rt);
return 0;
EOF
    ;;
    embeddings) cat <<'EOF'
hx_model_info mi;
hx_model_info_get(m, &mi);
double len2 = 0;
for (size_t i = 0; i < mi.n_embd; i++) len2 += (double)out[i] * out[i];
if (n_out != 2 * mi.n_embd || len2 < 0.9999 || len2 > 1.0001)
    return fprintf(stderr, "embeddings: %zu floats, |e0|^2 = %g: %s\n", n_out, len2, hx_last_error()), 1;
printf("embeddings: 2 inputs of %u floats, |e0| = 1\n", mi.n_embd);
hx_model_free(m), hx_runtime_close(rt);
return 0;
EOF
    ;;
    engine) cat <<'EOF'
if (res.status != HX_OK || res.stats.generated_tokens != 32)
    return fprintf(stderr, "request: %s, %u tokens: %s\n", hx_status_str(res.status),
                   res.stats.generated_tokens, res.error), 1;
printf("engine: %u tokens, %s, %d pieces seen\n", res.stats.generated_tokens,
       hx_finish_reason_str(res.stats.finish), pieces);
hx_model_free(model), hx_runtime_close(rt);
return pieces == 32 ? 0 : 1;
EOF
    ;;
    esac
}
# What a README program must print.
expect() {
    case $1 in
    vector_add) echo 'z[21] = 42' ;;
    *) return 1 ;;
    esac
}

compile() { # NAME SRC
    # HX_EXAMPLE_FLAGS: what the library was linked with that a program
    # linking it needs too (make asan's sanitizers, whose runtime must come
    # first).
    # shellcheck disable=SC2086
    if ! "$cc" -std=c11 -Wall -Wextra -Werror -I"$top/include" "$2" -o "$tmp/$1" \
        -L"$build" -lhetero -Wl,-rpath,"$build" -lm ${HX_EXAMPLE_FLAGS:-} 2>"$tmp/$1.cc.log"; then
        fail "example '$1' does not compile:"
        sed 's/^/  /' "$tmp/$1.cc.log" >&2
        return 1
    fi
}
run() { # NAME -> its output in $tmp/NAME.out
    runs=$((runs + 1))
    if ! (cd "$tmp" && HX_DEVICES=cpu timeout 120 "./$1") >"$tmp/$1.out" 2>&1; then
        fail "example '$1' did not run to success:"
        sed 's/^/  /' "$tmp/$1.out" >&2
        return 1
    fi
    sed "s/^/  $1: /" "$tmp/$1.out"
}

nh=0 nr=0
for frag in "$tmp"/*.frag; do
    [ -e "$frag" ] || break
    name=$(basename "$frag" .frag)
    nh=$((nh + 1))
    if ! before "$name" >/dev/null; then
        fail "hetero.h's example '$name' has no set-up in tests/check-examples.sh"
        continue
    fi
    {
        echo '#include <hetero.h>'
        echo '#include <stdio.h>'
        echo 'static int pieces;'
        echo 'static int cb(void *user, const hx_engine_token *t) { (void)user; pieces += !t->last; return 0; }'
        echo 'int main(void)'
        echo '{'
        echo '(void)cb;'
        before "$name"
        echo '{'
        echo "#line 1 \"hetero.h example $name\""
        cat "$frag"
        echo '#line 1000 "check-examples checks"'
        after "$name"
        echo '}'
        echo '}'
    } >"$tmp/$name.c"
    compile "$name" "$tmp/$name.c" && run "$name"
done
for src in "$tmp"/*.c; do
    [ -e "$src" ] || break
    name=$(basename "$src" .c)
    [ -e "$tmp/$name.frag" ] && continue
    nr=$((nr + 1))
    if ! want=$(expect "$name"); then
        fail "README.md's example '$name' has no expected output in tests/check-examples.sh"
        continue
    fi
    compile "$name" "$src" && run "$name" || continue
    grep -qF "$want" "$tmp/$name.out" || fail "README.md's example '$name' does not print '$want'"
done
[ "$nh" -ge 1 ] || fail "no '// example:' block found in $header"
[ "$nr" -ge 1 ] || fail "no '<!-- example: -->' block found in $readme"
if [ "$fails" -ne 0 ]; then
    echo "check-examples: $fails of $((nh + nr)) examples failed" >&2
    exit 1
fi
echo "check-examples: $nh examples of $(basename "$header") and $nr of $(basename "$readme") compiled and run"

#!/bin/sh
# Writes llama-quantize's per-tensor type choices as test vectors for the
# recipe table (tests/test_quant_recipe.c):
#   tests/gen-quant-recipes.sh LLAMA_QUANTIZE MODEL.gguf NAME N_LAYER N_HEAD N_HEAD_KV VARIANT RECIPE [FLAGS...]
# (N_EXPERT=N in the environment for a file with experts) writes
# tests/fixtures/quant-recipes/NAME.VARIANT.txt, one line per tensor
# in llama-quantize's order: name, ne0, ne1, ne2, its type in MODEL, the
# type llama-quantize --dry-run chooses.
set -eu
q=$1 model=$2 name=$3 n_layer=$4 n_head=$5 n_head_kv=$6 variant=$7 recipe=$8
shift 8
out=tests/fixtures/quant-recipes/$name.$variant.txt
ver=$("$q" --dry-run "$model" F32 2>&1 | sed -n 's/^version: //p' | head -n 1)
{
    echo "# llama-quantize --dry-run $*${*:+ }MODEL $recipe (llama.cpp $ver) on $name"
    echo "# model n_layer $n_layer n_head $n_head n_head_kv $n_head_kv${N_EXPERT:+ n_expert $N_EXPERT}"
    "$q" --dry-run "$@" "$model" "$recipe" 2>&1 | tr -d , |
        awk '/^\[ *[0-9]+\/ *[0-9]+\]/ {
                 sub(/^\[[^]]*\] */, "");
                 name = $1; ne0 = $4; ne1 = $5; ne2 = $6; from = $10;
                 to = from;
                 if ($NF ~ /^\(.*\)$/) { to = $NF; gsub(/[()]/, "", to) }
                 print name, ne0, ne1, ne2, from, to
             }'
} > "$out.tmp"
mv "$out.tmp" "$out"
echo "$out: $(grep -vc '^#' "$out") tensors"

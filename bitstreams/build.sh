#!/bin/sh
# Builds the FPGA bitstream of one platform with Vitis:
#   bitstreams/build.sh TARGET PLATFORM [OUTDIR]
# TARGET is sw_emu, hw_emu or hw; PLATFORM a platform of
# bitstreams/manifest.txt.  Each kernel the manifest lists is compiled
# (v++ -c) from its kernels_cl/ file, then all are linked (v++ -l) into the
# platform's .xclbin in OUTDIR/TARGET/PLATFORM.  Where v++ is missing the
# script prints what it would run and fails.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
manifest=$here/manifest.txt
target=${1:-}
platform=${2:-}
outroot=${3:-$root/build/bitstreams}

usage() {
  echo "usage: make bitstreams TARGET=sw_emu|hw_emu|hw PLATFORM=<platform>" >&2
  echo "platforms in bitstreams/manifest.txt:" >&2
  awk '$1 == "platform" { print "  " $2 }' "$manifest" >&2
  exit 2
}

case "$target" in
  sw_emu|hw_emu|hw) ;;
  *) echo "bitstreams: TARGET='$target' is not sw_emu, hw_emu or hw" >&2; usage ;;
esac
[ -n "$platform" ] || { echo "bitstreams: no PLATFORM given" >&2; usage; }

if [ "$platform" = pocl-emulation ]; then
  echo "bitstreams: pocl-emulation needs no bitstream: PoCL builds the manifest's kernels from source at run time"
  exit 0
fi

# The platform's line and its kernels, as "xclbin <file>" / "kernel <name> <program>".
entries=$(awk -v p="$platform" '
  { sub(/#.*/, "") }
  $1 == "platform" { inside = ($2 == p); if (inside) print "xclbin", $3; next }
  inside && $1 == "kernel" { print "kernel", $2, $3 }' "$manifest")
xclbin=$(echo "$entries" | awk '$1 == "xclbin" { print $2 }')
[ -n "$xclbin" ] || { echo "bitstreams: platform '$platform' is not in bitstreams/manifest.txt" >&2; usage; }
echo "$entries" | grep -q '^kernel ' || { echo "bitstreams: platform '$platform' lists no kernel" >&2; exit 2; }

out=$outroot/$target/$platform
commands=$(echo "$entries" | awk -v t="$target" -v p="$platform" -v o="$out" -v r="$root" -v x="$xclbin" '
  $1 == "kernel" {
    printf "v++ -c -t %s --platform %s -k %s -I %s/kernels_cl -o %s/%s.xo %s/kernels_cl/%s.cl\n", t, p, $2, r, o, $2, r, $3
    xo = xo " " o "/" $2 ".xo"
  }
  END {
    printf "v++ -l -t %s --platform %s -o %s/%s%s\n", t, p, o, x, xo
    if (t != "hw") printf "emconfigutil --platform %s --od %s\n", p, o
  }')

if ! command -v v++ >/dev/null 2>&1; then
  echo "bitstreams: would run:"
  echo "$commands" | sed 's/^/  /'
  echo "bitstreams: v++ not found on PATH: install AMD Vitis and source its settings64.sh (and XRT's setup.sh), then rerun" >&2
  exit 1
fi

mkdir -p "$out"
echo "$commands" | while IFS= read -r cmd; do
  echo "  $cmd"
  sh -c "$cmd"
done
echo "bitstreams: $out/$xclbin built; run with HX_BITSTREAM_DIR=$out"
if [ "$target" != hw ]; then
  echo "bitstreams: for emulation also set XCL_EMULATION_MODE=$target and EMCONFIG_PATH=$out"
fi

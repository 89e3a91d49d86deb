#!/bin/sh
# Makes sure the python3 the test suites call has the packages of
# tests/requirements.txt (the independent references: llama.cpp's gguf
# reader, numpy, jsonschema), as tools/install-deps.sh does for Debian
# packages: when the python3 on PATH lacks one, they go into a virtual
# environment that `make test` puts first on PATH.
#
#   sh tools/test-python.sh VENV REQUIREMENTS STAMP
set -e
venv=$1 req=$2 stamp=$3
names=$(sed -e 's/#.*//' -e 's/[<>=!~;[ ].*//' "$req" | grep -v '^$' | tr '\n' ' ' | sed 's/ $//')

# Whether python $1 has every distribution named in the requirements.
has_all() {
  "$1" - $names >/dev/null 2>&1 <<'EOF'
import importlib.metadata, sys
for name in sys.argv[1:]:
    importlib.metadata.version(name)
EOF
}

if has_all python3; then
  echo "python3 on PATH has $names" > "$stamp"
  exit 0
fi
if [ ! -x "$venv/bin/python3" ]; then
  echo "hetero: python3 lacks some of $names; installing $req into $venv" >&2
  if ! python3 -m venv "$venv"; then
    echo "hetero: 'python3 -m venv' failed: install python3-venv (sh tools/install-deps.sh), or $names" >&2
    rm -rf "$venv"
    exit 1
  fi
fi
if ! has_all "$venv/bin/python3"; then
  if ! "$venv/bin/python3" -m pip install -q --disable-pip-version-check -r "$req"; then
    echo "hetero: could not install $req into $venv (is the Python package index reachable? pip said why" \
         "above); the suites that compare against numpy and llama.cpp's gguf reader need them" >&2
    exit 1
  fi
fi
echo "$venv/bin/python3 has $names" > "$stamp"

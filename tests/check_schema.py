#!/usr/bin/env python3
"""Validates a JSON document against a JSON Schema: check_schema.py SCHEMA DOC.
Exit 0 when valid, 1 when not, 3 when the jsonschema package is missing."""
import json
import sys

try:
    import jsonschema
except ImportError:
    print("check_schema.py: the Python package 'jsonschema' is missing: "
          "pip install -r tests/requirements.txt", file=sys.stderr)
    sys.exit(3)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        schema = json.load(f)
    with open(sys.argv[2]) as f:
        doc = json.load(f)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    errors = sorted(cls(schema).iter_errors(doc), key=lambda e: list(e.absolute_path))
    for e in errors:
        print("%s: %s: %s" % (sys.argv[2], "/".join(map(str, e.absolute_path)) or "(root)", e.message),
              file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

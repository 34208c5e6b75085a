#!/usr/bin/env bash
# Validates `gantry detect --json` on this machine and on every fixture tree under
# tests/fixtures/hw against schema/registry.schema.json (Debian's python3-jsonschema).
set -euo pipefail
build=${1:?usage: detect_schema.sh BUILD_DIR}
gantry="$build/bin/gantry"
[[ -x "$gantry" ]] || { echo "FAIL: $gantry is not built"; exit 1; }
/usr/bin/python3 -c 'import jsonschema' 2>/dev/null || { echo "FAIL: python3-jsonschema is missing (apt-get install python3-jsonschema)"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

"$gantry" detect --json > "$tmp/local.json"
for dir in tests/fixtures/hw/*/; do
  name=$(basename "$dir")
  "$gantry" detect --json --sysroot "$dir" > "$tmp/fixture-$name.json"
done

/usr/bin/python3 - "$tmp" <<'PY'
import json, pathlib, sys
from jsonschema import Draft202012Validator
schema = json.load(open("schema/registry.schema.json"))
Draft202012Validator.check_schema(schema)
validator = Draft202012Validator(schema)
files = sorted(pathlib.Path(sys.argv[1]).glob("*.json"))
bad = 0
for f in files:
    doc = json.load(open(f))
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    for e in errors:
        print(f"{f.name}: {'/'.join(map(str, e.path)) or '(root)'}: {e.message}")
    bad += bool(errors)
# The schema must also reject what it should: a wrong kind, a string byte count, a missing key.
doc = json.load(open(files[0]))
for mutate, what in [(lambda d: d["devices"][0].__setitem__("kind", "fpga"), "unknown kind"),
                     (lambda d: d["host"].__setitem__("memory_total_bytes", "24GB"), "bytes as a string"),
                     (lambda d: d.pop("schema_version"), "missing schema_version")]:
    d = json.loads(json.dumps(doc)); mutate(d)
    if validator.is_valid(d):
        print(f"schema accepted a document with {what}"); bad += 1
print(f"validated {len(files)} documents, {bad} failures")
sys.exit(1 if bad else 0)
PY

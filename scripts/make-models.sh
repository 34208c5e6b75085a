#!/usr/bin/env bash
# Generates the deterministic test/benchmark models into $CACHE/models. Each generator is
# scripts/models/<name>.py (or .sh), called as: <generator> <models-dir> <cache-dir>.
# A generator is re-run only when its own bytes change (stamp = its sha256), so a second set-up is instant.
# Usage: make-models.sh CACHE_DIR [GENERATOR...]   (GENERATOR: a file name under scripts/models/, e.g. mlp.py;
# none: every generator)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${1:?usage: make-models.sh CACHE_DIR [GENERATOR...]}
shift
only=("$@")
OUT="$CACHE/models"; mkdir -p "$OUT" "$CACHE/stamps"
# Debian's python3 has numpy/onnx; a pyenv python earlier on PATH may not.
PY=/usr/bin/python3
shopt -s nullglob
for name in "${only[@]}"; do
  [[ -f "$ROOT/scripts/models/$name" ]] || { echo "gantry setup: FAILED: no model generator scripts/models/$name" >&2; exit 1; }
done
for gen in "$ROOT"/scripts/models/*.py "$ROOT"/scripts/models/*.sh; do
  [[ -f "$gen" ]] || continue
  name=$(basename "$gen"); stamp="$CACHE/stamps/model-$name"
  if ((${#only[@]})) && [[ " ${only[*]} " != *" $name "* ]]; then continue; fi
  # The stamp covers the generator, the helper sources beside it (e.g. a C++ tool it compiles) and the
  # modules the generators share (scripts/lib/*.py, e.g. gguf_write.py).
  helpers=("$ROOT"/scripts/models/*.c "$ROOT"/scripts/models/*.cpp "$ROOT"/scripts/models/*.h "$ROOT"/scripts/lib/*.py)
  sum=$(cat "$gen" "${helpers[@]}" | sha256sum | cut -d' ' -f1)
  [[ -f "$stamp" && "$(cat "$stamp")" == "$sum" ]] && continue
  echo "gantry setup: generating models with scripts/models/$name" >&2
  case "$gen" in
    *.py) "$PY" "$gen" "$OUT" "$CACHE" ;;
    *.sh) bash "$gen" "$OUT" "$CACHE" ;;
  esac || { echo "gantry setup: FAILED: model generator scripts/models/$name" >&2; exit 1; }
  echo "$sum" >"$stamp"
done

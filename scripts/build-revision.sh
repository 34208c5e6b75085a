#!/usr/bin/env bash
# scripts/build-revision.sh REV DIR: builds an earlier revision of this repository beside this checkout, for the
# benchmarks that compare two builds in one run (bench/onnx_overhead_new_vs_old.sh, and
# bench/serve_gguf_vs_llama_server.sh with GANTRY_OLD_BUILD_DIR). DIR becomes a git worktree at REV (detached)
# sharing this checkout's dependency cache (.cache, a link: run `make setup` first); its build is DIR/build.
# Only what the comparisons run is built (TARGETS, default: gantry, the engine, onnx_overhead_bench).
# Then: GANTRY_OLD_BUILD_DIR=DIR/build bash bench/onnx_overhead_new_vs_old.sh
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -eq 2 ]] || { echo "usage: scripts/build-revision.sh REV DIR" >&2; exit 2; }
rev=$1 dir=$2
TARGETS=${TARGETS:-gantry gantry_engine onnx_overhead_bench}
[[ -d .cache ]] || { echo "build-revision: no .cache here: run make setup first" >&2; exit 1; }
if [[ ! -e $dir ]]; then
  git worktree add --detach "$dir" "$rev"
else
  [[ "$(git -C "$dir" rev-parse HEAD)" == "$(git rev-parse "$rev^{commit}")" ]] ||
    { echo "build-revision: $dir exists and is not at $rev" >&2; exit 1; }
fi
[[ -e $dir/.cache ]] || ln -s "$(pwd)/.cache" "$dir/.cache"
cd "$dir"
[[ -f build/build.ninja ]] || cmake --preset default >/dev/null
# shellcheck disable=SC2086  # TARGETS is a list
cmake --build --preset default -j "$(nproc)" --target $TARGETS
echo "build-revision: $rev built in $dir/build"

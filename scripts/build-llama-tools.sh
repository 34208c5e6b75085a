#!/usr/bin/env bash
# Builds llama.cpp's reference tools for the benchmarks (llama-bench, llama-server, ggml-rpc-server; make
# test's llama-simple is compiled with the tests) from the same source commit as the library setup.sh
# installed, with the same compile flags, into CACHE/llama/tools-build.
# The tools run against the very same installed libllama/libggml (their RUNPATH points at
# CACHE/llama/install/lib first), so a comparison with Gantry measures the caller, not the library.
# Usage: build-llama-tools.sh CACHE_DIR   (idempotent: a stamp makes a second run instant)
set -euo pipefail

CACHE=${1:?usage: build-llama-tools.sh CACHE_DIR}
CACHE=$(cd "$CACHE" && pwd)
JOBS=${JOBS:-$(nproc)}
LLAMA_COMMIT=de3ff815ea7d559ee917f063901b8986f038abc6
src="$CACHE/llama/src" prefix="$CACHE/llama/install" build="$CACHE/llama/tools-build"
want="$LLAMA_COMMIT tools-v3-server-rpc"
tools=(llama-bench llama-server ggml-rpc-server)
stamp="$CACHE/stamps/llama-tools"

fail() { echo "gantry setup: FAILED: $*" >&2; exit 1; }

all_built() { local t; for t in "${tools[@]}"; do [[ -x "$build/bin/$t" ]] || return 1; done; }
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && all_built; then
  exit 0
fi
[[ -d "$src/.git" ]] || fail "llama.cpp source missing at $src (run scripts/setup.sh deps first)"
[[ -f "$prefix/lib/libllama.so" ]] || fail "installed libllama missing in $prefix/lib (run scripts/setup.sh deps first)"
head=$(git -C "$src" rev-parse HEAD)
[[ "$head" == "$LLAMA_COMMIT" ]] || fail "llama.cpp source at $head, expected $LLAMA_COMMIT"

echo "gantry setup: building llama.cpp's ${tools[*]} (~10 min on 2 cores)" >&2
mkdir -p "$build" "$CACHE/stamps"
# Same flags as setup.sh's library build; only tools/examples/common/server switched on.
# The server's web UI is off and so is its prebuilt-UI download (LLAMA_USE_PREBUILT_UI): the build needs
# neither npm nor network; llama-server then embeds an empty asset table (the API is unaffected).
# CMAKE_BUILD_RPATH puts the installed library directory first, so the tools load the installed
# libllama/libggml (same SONAME, same sources and flags) rather than this tree's copies.
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=OFF -DGGML_OPENMP=ON -DGGML_OPENMP_FETCH=OFF -DGGML_CCACHE=OFF -DGGML_RPC=ON \
  -DLLAMA_BUILD_NUMBER=0 -DLLAMA_BUILD_COMMIT=de3ff815 \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_COMMON=ON -DLLAMA_CURL=OFF -DLLAMA_LLGUIDANCE=OFF -DLLAMA_OPENSSL=OFF \
  -DCMAKE_BUILD_RPATH="$prefix/lib" \
  >"$build/configure.log" 2>&1 || fail "configuring llama.cpp tools (see $build/configure.log)"
cmake --build "$build" -j "$JOBS" --target "${tools[@]}" >"$build/build.log" 2>&1 \
  || fail "building ${tools[*]} (see $build/build.log)"

# Check the tools really resolve the installed library.
for tool in "${tools[@]}"; do
  want_lib=libllama.so.0
  [[ "$tool" == ggml-rpc-server ]] && want_lib=libggml.so.0  # ggml's RPC server links ggml only
  lib=$(ldd "$build/bin/$tool" | awk -v l="$want_lib" '$1==l {print $3}')
  [[ "$lib" == "$prefix/lib/$want_lib" ]] || fail "$tool loads $want_lib from '$lib', expected $prefix/lib/$want_lib"
done
echo "$want" >"$stamp"

#!/usr/bin/env bash
# The CUDA variant of the bundle, built where it is fast: on the GPU machine (16 cores, nvcc, CUDA 13, no
# package registry, no Debian build dependencies). Step by step in docs/dist.md.
#
#   scripts/dist-cuda.sh prepare          HERE (the build machine, after `make dist-check`):
#       dist/cuda-inputs/llama-src.tar.zst   llama.cpp's source at the commit the CPU bundle was built from
#                                            (.cache/llama/src; only what a library build needs, ~4 MB)
#       dist/cuda-inputs/tools/              patchelf and zstd with their libraries (the GPU image has neither)
#       dist/cuda-inputs/ort-cuda-ep.tar.zst.part-NN   ONNX Runtime's CUDA EP plugin in 60 MB parts, when the
#                                            set-up fetched it (GANTRY_WITH_CUDA_EP=1 scripts/setup.sh deps)
#   scripts/dist-cuda.sh stash            THERE, after each call that carried inputs: moves whatever of the above
#                                            (and dist/*.tar.zst) arrived into $STASH (default /tmp/gantry-cuda)
#   scripts/dist-cuda.sh build [-j N]     THERE: llama.cpp with GGML_CUDA=ON, GGML_BACKEND_DL=ON,
#                                            GGML_CUDA_NCCL=OFF, GGML_RPC=ON (libggml-rpc.so: `gantry rpc-server`,
#                                            --rpc), arch 90 (resumable: run it again after a timeout)
#   scripts/dist-cuda.sh build-bg [-j N]  THERE: the same, detached (pid in $STASH/build.pid), so the next calls'
#                                            transfers overlap it; `wait` blocks until it has ended
#   scripts/dist-cuda.sh pack             THERE: joins the EP parts, then scripts/dist.sh --base CPU_BUNDLE
#                                            --variant cuda -> $STASH/gantry-<v>-linux-x86_64-cuda.tar.zst, and
#                                            unpacks it with the -check overlay into $STASH/bundle
#   scripts/dist-cuda.sh all [-j N]       THERE: stash, build, pack
#
# CUDA_HOME (default /usr/local/cuda), CUDA_ARCH (default 90), STASH override.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEPS=${GANTRY_DEPS_DIR:-$ROOT/.cache}
STASH=${STASH:-/tmp/gantry-cuda}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CUDA_ARCH=${CUDA_ARCH:-90}
LLAMA_BUILD_COMMIT=de3ff815  # scripts/setup.sh's LLAMA_COMMIT: the bundle is squashed, so set by hand
JOBS=$(nproc)
IN=$ROOT/dist/cuda-inputs
EP_PART_BYTES=56000000  # + the working tree (~4 MB) + llama-src and tools fit one 64 MiB call

die() { echo "dist-cuda: FAILED: $*" >&2; exit 1; }
note() { echo "dist-cuda: $*" >&2; }

# ---------------------------------------------------------------- here
prepare() {
  local src=$DEPS/llama/src
  [[ -f "$src/CMakeLists.txt" ]] || die "no llama.cpp source in $src (make setup)"
  rm -rf "$IN"
  mkdir -p "$IN/tools/bin" "$IN/tools/lib"
  # What a library build reads (llama, ggml and the `common` library); no models/docs.
  local parts=(CMakeLists.txt cmake ggml src include LICENSE licenses vendor common)
  if [[ -d "$src/.git" ]]; then
    git -C "$src" archive --format=tar --prefix=llama-src/ HEAD -- "${parts[@]}" | zstd -q -12 -T0 -o "$IN/llama-src.tar.zst"
  else
    tar -C "$src" --transform 's,^,llama-src/,' -cf - "${parts[@]}" | zstd -q -12 -T0 -o "$IN/llama-src.tar.zst"
  fi
  # patchelf and zstd from this machine (glibc 2.36 <= the GPU image's 2.39) with their non-glibc libraries.
  local t lib
  for t in patchelf zstd; do
    cp "$(command -v $t)" "$IN/tools/bin/$t"
    while read -r lib; do cp -L "$lib" "$IN/tools/lib/"; done < <(ldd "$(command -v $t)" | awk '$3 ~ /^\// {print $3}' \
      | grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so')
  done
  for t in "$IN"/tools/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$t"; done
  local ep=$DEPS/onnxruntime/lib/libonnxruntime_providers_cuda.so
  if [[ -f "$ep" ]]; then
    local eps=()
    mapfile -t eps < <(cd "$(dirname "$ep")" && ls libonnxruntime_providers_*.so)
    tar -C "$(dirname "$ep")" -cf - "${eps[@]}" | zstd -q -12 -T0 | split -b $EP_PART_BYTES -d - "$IN/ort-cuda-ep.tar.zst.part-"
  else
    note "the ONNX Runtime CUDA EP is not in $DEPS/onnxruntime/lib: run 'GANTRY_WITH_CUDA_EP=1 scripts/setup.sh deps'"
    note "(npm com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9, 179 MB) and prepare again; without it the"
    note "CUDA bundle has llama.cpp CUDA and the kernel executor but no CUDA EP (gpu-check reports that)"
  fi
  ( cd "$ROOT/dist" && ls -la cuda-inputs cuda-inputs/tools/* && du -sh ./*.tar.zst ) >&2
}

# ---------------------------------------------------------------- there
stash() {
  mkdir -p "$STASH/ep-parts" "$STASH/tools"
  local f
  for f in "$ROOT"/dist/*.tar.zst; do [[ -f "$f" ]] && mv -f "$f" "$STASH/"; done
  [[ -f "$IN/llama-src.tar.zst" ]] && mv -f "$IN/llama-src.tar.zst" "$STASH/"
  [[ -d "$IN/tools/bin" ]] && cp -r "$IN/tools/." "$STASH/tools/"
  for f in "$IN"/ort-cuda-ep.tar.zst.part-*; do [[ -f "$f" ]] && mv -f "$f" "$STASH/ep-parts/"; done
  ls -la "$STASH" "$STASH/ep-parts" >&2
}

use_tools() {
  [[ -x "$STASH/tools/bin/patchelf" ]] && export PATH="$STASH/tools/bin:$PATH"
  command -v zstd >/dev/null && command -v patchelf >/dev/null \
    || die "zstd/patchelf missing: carry dist/cuda-inputs/tools and run 'stash'"
}

build_llama() {
  use_tools
  [[ -x "$CUDA_HOME/bin/nvcc" ]] || die "no nvcc in $CUDA_HOME/bin (set CUDA_HOME)"
  local src=$STASH/llama-src b=$STASH/llama-build prefix=$STASH/llama-install
  if [[ ! -f "$src/CMakeLists.txt" ]]; then
    [[ -f "$STASH/llama-src.tar.zst" ]] || die "no $STASH/llama-src.tar.zst: carry dist/cuda-inputs and run 'stash'"
    tar -I zstd -xf "$STASH/llama-src.tar.zst" -C "$STASH"
  fi
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  # A build dir configured before GGML_RPC=ON is configured again (the objects already built stay).
  if [[ ! -f "$b/CMakeCache.txt" ]] || ! grep -q '^GGML_RPC:BOOL=ON' "$b/CMakeCache.txt"; then
    note "configuring llama.cpp with CUDA (arch $CUDA_ARCH, backends as loadable modules)"
    # As scripts/setup.sh builds the CPU library, plus CUDA. RUNPATH $ORIGIN/../lib is what the bundle uses.
    cmake -S "$src" -B "$b" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_RPATH='$ORIGIN/../lib' -DCMAKE_INSTALL_LIBDIR=lib \
      -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=OFF -DGGML_OPENMP=ON -DGGML_OPENMP_FETCH=OFF -DGGML_CCACHE=OFF \
      -DGGML_BACKEND_DL=ON -DGGML_CUDA=ON -DGGML_CUDA_NCCL=OFF -DGGML_RPC=ON -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" \
      -DCMAKE_CUDA_COMPILER="$CUDA_HOME/bin/nvcc" \
      -DLLAMA_BUILD_NUMBER=0 -DLLAMA_BUILD_COMMIT=$LLAMA_BUILD_COMMIT \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
      -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_COMMON=ON -DLLAMA_CURL=OFF \
      -DLLAMA_LLGUIDANCE=OFF -DLLAMA_OPENSSL=OFF >"$STASH/llama-configure.log" 2>&1 \
      || { tail -n 30 "$STASH/llama-configure.log" >&2; die "configuring llama.cpp (see $STASH/llama-configure.log)"; }
  fi
  note "building llama.cpp with CUDA on $JOBS cores (resumable)"
  local start=$SECONDS
  cmake --build "$b" -j "$JOBS" >"$STASH/llama-build.log" 2>&1 \
    || { tail -n 30 "$STASH/llama-build.log" >&2; die "building llama.cpp (see $STASH/llama-build.log)"; }
  cmake --install "$b" >"$STASH/llama-install.log" 2>&1 || die "installing llama.cpp (see $STASH/llama-install.log)"
  note "llama.cpp with CUDA built in $((SECONDS - start)) s: $(cd "$prefix/lib" && ls lib*.so* | paste -sd ' ')"
}

pack() {
  use_tools
  local prefix=$STASH/llama-install
  [[ -f "$prefix/lib/libllama.so.0" ]] || die "llama.cpp with CUDA is not built: run 'build'"
  # With GGML_BACKEND_DL ggml installs its backend modules (libggml-cuda.so, libggml-rpc.so, ...) into
  # CMAKE_INSTALL_BINDIR, not lib/: the bundle loads them from libllama's directory, so they go there.
  local m
  for m in "$prefix"/bin/libggml-*.so; do [[ -f "$m" ]] && cp -n "$m" "$prefix/lib/"; done
  compgen -G "$prefix/lib/libggml-rpc.so*" >/dev/null \
    || die "llama.cpp with CUDA was built without its RPC backend (GGML_RPC=ON): run 'build' again"
  local cpu
  cpu=$(find "$STASH" -maxdepth 1 -name 'gantry-*-linux-x86_64.tar.zst' | head -n 1)
  [[ -n "$cpu" ]] || die "no CPU bundle (gantry-*-linux-x86_64.tar.zst) in $STASH: carry dist/ and run 'stash'"
  local ort=$STASH/ort-ep
  mkdir -p "$ort"
  if ls "$STASH"/ep-parts/ort-cuda-ep.tar.zst.part-* >/dev/null 2>&1; then
    cat "$STASH"/ep-parts/ort-cuda-ep.tar.zst.part-* | zstd -dc | tar -xf - -C "$ort" \
      || die "joining the ONNX Runtime CUDA EP parts (all of them carried?)"
  else
    note "no ONNX Runtime CUDA EP parts in $STASH/ep-parts: the bundle has no CUDA EP"
  fi
  # cudart/cuBLAS resolve from the toolkit while packing (they are copied into lib/).
  export CUDA_HOME
  LD_LIBRARY_PATH="$CUDA_HOME/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" GANTRY_DIST_ZSTD_LEVEL=${GANTRY_DIST_ZSTD_LEVEL:-3} \
    bash "$ROOT/scripts/dist.sh" --base "$cpu" --variant cuda --llama-lib "$prefix/lib" --ort-lib "$ort" --out "$STASH"
  local cuda_bundle=${cpu%.tar.zst}-cuda.tar.zst
  rm -rf "$STASH/bundle"
  mkdir -p "$STASH/bundle"
  tar -I zstd -xf "$cuda_bundle" -C "$STASH/bundle"
  local top
  top=$(basename "${cuda_bundle%.tar.zst}")
  local overlay=${cpu%.tar.zst}-check.tar.zst
  if [[ -f "$overlay" ]]; then
    # The overlay's top folder is the CPU bundle's name: put its check/ (and any extra libraries) into ours.
    local tmp
    tmp=$(mktemp -d)
    tar -I zstd -xf "$overlay" -C "$tmp"
    cp -r "$tmp"/*/. "$STASH/bundle/$top/"
    rm -rf "$tmp"
  else
    note "no -check overlay in $STASH: gpu-check will report its parts as not carried"
  fi
  note "ready: $STASH/bundle/$top (run ./gpu-check.sh there)"
}

cmd=${1:-}
shift || true
while [[ $# -gt 0 ]]; do
  case "$1" in
    -j) JOBS=$2; shift 2 ;;
    *) die "unknown argument '$1'" ;;
  esac
done
# The build in the background (so the next calls' transfers overlap it), and waiting for it by its pid: a
# `pgrep -f` for it would also match the device tool's own command line, which contains the same words.
build_bg() {
  mkdir -p "$STASH"
  setsid nohup bash "$0" build -j "$JOBS" >"$STASH/build.out" 2>&1 </dev/null &
  echo $! >"$STASH/build.pid"
  note "building in the background (pid $(cat "$STASH/build.pid"), log $STASH/build.out)"
}
wait_build() {
  local pid; pid=$(cat "$STASH/build.pid" 2>/dev/null) || die "no background build ($STASH/build.pid)"
  while kill -0 "$pid" 2>/dev/null; do sleep 2; done
  tail -n 3 "$STASH/build.out" >&2
  [[ -f "$STASH/llama-install/lib/libllama.so.0" ]] || die "the background build failed (see $STASH/build.out)"
}

case "$cmd" in
  prepare) prepare ;;
  stash) stash ;;
  build) build_llama ;;
  build-bg) build_bg ;;
  wait) wait_build ;;
  pack) pack ;;
  all) stash; build_llama; pack ;;
  -h | --help | "") awk 'NR > 1 && /^#/ {print; next} NR > 1 {exit}' "$0" ;;
  *) die "unknown command '$cmd' (prepare | stash | build | build-bg | wait | pack | all)" ;;
esac

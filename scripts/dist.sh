#!/usr/bin/env bash
# Packs a self-contained Gantry bundle from a build tree (see docs/dist.md):
#
#   scripts/dist.sh [--build DIR] [--variant cpu|cuda] [--llama-lib DIR] [--ort-lib DIR] [--check] [--out DIR]
#   scripts/dist.sh --base CPU_BUNDLE.tar.zst --variant cuda --llama-lib DIR [--ort-lib DIR] [--out DIR]
#
#   --base  start from a packed bundle instead of a build tree (a GPU machine has no Debian build
#           dependencies): its llama.cpp/ggml libraries are replaced by --llama-lib's, ONNX Runtime's
#           provider plugins from --ort-lib are added (scripts/dist-cuda.sh does this).
#   bundle  dist/gantry-<version>-linux-x86_64[-cuda].tar.zst, one top folder of the same name:
#             bin/gantry, lib/ (the engine module, ONNX Runtime, llama.cpp/ggml and every other shared library
#             the ELF files resolve, except glibc, libstdc++/libgcc and the NVIDIA driver), schema/,
#             share/gantry/ (catalogue), licenses/, README.md, BUNDLE, gpu-check.sh
#   --check also dist/gantry-<version>-linux-x86_64[-cuda]-check.tar.zst: an overlay for the same top folder
#             (check/bin test and bench binaries, check/models, check/onnx-node) that scripts/gpu-check.sh
#             uses; unpack it over the bundle.
#
# Every ELF gets RUNPATH $ORIGIN/../lib (patchelf); debug info is stripped. The closure is found with ldd and
# copied until nothing outside lib/ resolves but the allowed system libraries (ALLOWED_SYSTEM below).
# Prints the archive path(s) on stdout; everything else goes to stderr.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
VARIANT=cpu
DEPS=${GANTRY_DEPS_DIR:-$ROOT/.cache}
LLAMA_LIB=""
ORT_LIB=""
CHECK=0
BASE=""
OUT=$ROOT/dist
ZSTD_LEVEL=${GANTRY_DIST_ZSTD_LEVEL:-9}

die() { echo "dist: FAILED: $*" >&2; exit 1; }
note() { echo "dist: $*" >&2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --variant) VARIANT=$2; shift 2 ;;
    --llama-lib) LLAMA_LIB=$2; shift 2 ;;
    --ort-lib) ORT_LIB=$2; shift 2 ;;
    --check) CHECK=1; shift ;;
    --base) BASE=$(realpath "$2"); shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ "$VARIANT" == cpu || "$VARIANT" == cuda ]] || die "--variant must be cpu or cuda"
LLAMA_LIB=${LLAMA_LIB:-$DEPS/llama/install/lib}
ORT_LIB=${ORT_LIB:-$DEPS/onnxruntime/lib}

for tool in patchelf zstd ldd strip readelf; do
  command -v "$tool" >/dev/null || die "$tool is missing (scripts/apt-packages.txt; run make setup)"
done
[[ -f "$LLAMA_LIB/libllama.so.0" ]] || die "llama.cpp not in $LLAMA_LIB"
if [[ -n "$BASE" ]]; then
  (( CHECK == 0 )) || die "--check needs a build tree, not --base"
  BASE_LINE=$(tar -I zstd -xOf "$BASE" --wildcards '*/BUNDLE') || die "$BASE is not a Gantry bundle (no BUNDLE)"
  VERSION=$(awk '{print $2}' <<<"$BASE_LINE")
else
  [[ -x "$BUILD/bin/gantry" && -f "$BUILD/lib/libgantry_engine.so" ]] \
    || die "$BUILD/bin/gantry or $BUILD/lib/libgantry_engine.so is not built (cmake --build $BUILD --target gantry)"
  [[ -f "$ORT_LIB/libonnxruntime.so.1" ]] || die "ONNX Runtime not in $ORT_LIB"
  VERSION=$(sed -n 's/^#define GANTRY_VERSION_STRING "\(.*\)"/\1/p' "$BUILD/include/gantry/build_info.h")
  [[ -n "$VERSION" ]] || die "no GANTRY_VERSION_STRING in $BUILD/include/gantry/build_info.h"
fi
NAME=gantry-$VERSION-linux-x86_64
[[ "$VARIANT" == cuda ]] && NAME+=-cuda

# What may still come from the system: glibc, the C++ runtime, and the NVIDIA driver (never shipped: it
# must match the kernel module). Everything else is copied into lib/.
ALLOWED_SYSTEM='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libmvec\.so\.1|libdl\.so\.2|librt\.so\.1|libpthread\.so\.0|libresolv\.so\.2|libutil\.so\.1|libanl\.so\.1|libstdc\+\+\.so\.6|libgcc_s\.so\.1|libcuda\.so\.1|libnvidia-ml\.so\.1|libnvidia-[a-z0-9-]+\.so\.[0-9.]+)$'

STAGE_ROOT=$(mktemp -d "${TMPDIR:-/tmp}/gantry-dist.XXXXXX")
trap 'rm -rf "$STAGE_ROOT"' EXIT
S=$STAGE_ROOT/$NAME
mkdir -p "$S/bin" "$S/lib" "$S/licenses" "$S/share/gantry" "$OUT"

is_elf() { [[ -f "$1" && "$(head -c 4 "$1" | od -An -c | tr -d ' ')" == '177ELF' ]]; }

# Copies FILE into DIR (as NAME, default its basename), stripped of debug info, with RUNPATH $ORIGIN/../lib
# (the bundle's lib/ seen from bin/ or lib/; RPATH_CHECK for the overlay's check/bin/).
RPATH_CHECK='$ORIGIN/../../lib'
install_elf() {
  local src=$1 dir=$2 name=${3:-$(basename "$1")} rpath=${4:-'$ORIGIN/../lib'}
  cp -L "$src" "$dir/$name"
  chmod u+w "$dir/$name"
  strip --strip-debug "$dir/$name" 2>/dev/null || true
  patchelf --set-rpath "$rpath" "$dir/$name"
}

# The libraries ggml and ONNX Runtime bring, under the file names the loader asks for (SONAMEs), plus the
# ggml backends a GGML_BACKEND_DL build loads by file name (libggml-*.so).
copy_runtime_libs() {
  if [[ -z "$BASE" ]]; then
    install_elf "$BUILD/lib/libgantry_engine.so" "$S/lib"
    install_elf "$ORT_LIB/libonnxruntime.so.1" "$S/lib"
  fi
  local f
  for f in "$ORT_LIB"/libonnxruntime_providers_*.so; do
    [[ -f "$f" ]] || continue
    [[ "$VARIANT" == cuda ]] || { note "skipping $(basename "$f") in the cpu variant"; continue; }
    install_elf "$f" "$S/lib"
  done
  for f in "$LLAMA_LIB"/lib*.so*; do
    [[ -f "$f" && ! -L "$f" ]] || continue
    # libfoo.so.0.25.1 is copied once, as its SONAME (libfoo.so.0, what the loader asks for); a backend
    # module without a SONAME (libggml-cuda.so in a GGML_BACKEND_DL build) keeps its own name, which is
    # what ggml_backend_load_all_from_path looks for.
    local soname
    soname=$(readelf -d "$f" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    install_elf "$f" "$S/lib" "${soname:-$(basename "$f")}"
  done
}

# Copies into lib/ every library an ELF under the stage resolves outside it (other than ALLOWED_SYSTEM), then
# does the same for what it copied, until nothing new appears. ldd follows RUNPATH, so what is already in lib/
# resolves there.
close_over_ldd() {
  local stage=$1 queue=() next elf
  while IFS= read -r -d '' elf; do is_elf "$elf" && queue+=("$elf"); done < <(find "$stage" -type f -print0)
  while (( ${#queue[@]} )); do
    next=()
    for elf in "${queue[@]}"; do
      local name path
      while read -r name path; do
        [[ "$name" =~ $ALLOWED_SYSTEM ]] && continue
        [[ -e "$S/lib/$name" ]] && continue
        if [[ "$path" != /* || ! -f "$path" ]]; then
          # ONNX Runtime's CUDA EP may need what this machine lacks (cuDNN): it then fails to register,
          # with that reason, and everything else works. Anything else missing is fatal.
          if [[ "$VARIANT" == cuda && "$(basename "$elf")" == libonnxruntime_providers_* ]]; then
            note "WARNING: $(basename "$elf") needs $name, which does not resolve here: that EP will not load"
            MISSING+=("$(basename "$elf") needs $name")
            continue
          fi
          die "$(basename "$elf") needs $name, which does not resolve here"
        fi
        note "adding $name (from $path, needed by $(basename "$elf"))"
        install_elf "$path" "$S/lib" "$name"
        if [[ "$(readlink -f "$path")" == "$(readlink -f "${CUDA_HOME:-/usr/local/cuda}")"/* ]]; then
          CUDA_LIBS+=("$name")
        else
          SYSTEM_LIBS+=("$path")
        fi
        next+=("$S/lib/$name")
      done < <(ldd "$elf" 2>/dev/null | awk '$2 == "=>" {print $1, $3}')
    done
    queue=("${next[@]}")
  done
}

# Licence files: Debian's copyright file of every copied system library's package, ONNX Runtime's and llama.cpp's.
copy_licences() {
  if (( ${#SYSTEM_LIBS[@]} )); then
    local real=() p pkg
    for p in "${SYSTEM_LIBS[@]}"; do real+=("$(readlink -f "$p")"); done
    # One dpkg query for all of them ("pkg:arch: /path" per line), under both spellings of merged /usr
    # (dpkg knows a file by the path its package shipped); a file no package owns stops the build.
    local owners
    owners=$(dpkg -S "${real[@]}" "${real[@]/#\/usr\/lib\//\/lib\/}" 2>/dev/null || true)
    for p in "${real[@]}"; do
      grep -qF -e ": $p" -e ": ${p/#\/usr\/lib\//\/lib\/}" <<<"$owners" && continue
      [[ "$VARIANT" == cuda ]] || die "no Debian package owns $p: cannot ship its licence"
      # A GPU machine's image may hold libraries outside its package manager: list them for a person to check.
      note "WARNING: no package owns $p: listed in licenses/UNKNOWN.txt"
      echo "$p" >>"$S/licenses/UNKNOWN.txt"
    done
    while read -r pkg; do
      local c=/usr/share/doc/$pkg/copyright
      [[ -f "$c" ]] || die "no copyright file for $pkg ($c)"
      cp "$c" "$S/licenses/debian-$pkg.copyright"
    done < <(grep -v '^dpkg-query' <<<"$owners" | cut -d: -f1 | sort -u)
  fi
  [[ -z "$BASE" ]] || return 0  # the base bundle has ONNX Runtime's, llama.cpp's and Gantry's
  local ort_pkg
  ort_pkg=$(ls -d "$DEPS"/npm/com.github.asus4.onnxruntime-*/package 2>/dev/null | head -n 1)
  [[ -n "$ort_pkg" && -f "$ort_pkg/LICENSE" ]] || die "ONNX Runtime's LICENSE not found under $DEPS/npm"
  cp "$ort_pkg/LICENSE" "$S/licenses/onnxruntime.LICENSE"
  cp "$ort_pkg/ThirdPartyNotices.txt" "$S/licenses/onnxruntime.ThirdPartyNotices.txt"
  local llama_src=${GANTRY_LLAMA_SRC:-$DEPS/llama/src}
  [[ -f "$llama_src/LICENSE" ]] || die "llama.cpp's LICENSE not found in $llama_src"
  cp "$llama_src/LICENSE" "$S/licenses/llama.cpp.LICENSE"
  cp "$ROOT/LICENSE" "$S/licenses/gantry.LICENSE" 2>/dev/null || true
}

write_docs() {
  rm -rf "$S/schema"
  cp -r "$ROOT/schema" "$S/schema"
  cp "$ROOT/data/catalogue.json" "$S/share/gantry/catalogue.json"
  cp "$ROOT/scripts/gpu-check.sh" "$S/gpu-check.sh"
  chmod +x "$S/gpu-check.sh"
  local commit
  commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
  [[ -z "$BASE" ]] || commit=$(sed -n 's/.*(commit \([^,]*\),.*/\1/p' <<<"$BASE_LINE")
  # One line that `gantry version` prints when it runs from a bundle.
  echo "gantry $VERSION $VARIANT bundle (commit $commit, $(uname -m), built $(date -u +%Y-%m-%d)$([[ -z "$BASE" ]] || echo ", from the cpu bundle"))" >"$S/BUNDLE"
  if (( ${#MISSING[@]} )); then printf '%s\n' "${MISSING[@]}" >"$S/MISSING.txt"; fi
  cat >"$S/README.md" <<EOF
# Gantry $VERSION ($VARIANT bundle, linux-x86_64)

A self-contained Gantry: nothing here comes from the system but glibc (2.36 or newer), libstdc++/libgcc and,
for GPUs, the NVIDIA driver. Unpack anywhere and run:

    bin/gantry version
    bin/gantry detect
    bin/gantry run MODEL.gguf -p "Hello" -n 32
    bin/gantry run MODEL.onnx -i INPUT.npy

\`schema/registry.schema.json\` describes \`gantry detect --json\`. \`plan --what-if\` reads this bundle's catalogue
(\`share/gantry/catalogue.json\`) unless \`GANTRY_CATALOGUE\` names another. \`./gpu-check.sh\` checks every GPU
path on an NVIDIA machine (it needs the -check overlay archive unpacked over this folder; see docs/dist.md in the
Gantry source). Licences of everything shipped: \`licenses/\`.

$(sed -n '/^## The CLI/,/^## /p' "$ROOT/README.md" | sed '$d')
EOF
}

# The allowed-system check the test repeats: every ELF resolves only inside lib/ or to ALLOWED_SYSTEM.
verify_stage() {
  local stage=$1 bad=0 elf
  while IFS= read -r -d '' elf; do
    is_elf "$elf" || continue
    local rp
    rp=$(readelf -d "$elf" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
    local want='$ORIGIN/../lib'
    [[ "$elf" == "$S/check/bin/"* ]] && want=$RPATH_CHECK
    [[ "$rp" == "$want" ]] || { note "$elf: RUNPATH is '$rp', not '$want'"; bad=1; }
    local name path
    while read -r name path; do
      [[ "$name" =~ $ALLOWED_SYSTEM ]] && continue
      # Reported in MISSING.txt by the closure (the CUDA EP's optional cuDNN).
      [[ "$path" == not && "$VARIANT" == cuda && "$(basename "$elf")" == libonnxruntime_providers_* ]] && continue
      path=$(realpath -m -s "$path")
      [[ "$path" == "$S/lib/"* ]] || { note "$(basename "$elf"): $name resolves to $path"; bad=1; }
    done < <(ldd "$elf" 2>/dev/null | awk '$2 == "=>" {print $1, $3}')
  done < <(find "$stage" -type f -print0)
  (( bad == 0 )) || die "the bundle resolves libraries outside lib/ (above)"
}

pack() {
  local top=$1 out=$2
  shift 2
  rm -f "$out"
  tar -C "$STAGE_ROOT" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - "$@" \
    | zstd -q -"$ZSTD_LEVEL" -T0 -o "$out" || die "packing $out"
  note "$(basename "$out"): $(du -h "$out" | cut -f1) ($top)"
  echo "$out"
}

SYSTEM_LIBS=()
CUDA_LIBS=()
MISSING=()
if [[ -n "$BASE" ]]; then
  # The base bundle's tree with llama.cpp/ggml taken out (the new build brings its own, maybe DL backends).
  tar -I zstd -xf "$BASE" -C "$STAGE_ROOT" || die "unpacking $BASE"
  base_top=$(find "$STAGE_ROOT" -mindepth 1 -maxdepth 1 -type d -name 'gantry-*' ! -name "$NAME" -printf '%f\n')
  rm -rf "$S"
  mv "$STAGE_ROOT/$base_top" "$S"
  rm -f "$S"/lib/libllama.so* "$S"/lib/libllama-common.so* "$S"/lib/libggml*.so*
else
  install_elf "$BUILD/bin/gantry" "$S/bin"
fi
copy_runtime_libs
# ggml's RPC backend (`gantry rpc-server`, --rpc): libggml-rpc.so.0, or the libggml-rpc.so module of a
# GGML_BACKEND_DL build. A llama.cpp built without GGML_RPC=ON would leave both commands without it.
compgen -G "$S/lib/libggml-rpc.so*" >/dev/null \
  || die "llama.cpp's RPC backend (libggml-rpc) is not in $LLAMA_LIB: build llama.cpp with GGML_RPC=ON (scripts/setup.sh)"
# CUDA variant: NVRTC (the kernel executor dlopens it) comes with the bundle, from the toolkit that built it.
if [[ "$VARIANT" == cuda ]]; then
  CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
  for f in "$CUDA_HOME"/lib64/libnvrtc.so.[0-9]* "$CUDA_HOME"/lib64/libnvrtc-builtins.so.[0-9]*; do
    [[ -f "$f" && ! -L "$f" ]] || continue
    soname=$(readelf -d "$f" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    install_elf "$f" "$S/lib" "${soname:-$(basename "$f")}"  # NVIDIA's EULA: licenses/cuda.txt
  done
  echo "CUDA runtime libraries (cudart, cuBLAS, NVRTC) are redistributed under the NVIDIA CUDA Toolkit EULA,
https://docs.nvidia.com/cuda/eula/ (Attachment A lists the redistributable files)." >"$S/licenses/cuda.txt"
fi
close_over_ldd "$S"
note "library closure done (${SECONDS}s)"
write_docs
copy_licences
verify_stage "$S"
note "verified (${SECONDS}s)"
pack "$NAME" "$OUT/$NAME.tar.zst" "$NAME"

if (( CHECK )); then
  # The overlay: test/bench binaries that exist in this build, the models and the ONNX node suite. Its extra
  # libraries (if any) go into the same lib/, so it is closed over like the bundle; only new files are packed.
  C=$S/check
  mkdir -p "$C/bin" "$C/models"
  before=$(cd "$S" && find lib licenses -type f | sort)
  # The suites with CUDA cases, and the kernel executor's benchmarks (their BENCH lines are the GPU ones).
  for t in memory_test kernels_test onnx_test llama_test runtime_test onnx_cuda_pool_bench "$BUILD"/bin/kernel*_bench; do
    t=$(basename "$t")
    [[ -x "$BUILD/bin/$t" ]] && install_elf "$BUILD/bin/$t" "$C/bin" "$t" "$RPATH_CHECK"
  done
  for m in tiny-llama.gguf mlp_64_128_10.onnx; do cp "$DEPS/models/$m" "$C/models/"; done
  cp -r "$DEPS/models/paddleocr" "$C/models/paddleocr"
  node=/usr/share/libonnx-testdata/data/node
  [[ -d "$node" ]] && cp -r "$node" "$C/onnx-node" || note "no ONNX node suite at $node (libonnx-testdata)"
  close_over_ldd "$C"
  copy_licences
  verify_stage "$C"
  mapfile -t extra < <(comm -13 <(echo "$before") <(cd "$S" && find lib licenses -type f | sort))
  pack "$NAME check overlay" "$OUT/$NAME-check.tar.zst" "$NAME/check" "${extra[@]/#/$NAME/}"
fi

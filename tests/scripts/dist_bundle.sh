#!/usr/bin/env bash
# The CPU bundle (make dist, scripts/dist.sh) from a user's point of view: packed from this build (or a fresh
# one reused), unpacked in a temporary folder and run with an empty environment. Asserts: size <= 48 MiB
# (40.0 MiB on 2026-12-02; the bound catches what must not be packed: debug info, a model, a test binary);
# version/detect/run (GGUF and ONNX) work and give the same results as the build tree; every ELF has RUNPATH
# $ORIGIN/../lib and resolves only glibc/libstdc++/libgcc (and the NVIDIA driver) outside the bundle's lib/,
# including what is dlopen'ed at run time; licences and schema are there.
set -uo pipefail
BUILD=${1:?usage: dist_bundle.sh BUILD_DIR}
BUILD=$(cd "$BUILD" && pwd)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEPS=${GANTRY_DEPS_DIR:-$ROOT/.cache}
MODELS=$DEPS/models
GANTRY_DEV=$BUILD/bin/gantry

for tool in patchelf zstd; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is not installed (make setup installs it)"; exit 1; }
done
if grep -qE '^GANTRY_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  echo "SKIP: a sanitizer build is not what a bundle ships (make dist packs the default preset)"; exit 77
fi
[[ -x "$GANTRY_DEV" && -f "$BUILD/lib/libgantry_engine.so" ]] || { echo "FAIL: $GANTRY_DEV is not built"; exit 1; }
[[ -f "$MODELS/tiny-llama.gguf" && -f "$MODELS/mlp_64_128_10.onnx" ]] || { echo "FAIL: models missing in $MODELS"; exit 1; }

version=$(sed -n 's/^#define GANTRY_VERSION_STRING "\(.*\)"/\1/p' "$BUILD/include/gantry/build_info.h")
name=gantry-$version-linux-x86_64
# Packed into the build dir, so the test never races a user's dist/.
archive=$BUILD/dist/$name.tar.zst
fresh=1
for f in "$BUILD/bin/gantry" "$BUILD/lib/libgantry_engine.so" "$ROOT/scripts/dist.sh" "$ROOT/scripts/gpu-check.sh"; do
  [[ -f "$archive" && "$archive" -nt "$f" ]] || fresh=0
done
if (( fresh )); then
  echo "reusing $archive (newer than the binaries and scripts/dist.sh)"
else
  bash "$ROOT/scripts/dist.sh" --build "$BUILD" --out "$BUILD/dist" >/dev/null 2>"$BUILD/dist_bundle.log" \
    || { echo "FAIL: scripts/dist.sh:"; tail -n 20 "$BUILD/dist_bundle.log"; exit 1; }
fi

fail=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi; }

size=$(stat -c %s "$archive")
check "archive $(basename "$archive") is $((size / 1024)) KiB <= 48 MiB" '(( size <= 48 * 1024 * 1024 ))'

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
tar -I zstd -xf "$archive" -C "$tmp" || { echo "FAIL: cannot unpack $archive"; exit 1; }
B=$tmp/$name
[[ -x "$B/bin/gantry" ]] || { echo "FAIL: no bin/gantry in the archive"; exit 1; }
cd "$tmp" || exit 1  # nothing relative to the source tree may matter

# Allowed from the system: glibc, the C++ runtime, the NVIDIA driver; every other library from $B/lib.
allowed='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libmvec\.so\.1|libdl\.so\.2|librt\.so\.1|libpthread\.so\.0|libresolv\.so\.2|libutil\.so\.1|libanl\.so\.1|libstdc\+\+\.so\.6|libgcc_s\.so\.1|libcuda\.so\.1|libnvidia-ml\.so\.1)$'
bad_ldd=$tmp/bad-ldd.txt; : >"$bad_ldd"
elves=0
while IFS= read -r -d '' f; do
  [[ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" == '177ELF' ]] || continue
  elves=$((elves + 1))
  rp=$(readelf -d "$f" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
  [[ "$rp" == "\$ORIGIN/../lib" ]] || echo "${f#"$B"/}: RUNPATH '$rp'" >>"$bad_ldd"
  env -i ldd "$f" 2>&1 | while read -r lib arrow path _; do
    [[ "$arrow" == "=>" ]] || continue
    [[ "$lib" =~ $allowed ]] && continue
    [[ "$(realpath -m -s "$path")" == "$B/lib/"* ]] || echo "${f#"$B"/}: $lib => $path" >>"$bad_ldd"
  done
done < <(find "$B" -type f -print0)
check "every one of $elves ELF files has RUNPATH \$ORIGIN/../lib and resolves only allowed system libraries" \
  '[[ ! -s "$bad_ldd" ]] || { head -n 20 "$bad_ldd"; false; }'
check "the engine's RUNPATH names no build or .cache path" \
  '! readelf -d "$B/lib/libgantry_engine.so" | grep -E "RUNPATH|RPATH" | grep -qE "\.cache|/build"'

# What the processes really load (dlopen included: the engine, ggml backends, ONNX Runtime), from LD_DEBUG.
loaded_ok() {  # LOGFILE: every "calling init: PATH" is in the bundle or an allowed system library
  local p bad=0
  while read -r p; do
    [[ "$(realpath -m -s "$p")" == "$B/"* ]] && continue
    [[ "$(basename "$p")" =~ $allowed ]] && continue
    echo "  loaded from the system: $p"; bad=1
  done < <(sed -n 's/.*calling init: //p' "$1" | sort -u)
  return $bad
}

check "env -i bin/gantry version says it is a bundle" \
  'env -i LD_DEBUG=libs LD_DEBUG_OUTPUT=$tmp/ld.version "$B/bin/gantry" version >$tmp/version.txt 2>&1 && grep -q "^bundle: gantry $version cpu bundle" $tmp/version.txt && grep -q "^onnxruntime 1\." $tmp/version.txt && grep -q "ggml device CPU" $tmp/version.txt'
check "version loaded nothing from the system but allowed libraries" 'cat $tmp/ld.version.* >$tmp/ld.version && loaded_ok $tmp/ld.version'

check "env -i bin/gantry detect --json is a registry with a cpu device" \
  'env -i "$B/bin/gantry" detect --json >$tmp/detect.json && /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert any(x[\"kind\"]==\"cpu\" for x in d[\"devices\"])" $tmp/detect.json'

gen=(run "$MODELS/tiny-llama.gguf" -p hello -n 8 --temperature 0 --seed 1 --threads 1)
check "env -i bin/gantry run tiny-llama.gguf generates 8 tokens" \
  'env -i LD_DEBUG=libs LD_DEBUG_OUTPUT=$tmp/ld.run "$B/bin/gantry" "${gen[@]}" >$tmp/gen.txt 2>$tmp/gen.err && grep -q "8 tokens generated" $tmp/gen.err && [[ -s $tmp/gen.txt ]]'
check "the bundle generates exactly what the build tree does (greedy)" \
  '"$GANTRY_DEV" "${gen[@]}" >$tmp/gen-dev.txt 2>/dev/null && cmp -s $tmp/gen.txt $tmp/gen-dev.txt'
check "run loaded nothing from the system but allowed libraries" 'cat $tmp/ld.run.* >$tmp/ld.run && loaded_ok $tmp/ld.run'

# An ONNX model on a real input: the 64->128->10 MLP on a fixed [1,64] vector, same numbers as the build tree.
/usr/bin/python3 -c "import numpy as np; np.save('$tmp/x.npy', (np.arange(64, dtype=np.float32).reshape(1, 64) - 32) / 16)" \
  || { echo "FAIL: /usr/bin/python3 with numpy is needed to write the ONNX input"; exit 1; }
check "env -i bin/gantry plan --what-if reads the bundle's catalogue" \
  'env -i "$B/bin/gantry" plan "$MODELS/tiny-llama.gguf" --what-if h100-80gb >$tmp/whatif.txt 2>&1 && grep -q "h100-80gb" $tmp/whatif.txt'

check "env -i bin/gantry run mlp_64_128_10.onnx runs on the CPU EP" \
  'env -i "$B/bin/gantry" run "$MODELS/mlp_64_128_10.onnx" -i $tmp/x.npy -o $tmp/onnx-out --threads 1 >$tmp/onnx.txt 2>&1 && grep -q " on cpu " $tmp/onnx.txt && ls $tmp/onnx-out/*.npy >/dev/null'
same_outputs() {  # DIR_A DIR_B: the same non-empty set of .npy files, byte for byte
  local f n=0
  for f in "$1"/*.npy; do [[ -f "$f" ]] && cmp -s "$f" "$2/$(basename "$f")" || return 1; n=$((n + 1)); done
  (( n > 0 ))
}
check "the ONNX output equals the build tree's" \
  '"$GANTRY_DEV" run "$MODELS/mlp_64_128_10.onnx" -i $tmp/x.npy -o $tmp/onnx-dev --threads 1 >/dev/null 2>&1 && same_outputs $tmp/onnx-dev $tmp/onnx-out'

check "licences: ONNX Runtime, llama.cpp and a Debian copyright per copied library package" \
  '[[ -f $B/licenses/onnxruntime.LICENSE && -f $B/licenses/llama.cpp.LICENSE && -f $B/licenses/debian-libprotobuf32.copyright ]]'
check "ggml's RPC backend is shipped and gantry rpc-server starts from the bundle (--help)" \
  '[[ -f $B/lib/libggml-rpc.so.0 ]] && env -i "$B/bin/gantry" rpc-server --help 2>/dev/null | grep -q "gantry rpc-server"'
check "schema/registry.schema.json, README.md and gpu-check.sh are shipped" \
  '[[ -f $B/schema/registry.schema.json && -f $B/README.md && -x $B/gpu-check.sh ]]'
exit $fail

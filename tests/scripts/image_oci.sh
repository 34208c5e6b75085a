#!/usr/bin/env bash
# `make image` (scripts/image.sh) from a user's point of view: the OCI image built from this build's bundle
# (make dist) on a debootstrap'ed Debian base, then
#   1. its layout, layers and config checked (tests/image/check_oci.py: digests, diff_ids, Debian 12 base,
#      /opt/gantry, user 10001, entrypoint `gantry serve`, ports 8080 and 8081), and the archive loaded by
#      podman (a storage of its own) with the same config;
#   2. unpacked into an OCI runtime bundle (umoci unpack) and the server run the way that bundle's
#      config.json says (its args, user, env), KServe's way: STORAGE_URI set, --model-name, the model
#      mounted at /mnt/models, gRPC on the HTTP port. It runs chrooted into the image's root filesystem in
#      a mount namespace of its own (unshare) with that root read-only and a tmpfs at /tmp, as the
#      image's user. Checked: it runs as uid 10001 on a read-only root, answers /v2/health/live and
#      /v2/health/ready, the model by its KServe name, a completion, /metrics, gRPC ServerLive (h2c,
#      curl) on the same port, and drains on SIGTERM.
# Skips (77) only when this machine forbids mount namespaces or the test is not root.
# Usage: image_oci.sh BUILD_DIR   (run from the source dir)
set -uo pipefail
BUILD=${1:?usage: image_oci.sh BUILD_DIR}
BUILD=$(cd "$BUILD" && pwd)
ROOT=$(pwd)
DEPS=${GANTRY_DEPS_DIR:-$ROOT/.cache}
MODEL=$DEPS/models/tiny-llama.gguf

[[ $(id -u) == 0 ]] || { echo "SKIP: umoci unpack, mounts and chroot need root"; exit 77; }
unshare --mount true 2>/dev/null || { echo "SKIP: this machine forbids mount namespaces (unshare --mount failed)"; exit 77; }
if grep -qE '^GANTRY_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  echo "SKIP: a sanitizer build is not what an image ships (make image packs the default preset)"; exit 77
fi
for tool in debootstrap umoci podman zstd patchelf curl python3; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is not installed (scripts/apt-packages.txt; make setup)"; exit 1; }
done
[[ -x "$BUILD/bin/gantry" && -f "$BUILD/lib/libgantry_engine.so" ]] || { echo "FAIL: $BUILD/bin/gantry is not built"; exit 1; }
[[ -f "$MODEL" ]] || { echo "FAIL: $MODEL missing (scripts/setup.sh)"; exit 1; }

version=$(sed -n 's/^#define GANTRY_VERSION_STRING "\(.*\)"/\1/p' "$BUILD/include/gantry/build_info.h")
name=gantry-$version-linux-x86_64
bundle=$BUILD/dist/$name.tar.zst
newer_than_all() { local f=$1; shift; for g in "$@"; do [[ -e "$f" && "$f" -nt "$g" ]] || return 1; done; }
# The bundle: the one tests/scripts/dist_bundle.sh packs (reused when newer than the binaries).
if newer_than_all "$bundle" "$BUILD/bin/gantry" "$BUILD/lib/libgantry_engine.so" scripts/dist.sh scripts/gpu-check.sh; then
  echo "reusing $bundle"
else
  bash scripts/dist.sh --build "$BUILD" --out "$BUILD/dist" >/dev/null 2>"$BUILD/image_dist.log" ||
    { echo "FAIL: scripts/dist.sh:"; tail -20 "$BUILD/image_dist.log"; exit 1; }
fi
image=$BUILD/image/gantry-$version-oci
if newer_than_all "$image.tar" "$bundle" scripts/image.sh; then
  echo "reusing $image"
else
  bash scripts/image.sh --bundle "$bundle" --out "$BUILD/image" >/dev/null 2>"$BUILD/image.log" ||
    { echo "FAIL: scripts/image.sh:"; tail -20 "$BUILD/image.log"; exit 1; }
fi
echo "image: $(du -m "$image.tar" | cut -f1) MiB ($image.tar)"

status=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; status=1; fi; }

echo "--- the image's layout, layers and config"
python3 tests/image/check_oci.py "$image" "$version" || status=1

echo "--- podman (Debian's) loads the archive"
# Into a storage of its own (vfs: no overlay mounts needed). Running containers with podman does not work
# on the build machines (crun's setrlimit is refused there), hence the chroot below.
pstore=$(mktemp -d)
podman_() { podman --root "$pstore/root" --runroot "$pstore/run" --storage-driver vfs "$@"; }
check "podman load -i $(basename "$image.tar")" 'podman_ load -i "$image.tar" >"$pstore/load.log" 2>&1 || { tail -3 "$pstore/load.log"; false; }'
check "podman sees user 10001:10001, entrypoint gantry serve, ports 8080 and 8081" \
  '[[ "$(podman_ image inspect --format "{{.Config.User}} {{.Config.Entrypoint}} {{.Config.ExposedPorts}}" "localhost/$version:latest" 2>&1)" == "10001:10001 [/opt/gantry/bin/gantry serve] map[8080/tcp:{} 8081/tcp:{}]" ]]'
podman_ rmi -af >/dev/null 2>&1
rm -rf "$pstore"

echo "--- the server from the image's root filesystem"
tmp=$(mktemp -d)
pid=""
source "$(dirname "$0")/lib/serve_common.sh"  # free_port, stop_server, wait_ready
cleanup() { stop_server; rm -rf "$tmp"; }
trap cleanup EXIT
umoci unpack --image "$image:$version" "$tmp/bundle" >"$tmp/unpack.log" 2>&1 ||
  { echo "FAIL: umoci unpack:"; tail -5 "$tmp/unpack.log"; exit 1; }
R=$tmp/bundle/rootfs
# What a container engine would run: process.args, user and env of the runtime bundle's config.json.
mapfile -t entry < <(python3 -c 'import json,sys; [print(a) for a in json.load(open(sys.argv[1]))["process"]["args"]]' "$tmp/bundle/config.json")
mapfile -t envs < <(python3 -c 'import json,sys; [print(e) for e in json.load(open(sys.argv[1]))["process"]["env"]]' "$tmp/bundle/config.json")
user=$(python3 -c 'import json,sys; u=json.load(open(sys.argv[1]))["process"]["user"]; print("%d:%d" % (u["uid"], u["gid"]))' "$tmp/bundle/config.json")
cwd=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["process"]["cwd"])' "$tmp/bundle/config.json")
check "runtime bundle: args ${entry[*]}, user $user, cwd $cwd" '[[ "${entry[*]}" == "/opt/gantry/bin/gantry serve" && "$user" == 10001:10001 && "$cwd" == /tmp ]]'

port=$(free_port)
base="http://127.0.0.1:$port"
# One mount namespace: the root read-only, /tmp a tmpfs, /proc and /dev, the model at /mnt/models (a
# read-only tmpfs holding one file bound to the model). bash, chroot and env exec in turn, so $! is the
# server's pid.
unshare --mount --propagation private -- bash -c '
  set -e
  R=$1 MODEL=$2 USERSPEC=$3 CWD=$4; shift 4
  mount --bind "$R" "$R"
  mount -o remount,bind,ro "$R"
  mount -t proc proc "$R/proc"
  mount --rbind /dev "$R/dev"
  mount -t tmpfs -o mode=1777,size=256m tmpfs "$R/tmp"
  mount -t tmpfs -o mode=0755,size=1m tmpfs "$R/mnt/models"
  touch "$R/mnt/models/tiny-llama.gguf"
  mount --bind "$MODEL" "$R/mnt/models/tiny-llama.gguf"
  mount -o remount,ro "$R/mnt/models"
  exec chroot --userspec="$USERSPEC" --groups="${USERSPEC#*:}" "$R" /usr/bin/env -i -C "$CWD" "$@"
' image-run "$R" "$(readlink -f "$MODEL")" "$user" "$cwd" \
  "${envs[@]}" STORAGE_URI=pvc://models/tiny-llama.gguf \
  "${entry[@]}" --model-name tiny --host 127.0.0.1 --port "$port" --grpc-port same --drain-timeout 10 \
  >"$tmp/server.log" 2>&1 &
pid=$!
wait_ready "$base" "$tmp/server.log" 120 || { pid=""; exit 1; }

check "the server runs as uid 10001" '[[ "$(awk "/^Uid:/ {print \$2}" /proc/$pid/status)" == 10001 ]]'
check "its root filesystem is read-only" \
  'awk "\$5 == \"/\" {print \$6}" /proc/$pid/mountinfo | grep -qE "^ro(,|$)"'
check "models from /mnt/models because STORAGE_URI is set (logged)" 'grep -q "models from /mnt/models (STORAGE_URI pvc://" "$tmp/server.log"'
check "GET /v2/health/live 200" '[[ "$(curl -s -o /dev/null -w "%{http_code}" "$base/v2/health/live")" == 200 ]]'
check "GET /v2/health/ready 200" '[[ "$(curl -s -o /dev/null -w "%{http_code}" "$base/v2/health/ready")" == 200 ]]'
check "the model answers by its --model-name: /v2/models/tiny/ready 200" \
  '[[ "$(curl -s -o /dev/null -w "%{http_code}" "$base/v2/models/tiny/ready")" == 200 ]]'
check "POST /v1/completions (model tiny) 200 with text" \
  'curl -s -f "$base/v1/completions" -H "Content-Type: application/json" \
     -d "{\"model\":\"tiny\",\"prompt\":\"Hello\",\"max_tokens\":4,\"temperature\":0}" >"$tmp/completion.json" &&
   python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"choices\"][0][\"text\"]" "$tmp/completion.json"'
check "/metrics: the KV-cache gauge of model tiny" \
  'curl -s "$base/metrics" | grep -q "^gantry_kv_cache_usage_ratio{model=\"tiny\"}"'
printf '\x00\x00\x00\x00\x00' >"$tmp/live.req"
check "gRPC ServerLive over h2c on the HTTP port: live = true" \
  'curl -s --http2-prior-knowledge -X POST -H "content-type: application/grpc" -H "te: trailers" \
     --data-binary @"$tmp/live.req" -o "$tmp/live.resp" "$base/inference.GRPCInferenceService/ServerLive" &&
   [[ "$(od -An -tx1 "$tmp/live.resp" | tr -d " \n")" == 00000000020801 ]]'

kill -TERM "$pid"
for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
  echo "FAIL: the server did not exit within 15 s of SIGTERM"; status=1
else
  wait "$pid"; rc=$?
  pid=""
  check "SIGTERM: drained, exit 0" '((rc == 0)) && grep -q "drained" "$tmp/server.log"'
fi
if ((status)); then echo "--- server log"; tail -20 "$tmp/server.log"; echo "FAIL: the OCI image"; else echo "image: all checks passed"; fi
exit $status

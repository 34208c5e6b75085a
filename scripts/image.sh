#!/usr/bin/env bash
# Builds the OCI image of `gantry serve` from the self-contained bundle (make dist; docs/dist.md) on a Debian
# base made with Debian's own tools. No image registry is used or needed.
#
#   scripts/image.sh --bundle BUNDLE.tar.zst [--out DIR] [--tag TAG]
#   scripts/image.sh --base-only      (the cached Debian base alone: what make setup prepares)
#
#   base    `debootstrap --variant=minbase bookworm` from the apt mirror this machine uses, cached under
#           .cache/image/ with a stamp (suite, mirror, debootstrap version): minutes the first time, then
#           reused. Trimmed of apt's lists, docs and man pages.
#   image   an OCI image layout (umoci): layer 1 the base, layer 2 /opt/gantry (the bundle), the user
#           gantry (uid/gid 10001) and /usr/local/bin/gantry. Config: user 10001:10001, entrypoint
#           ["/opt/gantry/bin/gantry", "serve"], exposed ports 8080/tcp (HTTP; with --grpc-port same also
#           gRPC) and 8081/tcp (gRPC, KServe's port), working dir /tmp, env TMPDIR/XDG_CACHE_HOME/
#           GANTRY_CACHE_DIR under /tmp (the one writable place: mount an emptyDir there and the root
#           filesystem can be read-only).
#   output  DIR/gantry-<version>-oci/ (the layout) and DIR/gantry-<version>-oci.tar (an oci-archive:
#           `podman load -i`, `skopeo copy oci-archive:... docker://...`), tagged TAG (default <version>).
# Prints the archive's path on stdout; everything else goes to stderr.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEPS=${GANTRY_DEPS_DIR:-$ROOT/.cache}
BUNDLE=""
BASE_ONLY=0
OUT=$ROOT/dist
TAG=""
SUITE=bookworm
UID_GID=10001

die() { echo "image: FAILED: $*" >&2; exit 1; }
note() { echo "image: $*" >&2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --bundle) BUNDLE=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --tag) TAG=$2; shift 2 ;;
    --base-only) BASE_ONLY=1; shift ;;
    *) die "unknown argument $1 (see the header of $0)" ;;
  esac
done
((BASE_ONLY)) || [[ -f "$BUNDLE" ]] || die "--bundle BUNDLE.tar.zst: '$BUNDLE' is not a file (make dist writes one)"
for tool in debootstrap umoci zstd; do
  command -v "$tool" >/dev/null || die "$tool is not installed (scripts/apt-packages.txt; make setup installs it)"
done
[[ $(id -u) == 0 ]] || die "debootstrap and umoci's unpacking need root (the build machines run as root)"


# ------------------------------------------------------------------ the Debian base (cached)
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
[[ -n "$mirror" ]] || mirror=$(awk '$1=="deb" && $0 ~ /debian/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[[ -n "$mirror" ]] || die "no Debian mirror in /etc/apt/sources.list*"
base=$DEPS/image/base-$SUITE-minbase
want="$SUITE minbase $mirror debootstrap-$(dpkg-query -W -f='${Version}' debootstrap)"
if [[ -f "$base.stamp" && "$(cat "$base.stamp")" == "$want" && -f "$base/etc/debian_version" ]]; then
  note "reusing the Debian base $base"
else
  note "debootstrap --variant=minbase $SUITE from $mirror (a few minutes; cached in $base)"
  rm -rf "$base" "$base.stamp"
  mkdir -p "$(dirname "$base")"
  debootstrap --variant=minbase "$SUITE" "$base" "$mirror" >"$base.log" 2>&1 \
    || { tail -20 "$base.log" >&2; die "debootstrap (log: $base.log)"; }
  # Not needed to run: package lists, caches, docs, man pages, logs.
  rm -rf "$base"/var/lib/apt/lists/* "$base"/var/cache/apt/*.bin "$base"/var/cache/apt/archives/*.deb \
    "$base"/usr/share/doc/* "$base"/usr/share/man/* "$base"/usr/share/info/* "$base"/var/log/*.log
  echo "$want" >"$base.stamp"
fi
((BASE_ONLY)) && exit 0

name=$(basename "$BUNDLE" .tar.zst)       # gantry-<version>-linux-x86_64
version=${name#gantry-}; version=${version%-linux-x86_64}
TAG=${TAG:-$version}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# ------------------------------------------------------------------ the image
work=$(mktemp -d "$OUT/.image.XXXX")
trap 'rm -rf "$work"' EXIT
layout=$work/oci
umoci init --layout "$layout"
umoci new --image "$layout:$TAG"

# Layer 1: the base, as it is.
umoci insert --image "$layout:$TAG" --history.comment "debootstrap --variant=minbase $SUITE" "$base" /

# Layer 2: the bundle under /opt/gantry, its user, a symlink on PATH, an empty /mnt/models mount point.
top=$work/top
mkdir -p "$top/opt" "$top/etc" "$top/usr/local/bin" "$top/mnt/models"
tar -I zstd -xf "$BUNDLE" -C "$top/opt"
mv "$top/opt/$name" "$top/opt/gantry"
[[ -x "$top/opt/gantry/bin/gantry" ]] || die "$BUNDLE has no $name/bin/gantry"
ln -s /opt/gantry/bin/gantry "$top/usr/local/bin/gantry"
cp "$base/etc/passwd" "$base/etc/group" "$top/etc/"
echo "gantry:x:$UID_GID:$UID_GID:gantry serve:/tmp:/usr/sbin/nologin" >>"$top/etc/passwd"
echo "gantry:x:$UID_GID:" >>"$top/etc/group"
chmod 0644 "$top/etc/passwd" "$top/etc/group"
chown -R 0:0 "$top"
chmod -R go-w "$top"
umoci insert --image "$layout:$TAG" --history.comment "gantry bundle $name" "$top" /

umoci config --image "$layout:$TAG" \
  --config.user "$UID_GID:$UID_GID" \
  --config.entrypoint /opt/gantry/bin/gantry --config.entrypoint serve \
  --config.exposedports 8080/tcp --config.exposedports 8081/tcp \
  --config.workingdir /tmp \
  --config.env PATH=/usr/local/bin:/usr/bin:/bin \
  --config.env TMPDIR=/tmp --config.env XDG_CACHE_HOME=/tmp/cache --config.env GANTRY_CACHE_DIR=/tmp/cache/gantry \
  --config.label org.opencontainers.image.title=gantry \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.description=gantry serve: KServe v2 (HTTP, gRPC), OpenAI, Ollama, Anthropic APIs" \
  --author gantry \
  --history.comment "user $UID_GID, entrypoint gantry serve"
umoci gc --layout "$layout"

dest=$OUT/gantry-$version-oci
rm -rf "$dest" "$dest.tar"
mv "$layout" "$dest"
tar -C "$dest" -cf "$dest.tar" .
note "OCI image $dest (tag $TAG), archive $dest.tar ($(( $(stat -c %s "$dest.tar") / 1048576 )) MiB)"
echo "$dest.tar"

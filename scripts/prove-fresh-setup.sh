#!/usr/bin/env bash
# Proves the two-command set-up on a machine state like a new user's: removes the Debian packages
# Gantry's set-up installs (and what only they pulled in), clears the npm cache, clones this repo
# afresh and times `make test` there (then a second run, to show the cache works).
# DESTRUCTIVE for this machine's package set: run only on a scratch machine, as root.
# Usage: scripts/prove-fresh-setup.sh --yes-remove-packages [CLONE_DIR]
set -uo pipefail
[[ "${1:-}" == --yes-remove-packages ]] || { echo "usage: $0 --yes-remove-packages [CLONE_DIR]" >&2; exit 2; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLONE=${2:-/tmp/gantry-fresh}
export DEBIAN_FRONTEND=noninteractive
# Everything in apt-packages.txt that a bare Debian 12 image with a compiler lacks.
mapfile -t pkgs < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$ROOT/scripts/apt-packages.txt" | grep . |
  grep -vxE 'build-essential|cmake|ninja-build|git|pkg-config|nodejs|npm|python3|util-linux|libssl-dev')
apt-get remove --purge -y -qq "${pkgs[@]}" >/dev/null 2>&1
apt-get autoremove --purge -y -qq >/dev/null 2>&1
npm cache clean --force >/dev/null 2>&1
rm -rf "$CLONE" && git clone -q "$ROOT" "$CLONE" && cd "$CLONE" || exit 1
start=$(date +%s); CI=true make test >"$CLONE.log" 2>&1; rc=$?
echo "first make test: exit $rc in $(($(date +%s) - start)) s (log: $CLONE.log)"
start=$(date +%s); make test >"$CLONE.2.log" 2>&1; rc2=$?
echo "second make test: exit $rc2 in $(($(date +%s) - start)) s"
exit $((rc || rc2))

#!/usr/bin/env bash
# The main job `make run` performs: for now, show the machine's hardware and the runtimes Gantry links.
set -euo pipefail
cd "$(dirname "$0")/.."
build/bin/gantry version
build/bin/gantry detect

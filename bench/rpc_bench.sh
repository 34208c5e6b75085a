#!/usr/bin/env bash
# One model over several hosts: BENCH rpc-vs-llama-server and BENCH rpc-predicted-tg-error (bench/rpc_bench.py
# says how each is measured). Env: GANTRY_BUILD_DIR, GANTRY_DEPS_DIR, LLAMA_TOOLS_BIN, ROUNDS, REQUESTS,
# MAX_TOKENS, CTX.
set -uo pipefail
cd "$(dirname "$0")/.."
exec timeout -k 10 1800 /usr/bin/python3 -u bench/rpc_bench.py

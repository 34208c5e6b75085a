#!/usr/bin/env bash
# The prompt-cache case of bench/serve_gguf_vs_llama_server.sh: a ~1,200-token system prompt shared by
# every request, distinct short user turns, 8 clients x 3 requests x 32 tokens, gantry serve vs
# llama-server, rounds interleaved, tokens counted from the streams. Prints
#   BENCH prompt-cache-shared-system-prompt ratio=<gantry tok/s / llama-server tok/s>
# and both servers' TTFT p50. The same environment variables as that script apply.
MODE=shared-system-prompt exec bash "$(dirname "$0")/serve_gguf_vs_llama_server.sh" "$@"

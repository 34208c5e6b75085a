#!/usr/bin/env bash
# The shared-system-prompt case of bench/serve_gguf_vs_llama_server.sh (SECTION=prefix): a ~1,200-token
# system prompt shared by every request, distinct short user turns, 8 clients x 3 requests x 32 tokens,
# gantry serve (with and without cache_prompt) vs llama-server, both warm, rounds interleaved. Prints
#   BENCH serve-gguf-prefix-ttft-vs-llama-server ratio=<gantry TTFT p50 / llama-server TTFT p50>
#   BENCH serve-gguf-prefix-cache-gain ratio=<gantry TTFT p50 with cache_prompt: false / with the cache>
# The same environment variables as that script apply.
SECTION=prefix exec bash "$(dirname "$0")/serve_gguf_vs_llama_server.sh" "$@"

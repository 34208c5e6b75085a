#!/usr/bin/env bash
# The long-prompt case of bench/serve_gguf_vs_llama_server.sh (SECTION=stall): 4 streams generating
# while 3 prompts of ~3,000 tokens arrive one after another (context 4096 a slot), gantry serve vs
# llama-server, both warm, rounds interleaved. Prints
#   BENCH serve-gguf-long-prompt-stall ratio=<gantry p99 gap between streamed tokens / llama-server's>
# The same environment variables as that script apply.
SECTION=stall exec bash "$(dirname "$0")/serve_gguf_vs_llama_server.sh" "$@"

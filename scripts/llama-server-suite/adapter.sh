#!/usr/bin/env bash
# The "server binary" llama.cpp's server tests start (LLAMA_SERVER_BIN_PATH), for
# scripts/llama-server-suite.sh. Respells the command line only, the same way for both servers:
#   --hf-repo R [--hf-file F] (the tests' presets download from Hugging Face) becomes --model LOCAL, one of
#   the repository's generated random-weight models (no network here); a repository with no local
#   stand-in exits 1 ("not available offline"), so such a test fails on both servers.
#   No model at all (the presets of llama-server's router mode, whose tests are left out as its
#   internals) gets the tiny model, so that the suite's start-up check of every preset passes on both.
# Then it runs SUITE_TARGET: "llama" (llama.cpp's llama-server, SUITE_LLAMA_SERVER) or "gantry"
# (`SUITE_GANTRY serve`, which takes llama-server's command line itself).
set -uo pipefail
MODELS=${SUITE_MODELS:?SUITE_MODELS (the generated models directory) unset}
args=() repo="" file=""
while (($#)); do
  case $1 in
    --hf-repo|-hf|-hfr) repo=$2; shift 2 ;;
    --hf-file|-hff) file=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
if [[ -n "$repo" ]]; then
  case "$repo|$file" in
    ggml-org/test-model-stories260K*|ggml-org/stories15M_MOE*|"ggml-org/models|tinyllamas/stories260K.gguf"|ggml-org/tinygemma3*)
      args+=(--model "$MODELS/tiny-llama.gguf") ;;
    "ggml-org/models|bert-bge-small/"*) args+=(--model "$MODELS/tiny-llama.gguf") ;;
    "ggml-org/models|jina-reranker"*) args+=(--model "$MODELS/tiny-reranker.gguf") ;;
    *) echo "llama-server-suite adapter: $repo${file:+ $file} is not available offline" >&2; exit 1 ;;
  esac
fi
have_model=""
for a in "${args[@]}"; do [[ $a == --model || $a == -m || $a == --models-dir ]] && have_model=1; done
[[ -n "$have_model" ]] || args+=(--model "$MODELS/tiny-llama.gguf")
case ${SUITE_TARGET:-} in
  llama) exec "${SUITE_LLAMA_SERVER:?}" "${args[@]}" ;;
  gantry) exec "${SUITE_GANTRY:?}" serve "${args[@]}" ;;
  *) echo "llama-server-suite adapter: SUITE_TARGET must be llama or gantry" >&2; exit 2 ;;
esac

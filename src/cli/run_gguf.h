// `gantry run MODEL.gguf --prompt ...`: text generation through the Runtime, on any model whose backend
// generates text (llama.cpp today). The `run` command calls run_generation() for such models;
// add_run_gguf_flags() declares the flags it understands.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/llama_flags.h"
#include "gantry/backend/model.h"
#include "gantry/model/backend_options.h"

namespace gantry::cli {

struct RunGgufOptions {
  std::string prompt;
  std::string prompt_file;  // --prompt-file FILE|-: the prompt from a file or stdin (any length)
  std::string system;       // --system: a system message (with --chat)
  int max_tokens = 128;
  backend::SamplingParams sampling;  // the one definition of the sampling defaults
  int64_t seed = -1;                 // -1: random
  bool chat = false;
  std::vector<std::string> stop;
  // The llama.cpp flags `run` shares with the other commands (kRunLlamaFlags): --ctx (unset: the manifest's
  // llama.n_ctx, else 2048), --threads (0: all hardware threads), --n-gpu-layers (unset: what the planner
  // says fits on the chosen GPU, 0 on the CPU), --no-mmap, --chat-template-file, --draft-model, --rpc, ...
  LlamaFlags llama;
};

// Adds --prompt, --prompt-file, --max-tokens, --temperature, --top-k, --top-p, --min-p, --repeat-penalty,
// --seed, --chat, --system, --stop (repeatable) and the shared llama.cpp flags (kRunLlamaFlags) to `cmd`.
void add_run_gguf_flags(CLI::App& cmd, RunGgufOptions& options);

// Checks the flags that do not need the model (sampling ranges, sizes, seed; not --prompt).
// InvalidArgument names the flag.
Status validate_run_gguf_flags(const RunGgufOptions& options);

// Streams only the generated text to `out` (logs go to stderr). Returns the exit code: 0 success,
// 1 runtime failure (prompt longer than the context), 2 bad usage; errors are printed to stderr. A
// generation stops at the end of the context (finish max_tokens) rather than failing.
int run_generation(backend::Model& model, const RunGgufOptions& options, std::ostream& out);

}  // namespace gantry::cli

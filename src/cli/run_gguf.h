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

#include "cli/speculative_flags.h"
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
  std::optional<uint32_t> ctx;       // unset: the manifest's llama.n_ctx, else 2048
  int threads = 0;                   // 0: all hardware threads
  std::optional<int> n_gpu_layers;   // unset: what the planner says fits on the chosen GPU (0 on the CPU)
  bool chat = false;
  bool no_mmap = false;            // --no-mmap: read the weights into memory instead of mapping the file
  std::string chat_template_file;  // --chat-template-file: a Jinja chat template instead of the GGUF's
  std::vector<std::string> stop;
  SpeculativeFlags speculative;  // --draft-model, --draft-max, ... (cli/speculative_flags.h)
  std::vector<std::string> rpc;  // --rpc HOST:PORT,...: RPC servers whose devices take layers too
};

// Adds --prompt, --prompt-file, --no-mmap, --max-tokens, --temperature, --top-k, --top-p, --min-p,
// --repeat-penalty, --seed,
// --ctx, --threads, --n-gpu-layers, --chat, --system, --stop (repeatable) to `cmd`.
void add_run_gguf_flags(CLI::App& cmd, RunGgufOptions& options);

// Sets llama.cpp's "rpc" option from --rpc values (each HOST:PORT or a comma-separated list).
Status rpc_option(model::LlamaOptions& llama, const std::vector<std::string>& values);

// Checks the flags that do not need the model (sampling ranges, sizes, seed; not --prompt).
// InvalidArgument names the flag.
Status validate_run_gguf_flags(const RunGgufOptions& options);

// Streams only the generated text to `out` (logs go to stderr). Returns the exit code: 0 success,
// 1 runtime failure (prompt longer than the context), 2 bad usage; errors are printed to stderr. A
// generation stops at the end of the context (finish max_tokens) rather than failing.
int run_generation(backend::Model& model, const RunGgufOptions& options, std::ostream& out);

}  // namespace gantry::cli

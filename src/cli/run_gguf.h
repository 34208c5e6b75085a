// `gantry run MODEL.gguf ...`: text generation through the llama.cpp engine. The `run` command calls
// run_gguf() for .gguf models; add_run_gguf_flags() declares the flags it understands.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "gantry/backend/generation.h"

namespace gantry::cli {

struct RunGgufOptions {
  std::string model_path;
  std::string prompt;
  std::string system;  // --system: a system message (with --chat)
  int max_tokens = 128;
  backend::SamplingParams sampling;  // the flags start from the one set of defaults; seed below
  int64_t seed = -1;                 // -1: random
  uint32_t ctx = 2048;
  int threads = 0;  // 0: all hardware threads
  int n_gpu_layers = 0;
  bool chat = false;
  std::vector<std::string> stop;
};

// Adds --prompt, --max-tokens, --temperature, --top-k, --top-p, --min-p, --repeat-penalty, --seed,
// --ctx, --threads, --n-gpu-layers, --chat, --system, --stop (repeatable) to `cmd`.
void add_run_gguf_flags(CLI::App& cmd, RunGgufOptions& options);

// Streams only the generated text to `out` (logs go to stderr). Returns the exit code: 0 success,
// 1 runtime failure (missing/corrupt model, prompt too long, out of KV space), 2 bad usage (invalid
// sampling parameters or sizes); errors are printed to stderr.
int run_gguf(const RunGgufOptions& options, std::ostream& out);

}  // namespace gantry::cli

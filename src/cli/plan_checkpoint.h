// `gantry plan` for what people download: a Hugging Face checkpoint (a directory, its
// model.safetensors.index.json, one .safetensors file, or the same over http(s)) planned from config.json and
// the safetensors headers alone, and a model known only by its parameter count (--params 70B).
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/plan/catalogue.h"
#include "gantry/plan/checkpoint.h"
#include "gantry/plan/planner.h"
#include "gantry/plan/what_if.h"

namespace gantry::cli {

// Whether `spec` names a checkpoint rather than a model file: an http(s) URL, a directory, a .json
// (index) or a .safetensors file.
bool is_checkpoint_spec(const std::string& spec);

struct CheckpointRead {
  std::string label;  // the path or URL planned
  std::string config_json;
  std::vector<plan::CheckpointTensor> tensors;
  size_t files = 0;                      // safetensors files
  uint64_t stored_bytes = 0;             // their tensor data
  uint64_t bytes_read = 0;               // what planning read: config.json, the index, the headers
  std::vector<std::string> assumptions;  // --params: what the estimate assumes
};

// Reads config.json and the safetensors headers, nothing else. A URL is read with Range requests; its
// config.json is the one beside it. "https://huggingface.co/ORG/NAME" means that repository's main branch.
Result<CheckpointRead> read_checkpoint(const std::string& spec);

// --params: a llama-architecture model of about `params` parameters ("70B", "7.6b", "500M", "8e9").
// The shape is the nearest published Llama-family model's (1B, 3B, 8B, 13B, 32B, 70B, 405B), with the layer
// count scaled to the parameter count; any given field replaces the assumed one (then the layer count is
// derived from the rest unless given too).
struct ParamsSpec {
  std::string params;
  uint32_t layers = 0, heads = 0, kv_heads = 0, embd = 0, ff = 0, vocab = 0, ctx_train = 0;
};
Result<CheckpointRead> params_checkpoint(const ParamsSpec& spec);
// "70B" -> 70e9; InvalidArgument for anything else.
Result<uint64_t> parse_param_count(const std::string& text);

// What the checkpoint planner needs from `gantry plan`'s flags and machine.
struct CheckpointPlanRequest {
  std::string spec;   // path or URL (empty with --params)
  ParamsSpec params;  // used when params.params is set
  std::string quant;  // "", a file type, or "all"
  bool ctx_given = false;
  plan::PlanOptions options;
  bool json = false;
  bool speed = false;
  std::string what_if;
  const plan::Catalogue* catalogue = nullptr;  // set when what_if or speed needs it
  std::vector<plan::Device> devices;
  // This machine as a what-if target / for --speed (built on demand: it may time a memory triad).
  std::function<plan::WhatIfTarget()> this_machine;
};

// Plans and prints; returns the exit code (0, 1 runtime failure, 2 bad usage).
int run_checkpoint_plan(const CheckpointPlanRequest& request, std::ostream& out, std::ostream& err);

}  // namespace gantry::cli

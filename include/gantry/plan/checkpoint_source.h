// What `gantry plan` reads of a Hugging Face checkpoint: config.json and the safetensors headers, nothing
// else, from a directory, its model.safetensors.index.json, one .safetensors file, or the same over http(s)
// (Range requests through gantry/weights/source.h). The result feeds convert_checkpoint (checkpoint.h).
//
// - A URL's config.json is the one beside it; "https://huggingface.co/ORG/NAME" means that repository's main
//   branch (its index, else its model.safetensors).
// - bytes_read is what planning read: config.json, the index and the headers, as the weight sources count
//   them (plus config.json of a local directory, which the loader reads without a source).
// - Errors: whatever the source or the safetensors reader says; InvalidArgument for a file that is not
//   safetensors; NotFound for a URL with neither an index nor a model.safetensors, or a checkpoint without
//   config.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/plan/checkpoint.h"
#include "gantry/weights/loader.h"

namespace gantry::plan {

// A checkpoint as planning sees it; also what params_estimate.h makes of a bare parameter count.
struct CheckpointRead {
  std::string label;  // the path or URL planned (with --params: the count as given)
  std::string config_json;
  std::vector<CheckpointTensor> tensors;
  size_t files = 0;                      // safetensors files
  uint64_t stored_bytes = 0;             // their tensor data
  uint64_t bytes_read = 0;               // what planning read: config.json, the index, the headers
  std::vector<std::string> assumptions;  // an estimate's (params_estimate.h); empty for a real checkpoint
};

// Whether `spec` names a checkpoint rather than a model file: an http(s) URL, a directory, a .json (index)
// or a .safetensors file.
bool is_checkpoint_spec(const std::string& spec);

// Reads config.json and the safetensors headers of `spec`.
Result<CheckpointRead> read_checkpoint(const std::string& spec);

// The tensors a weight reader found, as the checkpoint planner takes them (header shapes, outermost first).
std::vector<CheckpointTensor> checkpoint_tensors(const weights::WeightMetadata& meta);

// A short name for what was planned: the checkpoint's directory ("Qwen2.5-7B-Instruct"), also for an index,
// a model.safetensors or a URL inside it (a Hub URL's resolve/main left out); `spec` itself when nothing is
// left.
std::string checkpoint_name(const std::string& spec);

}  // namespace gantry::plan

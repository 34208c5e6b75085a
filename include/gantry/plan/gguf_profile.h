// Inputs for the planner: a GGUF file's tensor infos and metadata become a ModelProfile, and
// the hardware registry's devices become Device entries (the CPU with available host memory, GPUs with
// their free memory).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/hw/registry.h"
#include "gantry/model/gguf.h"
#include "gantry/model/gguf_hparams.h"
#include "gantry/plan/model_profile.h"
#include "gantry/plan/planner.h"

namespace gantry::plan {

// Reads `<arch>.block_count`, head counts (scalar or per-layer arrays), key/value lengths, feed-forward
// length, sliding window, training context, vocabulary size; sums tensor bytes per layer ("blk.N."), input
// ("token_embd") and output ("output", "output_norm"). Fails with kInvalidArgument naming the missing field.
Result<ModelProfile> profile_from_gguf(const model::GgufFile& file);
Result<ModelProfile> profile_from_gguf(const std::filesystem::path& path);

// The same profile from the parts of a GGUF file it reads: checked hyperparameters, which layers use
// sliding-window attention, and the tensor infos (offsets relative to the data section). A Hugging Face
// checkpoint planned before conversion builds these parts itself (gantry/plan/checkpoint.h), so both paths
// share every rule below. Fails when a tensor names a layer at or above n_layer.
Result<ModelProfile> profile_from_tensors(const model::GgufHyperparameters& hparams,
                                          const std::vector<bool>& sliding_window,
                                          const std::vector<model::GgufTensorInfo>& tensors, std::string name,
                                          uint64_t file_bytes);

// Which of `n_layer` layers use sliding-window attention in llama.cpp: none without a window (n_swa 0);
// else the explicit per-layer pattern when given, else a period (layer il is SWA when il % period <
// period - 1; `period` 0: the architecture's built-in one, e.g. 2 for gemma2, 6 for gemma3, else every
// layer).
std::vector<bool> sliding_window_layers(std::string_view architecture, uint32_t n_layer, uint32_t n_swa,
                                        uint32_t period, const std::vector<bool>& pattern = {});

// The registry's CPU (host memory: available, or the container limit when lower) and its GPUs with known
// memory.
std::vector<Device> devices_from_registry(const hw::Registry& registry);

}  // namespace gantry::plan

// The planner's view of a GGUF file: its tensor infos and metadata become a plan::ModelProfile.
// It lives with the llama.cpp backend (the engine that runs GGUF) so that the backend can plan before
// it loads; the runtime re-exports it (gantry/runtime/model_profile.h).
#pragma once

#include <filesystem>

#include "gantry/core/status.h"
#include "gantry/model/gguf.h"
#include "gantry/plan/model_profile.h"

namespace gantry::llama {

// Reads `<arch>.block_count`, head counts (scalar or per-layer arrays), key/value lengths, feed-forward
// length, sliding window, training context, vocabulary size; sums tensor bytes per layer ("blk.N."), input
// ("token_embd") and output ("output", "output_norm"). Fails with kInvalidArgument naming the missing field.
Result<plan::ModelProfile> profile_from_gguf(const model::GgufFile& file);
Result<plan::ModelProfile> profile_from_gguf(const std::filesystem::path& path);

}  // namespace gantry::llama

// Writers for the formats `gantry weights convert` produces. Each writes through core::AtomicFile: a
// failed write leaves nothing behind and never replaces an existing file half-way.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/weights/weight.h"

namespace gantry::weights {

// safetensors: plain types only (a block-quantised weight is refused with its name). `metadata` goes to
// the header's "__metadata__" (string -> string, as the format requires). The header lists the tensors
// in the given order and is padded with spaces so the data starts 8-byte aligned; the data is laid out as
// the reference implementation does, by decreasing element size (stable, so the given order otherwise),
// back to back (the format allows no holes): every tensor is aligned to its element size in the file.
Status write_safetensors(const std::filesystem::path& path, const std::vector<Weight>& weights,
                         const std::map<std::string, std::string>& metadata);

// GGUF v3: plain types with a ggml equivalent (f32, f16, bf16, f64, i8..i64) and ggml block types.
// `metadata` becomes string key/value pairs ("general.name", ...). Alignment 32.
Status write_gguf(const std::filesystem::path& path, const std::vector<Weight>& weights,
                  const std::map<std::string, std::string>& metadata);

}  // namespace gantry::weights

// The header of a NumPy .npy array holding weights (internal to src/weights): gantry/core/npy.h's parser
// (format versions 1-3, little-endian or byte-order-free C-order arrays), limited to the numeric types and
// bool, with errors naming where the array came from.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "gantry/core/npy.h"
#include "gantry/core/status.h"

namespace gantry::weights {

using gantry::NpyHeader;

// `bytes`: the start of the file (at least the whole header). Corrupt/Unsupported naming `label`.
Result<NpyHeader> parse_npy_header(std::span<const std::byte> bytes, const std::string& label);

}  // namespace gantry::weights

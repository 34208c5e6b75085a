// The header of a NumPy .npy array (internal to src/weights): format versions 1-3, little-endian or
// byte-order-free C-order arrays of the numeric types and bool.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "gantry/core/dtype.h"
#include "gantry/core/shape.h"
#include "gantry/core/status.h"

namespace gantry::weights {

struct NpyHeader {
  DType dtype = DType::kFloat32;
  Shape shape;
  uint64_t data_offset = 0;  // where the elements start
};

// `bytes`: the start of the file (at least the whole header). Corrupt/Unsupported naming `label`.
Result<NpyHeader> parse_npy_header(std::span<const std::byte> bytes, const std::string& label);

}  // namespace gantry::weights

#include "weights/npy_header.h"

namespace gantry::weights {

Result<NpyHeader> parse_npy_header(std::span<const std::byte> bytes, const std::string& label) {
  auto h = gantry::parse_npy_header(bytes);
  if (!h.ok()) return h.status().with_context(label);
  if (h->dtype == DType::kString)
    return Unsupported(label + ": .npy dtype '" + h->descr +
                       "': strings are not weights (f2/f4/f8, i1..i8, u1..u8 and b1 are read)");
  return h;
}

}  // namespace gantry::weights

// NumPy `.npy` files: read and write tensors in format versions 1.0, 2.0 and 3.0.
//
// Supported: little-endian (or byte-order-free) C-order arrays of f32, f16, f64, i8..i64, u8..u64, bool, and
// unicode strings ('<U<n>', read into and written from string tensors as UTF-8). Everything else — Fortran
// order, big-endian data, object arrays, structured dtypes, bf16 (numpy has none) — is refused with an error
// that says what was found. Malformed input (bad magic, bad header, truncated or excess data) is a Corrupt
// error; nothing is allocated beyond what the input bytes can hold.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>

#include "gantry/core/status.h"
#include "gantry/core/tensor.h"

namespace gantry {

// The preamble and header of a .npy file: the array's element type and shape, and where its elements
// start. For readers that take the elements from elsewhere (a mapped file, a zip member, an HTTP range).
struct NpyHeader {
  DType dtype = DType::kFloat32;
  std::string descr;         // as written ("<f4", "<U7")
  Shape shape;               // its element count fits in int64
  uint64_t item_size = 0;    // bytes per element in the file (4 per character for unicode strings)
  uint64_t data_offset = 0;  // where the elements start
};

// Parses the header at the start of a .npy file; `bytes` holds at least the whole header (the elements need
// not follow). The one .npy header parser: the rules and errors of parse_npy, which checks the elements on
// top (their length, bool bytes, code points).
Result<NpyHeader> parse_npy_header(std::span<const std::byte> bytes);

// Parses a whole .npy file held in memory into an owning tensor.
Result<Tensor> parse_npy(std::span<const std::byte> bytes);

// Reads a .npy file. NotFound when missing; errors are prefixed with the path.
Result<Tensor> read_npy(const std::filesystem::path& path);

// Serialises a host tensor as .npy bytes (version 1.0, or 2.0 when the header needs it).
Result<std::string> serialize_npy(ConstTensorView tensor);

// Writes a host tensor to `path` (replacing it).
Status write_npy(const std::filesystem::path& path, ConstTensorView tensor);

}  // namespace gantry

// Copies a strided view of a row-major array into a dense row-major array: the engine of transpose and
// slice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gantry::weights::detail {

// Writes every element of the view (dims `out_dims`; element k of dimension i is `src_strides[i]`
// elements further in `src`) densely to `dst`, in row-major order. Strides are in elements of
// `elem_size` bytes and may be of any sign; `src` points at the view's first element.
void strided_copy(const std::byte* src, size_t elem_size, const std::vector<int64_t>& out_dims,
                  const std::vector<int64_t>& src_strides, std::byte* dst);

// Row-major strides (in elements) of dims.
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims);

}  // namespace gantry::weights::detail

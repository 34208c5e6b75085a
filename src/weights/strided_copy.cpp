#include "weights/strided_copy.h"

#include <cstring>

namespace gantry::weights::detail {
namespace {

// The innermost dimension, specialised on the element size so the copy compiles to plain loads/stores.
template <size_t N>
void copy_row(const std::byte* src, int64_t stride, int64_t count, std::byte* dst) {
  if (stride == 1) {
    std::memcpy(dst, src, static_cast<size_t>(count) * N);
    return;
  }
  for (int64_t k = 0; k < count; ++k) std::memcpy(dst + k * N, src + k * stride * static_cast<int64_t>(N), N);
}

void copy_row_any(const std::byte* src, size_t elem_size, int64_t stride, int64_t count, std::byte* dst) {
  switch (elem_size) {
    case 1:
      return copy_row<1>(src, stride, count, dst);
    case 2:
      return copy_row<2>(src, stride, count, dst);
    case 4:
      return copy_row<4>(src, stride, count, dst);
    case 8:
      return copy_row<8>(src, stride, count, dst);
    default:
      for (int64_t k = 0; k < count; ++k)
        std::memcpy(dst + k * static_cast<int64_t>(elem_size),
                    src + k * stride * static_cast<int64_t>(elem_size), elem_size);
  }
}

}  // namespace

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

void strided_copy(const std::byte* src, size_t elem_size, const std::vector<int64_t>& out_dims,
                  const std::vector<int64_t>& src_strides, std::byte* dst) {
  const size_t rank = out_dims.size();
  for (int64_t d : out_dims)
    if (d == 0) return;
  if (rank == 0) {
    std::memcpy(dst, src, elem_size);
    return;
  }
  const int64_t inner = out_dims[rank - 1];
  const int64_t inner_stride = src_strides[rank - 1];
  const int64_t esize = static_cast<int64_t>(elem_size);
  std::vector<int64_t> idx(rank, 0);  // odometer over the outer dimensions
  int64_t offset = 0;                 // element offset of the current row in src
  std::byte* out = dst;
  while (true) {
    copy_row_any(src + offset * esize, elem_size, inner_stride, inner, out);
    out += inner * esize;
    size_t d = rank - 1;
    while (d > 0) {
      --d;
      ++idx[d];
      offset += src_strides[d];
      if (idx[d] < out_dims[d]) break;
      offset -= src_strides[d] * out_dims[d];
      idx[d] = 0;
      if (d == 0) return;
    }
    if (rank == 1) return;
  }
}

}  // namespace gantry::weights::detail

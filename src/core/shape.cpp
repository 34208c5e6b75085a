#include "gantry/core/shape.h"

namespace gantry {

bool Shape::is_dynamic() const {
  for (int64_t d : dims_)
    if (d < 0) return true;
  return false;
}

std::optional<int64_t> Shape::element_count() const {
  int64_t n = 1;
  for (int64_t d : dims_) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > INT64_MAX / d) return std::nullopt;
    n *= d;
  }
  return n;
}

bool Shape::accepts(const Shape& concrete) const {
  if (concrete.rank() != rank()) return false;
  for (size_t i = 0; i < rank(); ++i)
    if (dims_[i] >= 0 && dims_[i] != concrete.dims_[i]) return false;
  return true;
}

std::string Shape::to_string() const {
  std::string out = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) out += ',';
    out += dims_[i] < 0 ? std::string("?") : std::to_string(dims_[i]);
  }
  out += ']';
  return out;
}

}  // namespace gantry

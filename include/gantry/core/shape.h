// Shape: tensor dimensions, where a dimension may be dynamic (unknown until run time).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gantry {

class Shape {
 public:
  static constexpr int64_t kDynamic = -1;

  Shape() = default;  // a scalar: rank 0, one element
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  size_t rank() const { return dims_.size(); }
  int64_t operator[](size_t i) const { return dims_[i]; }
  const std::vector<int64_t>& dims() const { return dims_; }
  bool is_dynamic() const;

  // Product of the dimensions; nullopt when any is dynamic or the product overflows int64.
  std::optional<int64_t> element_count() const;

  // True when `concrete` has the same rank and equals every static dimension of this shape.
  bool accepts(const Shape& concrete) const;

  // "[1,3,?,224]"
  std::string to_string() const;

  bool operator==(const Shape& other) const = default;

 private:
  std::vector<int64_t> dims_;
};

}  // namespace gantry

// Tensor: typed, shaped data that owns its bytes: it allocated them, or it shares the ownership of what
// holds them (adopt: a request body, a file mapping, a runtime's buffer), so its bytes live as long as
// any copy of it.
//
// Copies of a Tensor share the same bytes (like a shared_ptr); use clone() for a deep copy.
// Memory a Tensor does not own is a ConstTensorView / TensorView (tensor_view.h), a type of its own:
// code that only borrows a tensor takes one, and a Tensor converts to either; values<T>() checks T
// against the dtype as described there.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gantry/core/dtype.h"
#include "gantry/core/shape.h"
#include "gantry/core/status.h"
#include "gantry/core/tensor_view.h"

namespace gantry {

class Tensor {
 public:
  Tensor() = default;

  // Zero-filled owning tensor. Fails for dynamic shapes and for kString (use from_strings).
  static Result<Tensor> allocate(DType dtype, const Shape& shape);

  // Tensor over `bytes` bytes at `data` whose lifetime is held by `owner` (a buffer a runtime allocated,
  // a request body, a file mapping; `memory`/`device_id` say where the bytes are): copies of the tensor
  // keep `owner` alive; it is released with the last copy. `owner` must keep `data` valid while it lives.
  // Fails when `owner` is null or the size does not match dtype × shape.
  static Result<Tensor> adopt(DType dtype, const Shape& shape, void* data, size_t bytes,
                              std::shared_ptr<void> owner, MemoryClass memory = MemoryClass::kHost,
                              int device_id = -1);

  // Owning string tensor; strings.size() must equal the shape's element count.
  static Result<Tensor> from_strings(const Shape& shape, std::vector<std::string> strings);

  // Owning tensor copied from `values`; values.size() must equal the shape's element count.
  template <typename T>
  static Result<Tensor> from_values(DType dtype, const Shape& shape, const std::vector<T>& values) {
    if (dtype_size(dtype) != sizeof(T)) return InvalidArgument("element size does not match dtype");
    auto t = allocate(dtype, shape);
    if (!t.ok()) return t;
    if (values.size() != static_cast<size_t>(t->element_count()))
      return InvalidArgument("got " + std::to_string(values.size()) + " values for shape " +
                             shape.to_string());
    if (!values.empty()) std::memcpy(t->data(), values.data(), values.size() * sizeof(T));
    return t;
  }

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t element_count() const { return shape_.element_count().value_or(0); }
  // Bytes of numeric data; for string tensors the sum of string lengths.
  size_t byte_size() const;
  bool empty() const { return data_ == nullptr && strings_ == nullptr; }
  MemoryClass memory_class() const { return memory_; }
  int device_id() const { return device_id_; }

  void* data() { return data_; }
  const void* data() const { return data_; }

  // Typed access to host memory: T must be what dtype() is stored as (see tensor_view.h; asserted in debug
  // builds).
  template <typename T>
  std::span<T> values() {
    GANTRY_CHECK_ELEMENT_TYPE(T, dtype_);
    return {static_cast<T*>(data_), static_cast<size_t>(element_count())};
  }
  template <typename T>
  std::span<const T> values() const {
    GANTRY_CHECK_ELEMENT_TYPE(T, dtype_);
    return {static_cast<const T*>(data_), static_cast<size_t>(element_count())};
  }
  template <typename T>
  bool holds() const {
    return dtype_stores<T>(dtype_);
  }

  // This tensor's elements borrowed (valid while this tensor or a copy of it lives).
  operator ConstTensorView() const {  // NOLINT(google-explicit-constructor)
    return ConstTensorView(dtype_, shape_, data_, memory_, device_id_, strings_.get());
  }
  operator TensorView() {  // NOLINT(google-explicit-constructor)
    return TensorView(dtype_, shape_, data_, memory_, device_id_, strings_.get());
  }

  const std::vector<std::string>& strings() const;

  // Deep, owning copy (host memory only).
  Result<Tensor> clone() const;

 private:
  DType dtype_ = DType::kFloat32;
  Shape shape_;
  void* data_ = nullptr;
  MemoryClass memory_ = MemoryClass::kHost;
  int device_id_ = -1;
  std::shared_ptr<std::byte[]> storage_;               // numeric data: owned, or the adopted owner
  std::shared_ptr<std::vector<std::string>> strings_;  // set for string tensors
};

// A tensor with the name it is bound to: a model input/output, or a TensorProto's name (may be empty).
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

}  // namespace gantry

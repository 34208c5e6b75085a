// ConstTensorView and TensorView: a tensor's elements borrowed, as a type (as ONNX Runtime's
// Ort::ConstValue / UnownedValue borrow an OrtValue). A view owns and frees nothing and is cheap to copy
// (its shape is copied); whatever owns the memory (a Tensor, the caller's buffer) must outlive it. A Tensor
// converts to either implicitly, so a function that only reads a tensor takes a ConstTensorView, and one
// that writes into caller memory a TensorView.
//
// Typed access, values<T>() here and on Tensor: T must be the type the dtype's elements are stored as
// (dtype_storage_t: float for f32, uint16_t for f16/bf16, uint8_t for bool and FP8, ...). That is checked
// where it costs nothing on the hot path: in debug builds (NDEBUG unset, as in the asan preset; or with
// GANTRY_CHECK_DTYPES defined) a mismatch aborts naming the dtype and T's size; release builds do not check,
// and values<T>() stays a pointer and a count. Code whose T follows a run-time dtype asks holds<T>() first or
// dispatches with visit_dtype.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "gantry/core/dtype.h"
#include "gantry/core/shape.h"
#include "gantry/core/status.h"

#if !defined(NDEBUG) || defined(GANTRY_CHECK_DTYPES)
#define GANTRY_CHECK_ELEMENT_TYPE(T, dtype) ::gantry::detail::check_element_type<T>(dtype)
#else
#define GANTRY_CHECK_ELEMENT_TYPE(T, dtype) ((void)0)
#endif

namespace gantry {

// Where a tensor's bytes live. Device memory cannot be read by the host directly.
enum class MemoryClass { kHost, kPinned, kDevice };
std::string_view memory_class_name(MemoryClass m);

namespace detail {
// Aborts naming the element type asked for (by size) and the tensor's dtype.
[[noreturn]] void element_type_mismatch(DType dtype, size_t element_size, bool is_float);
template <typename T>
void check_element_type(DType dtype) {
  if (!dtype_stores<T>(dtype)) element_type_mismatch(dtype, sizeof(T), std::is_floating_point_v<T>);
}
}  // namespace detail

class ConstTensorView {
 public:
  ConstTensorView() = default;
  // Over `bytes` bytes at `data`, which must be exactly dtype x shape (a static shape; not kString).
  static Result<ConstTensorView> over(DType dtype, const Shape& shape, const void* data, size_t bytes,
                                      MemoryClass memory = MemoryClass::kHost, int device_id = -1);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t element_count() const { return shape_.element_count().value_or(0); }
  // Bytes of numeric data; for string tensors the sum of string lengths.
  size_t byte_size() const;
  bool empty() const { return data_ == nullptr && strings_ == nullptr; }
  MemoryClass memory_class() const { return memory_; }
  int device_id() const { return device_id_; }

  const void* data() const { return data_; }
  // Whether values<T>() fits this dtype.
  template <typename T>
  bool holds() const {
    return dtype_stores<T>(dtype_);
  }
  template <typename T>
  std::span<const T> values() const {
    GANTRY_CHECK_ELEMENT_TYPE(T, dtype_);
    return {static_cast<const T*>(data_), static_cast<size_t>(element_count())};
  }
  // A string tensor's elements (empty for other dtypes).
  const std::vector<std::string>& strings() const;

 protected:
  friend class Tensor;
  ConstTensorView(DType dtype, Shape shape, const void* data, MemoryClass memory, int device_id,
                  const std::vector<std::string>* strings)
      : dtype_(dtype),
        shape_(std::move(shape)),
        data_(data),
        memory_(memory),
        device_id_(device_id),
        strings_(strings) {}

  DType dtype_ = DType::kFloat32;
  Shape shape_;
  const void* data_ = nullptr;
  MemoryClass memory_ = MemoryClass::kHost;
  int device_id_ = -1;
  const std::vector<std::string>* strings_ = nullptr;  // string tensors: the owner's elements
};

// A view whose elements may be written.
class TensorView : public ConstTensorView {
 public:
  TensorView() = default;
  static Result<TensorView> over(DType dtype, const Shape& shape, void* data, size_t bytes,
                                 MemoryClass memory = MemoryClass::kHost, int device_id = -1);

  void* data() const { return const_cast<void*>(data_); }
  template <typename T>
  std::span<T> values() const {
    GANTRY_CHECK_ELEMENT_TYPE(T, dtype_);
    return {static_cast<T*>(data()), static_cast<size_t>(element_count())};
  }

 private:
  friend class Tensor;
  TensorView(DType dtype, Shape shape, void* data, MemoryClass memory, int device_id,
             const std::vector<std::string>* strings)
      : ConstTensorView(dtype, std::move(shape), data, memory, device_id, strings) {}
};

}  // namespace gantry

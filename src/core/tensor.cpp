#include "gantry/core/tensor.h"

#include <cstdio>
#include <cstdlib>

namespace gantry {

std::string_view memory_class_name(MemoryClass m) {
  switch (m) {
    case MemoryClass::kHost:
      return "host";
    case MemoryClass::kPinned:
      return "pinned";
    case MemoryClass::kDevice:
      return "device";
  }
  return "unknown";
}

Result<Tensor> Tensor::allocate(DType dtype, const Shape& shape) {
  if (dtype == DType::kString) return InvalidArgument("string tensors are built with Tensor::from_strings");
  auto n = shape.element_count();
  if (!n)
    return InvalidArgument("cannot allocate a tensor of dynamic or overflowing shape " + shape.to_string());
  const size_t elem = dtype_size(dtype);
  if (*n > 0 && static_cast<uint64_t>(*n) > SIZE_MAX / elem)
    return ResourceExhausted("tensor of shape " + shape.to_string() + " is too large");
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  const size_t bytes = static_cast<size_t>(*n) * elem;
  t.storage_ = std::shared_ptr<std::byte[]>(new (std::nothrow) std::byte[bytes == 0 ? 1 : bytes]());
  if (!t.storage_)
    return ResourceExhausted("out of host memory allocating " + std::to_string(bytes) + " bytes");
  t.data_ = t.storage_.get();
  return t;
}

namespace detail {

void element_type_mismatch(DType dtype, size_t element_size, bool is_float) {
  std::fprintf(stderr,
               "gantry: values<T>() with T a %zu-byte %s type on a %s tensor, whose elements are stored as "
               "another type (see gantry/core/tensor_view.h)\n",
               element_size, is_float ? "floating-point" : "non-floating-point",
               std::string(dtype_name(dtype)).c_str());
  std::abort();
}

}  // namespace detail

namespace {

// Why `bytes` bytes at `data` cannot be viewed as `dtype` x `shape`; Ok when they can.
Status check_view(DType dtype, const Shape& shape, const void* data, size_t bytes) {
  if (dtype == DType::kString) return InvalidArgument("string tensors cannot be views");
  auto n = shape.element_count();
  if (!n) return InvalidArgument("a view needs a static shape, got " + shape.to_string());
  const size_t want = static_cast<size_t>(*n) * dtype_size(dtype);
  if (want != bytes)
    return InvalidArgument("a " + std::string(dtype_name(dtype)) + " tensor of shape " + shape.to_string() +
                           " needs " + std::to_string(want) + " bytes, got " + std::to_string(bytes));
  if (data == nullptr && want > 0) return InvalidArgument("a view of null memory");
  return Status::Ok();
}

size_t bytes_of(DType dtype, const Shape& shape, const std::vector<std::string>* strings) {
  if (dtype == DType::kString) {
    size_t total = 0;
    if (strings)
      for (const auto& s : *strings) total += s.size();
    return total;
  }
  return static_cast<size_t>(shape.element_count().value_or(0)) * dtype_size(dtype);
}

const std::vector<std::string>& strings_or_none(const std::vector<std::string>* strings) {
  static const std::vector<std::string> kNone;
  return strings ? *strings : kNone;
}

}  // namespace

Result<ConstTensorView> ConstTensorView::over(DType dtype, const Shape& shape, const void* data, size_t bytes,
                                              MemoryClass memory, int device_id) {
  GANTRY_RETURN_IF_ERROR(check_view(dtype, shape, data, bytes));
  return ConstTensorView(dtype, shape, data, memory, device_id, nullptr);
}

size_t ConstTensorView::byte_size() const { return bytes_of(dtype_, shape_, strings_); }

const std::vector<std::string>& ConstTensorView::strings() const { return strings_or_none(strings_); }

Result<TensorView> TensorView::over(DType dtype, const Shape& shape, void* data, size_t bytes,
                                    MemoryClass memory, int device_id) {
  GANTRY_RETURN_IF_ERROR(check_view(dtype, shape, data, bytes));
  return TensorView(dtype, shape, data, memory, device_id, nullptr);
}

Result<Tensor> Tensor::adopt(DType dtype, const Shape& shape, void* data, size_t bytes,
                             std::shared_ptr<void> owner, MemoryClass memory, int device_id) {
  if (!owner) return InvalidArgument("Tensor::adopt needs an owner");
  GANTRY_RETURN_IF_ERROR(check_view(dtype, shape, data, bytes));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.data_ = data;
  t.memory_ = memory;
  t.device_id_ = device_id;
  // Aliasing constructor: shares ownership with `owner`, points at the data.
  t.storage_ = std::shared_ptr<std::byte[]>(std::move(owner), static_cast<std::byte*>(data));
  return t;
}

Result<Tensor> Tensor::from_strings(const Shape& shape, std::vector<std::string> strings) {
  auto n = shape.element_count();
  if (!n) return InvalidArgument("string tensor needs a static shape, got " + shape.to_string());
  if (static_cast<size_t>(*n) != strings.size())
    return InvalidArgument("got " + std::to_string(strings.size()) + " strings for shape " +
                           shape.to_string());
  Tensor t;
  t.dtype_ = DType::kString;
  t.shape_ = shape;
  t.strings_ = std::make_shared<std::vector<std::string>>(std::move(strings));
  return t;
}

size_t Tensor::byte_size() const { return bytes_of(dtype_, shape_, strings_.get()); }

const std::vector<std::string>& Tensor::strings() const { return strings_or_none(strings_.get()); }

Result<Tensor> Tensor::clone() const {
  if (dtype_ == DType::kString) return from_strings(shape_, strings());
  if (memory_ == MemoryClass::kDevice)
    return Unsupported("cannot clone a tensor in device memory on the host");
  auto t = allocate(dtype_, shape_);
  if (!t.ok()) return t;
  if (byte_size() > 0) std::memcpy(t->data(), data_, byte_size());
  return t;
}

}  // namespace gantry

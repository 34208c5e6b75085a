#include "gantry/core/tensor.h"

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

Result<Tensor> Tensor::view(DType dtype, const Shape& shape, void* data, size_t bytes, MemoryClass memory,
                            int device_id) {
  if (dtype == DType::kString) return InvalidArgument("string tensors cannot be views");
  auto n = shape.element_count();
  if (!n) return InvalidArgument("a view needs a static shape, got " + shape.to_string());
  const size_t want = static_cast<size_t>(*n) * dtype_size(dtype);
  if (want != bytes)
    return InvalidArgument("a " + std::string(dtype_name(dtype)) + " tensor of shape " + shape.to_string() +
                           " needs " + std::to_string(want) + " bytes, got " + std::to_string(bytes));
  if (data == nullptr && want > 0) return InvalidArgument("a view of null memory");
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.data_ = data;
  t.memory_ = memory;
  t.device_id_ = device_id;
  return t;
}

Result<Tensor> Tensor::adopt(DType dtype, const Shape& shape, void* data, size_t bytes,
                             std::shared_ptr<void> owner) {
  if (!owner) return InvalidArgument("Tensor::adopt needs an owner");
  GANTRY_ASSIGN_OR_RETURN(Tensor t, view(dtype, shape, data, bytes));
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

size_t Tensor::byte_size() const {
  if (dtype_ == DType::kString) {
    size_t total = 0;
    if (strings_)
      for (const auto& s : *strings_) total += s.size();
    return total;
  }
  return static_cast<size_t>(element_count()) * dtype_size(dtype_);
}

const std::vector<std::string>& Tensor::strings() const {
  static const std::vector<std::string> kNone;
  return strings_ ? *strings_ : kNone;
}

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

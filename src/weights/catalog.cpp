#include "weights/catalog.h"

#include <array>
#include <utility>

#include "gantry/core/checked_math.h"

namespace gantry::weights {
namespace {

constexpr std::array<std::pair<std::string_view, DType>, 15> kSafetensorsDtypes{{
    {"F64", DType::kFloat64},
    {"F32", DType::kFloat32},
    {"F16", DType::kFloat16},
    {"BF16", DType::kBFloat16},
    {"F8_E4M3", DType::kFloat8E4M3},
    {"F8_E5M2", DType::kFloat8E5M2},
    {"BOOL", DType::kBool},
    {"U8", DType::kUInt8},
    {"I8", DType::kInt8},
    {"U16", DType::kUInt16},
    {"I16", DType::kInt16},
    {"U32", DType::kUInt32},
    {"I32", DType::kInt32},
    {"U64", DType::kUInt64},
    {"I64", DType::kInt64},
}};

}  // namespace

std::string_view weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::kSafetensors:
      return "safetensors";
    case WeightFormat::kSafetensorsIndex:
      return "safetensors-index";
    case WeightFormat::kNpy:
      return "npy";
    case WeightFormat::kNpz:
      return "npz";
    case WeightFormat::kOnnx:
      return "onnx";
    case WeightFormat::kGguf:
      return "gguf";
  }
  return "unknown";
}

const TensorInfo* WeightMetadata::find(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::optional<DType> safetensors_dtype(std::string_view s) {
  for (const auto& [name, t] : kSafetensorsDtypes)
    if (name == s) return t;
  return std::nullopt;
}

std::string_view safetensors_dtype_name(DType t) {
  for (const auto& [name, d] : kSafetensorsDtypes)
    if (d == t) return name;
  return "";
}

Result<uint64_t> checked_bytes(const WeightType& type, const Shape& shape, const std::string& what) {
  uint64_t n = 1;
  for (const int64_t d : shape.dims()) {
    if (d < 0) return Corrupt(what + ": negative dimension in shape " + shape.to_string());
    const auto m = checked_mul(n, static_cast<uint64_t>(d));
    if (!m || *m > static_cast<uint64_t>(INT64_MAX))
      return Corrupt(what + ": the element count of shape " + shape.to_string() + " overflows");
    n = *m;
  }
  if (const auto* d = std::get_if<DType>(&type)) {
    if (*d == DType::kString) return Unsupported(what + ": string tensors are not weights");
    const auto b = checked_mul(n, dtype_size(*d));
    if (!b) return Corrupt(what + ": the byte size of shape " + shape.to_string() + " overflows");
    return *b;
  }
  const auto traits = model::ggml_type_traits(static_cast<uint32_t>(std::get<model::GgmlType>(type)));
  if (!traits) return Unsupported(what + ": unknown ggml type");
  const int64_t row = shape.rank() == 0 ? 1 : shape.dims().back();
  if (row % traits->block_size != 0)
    return Corrupt(what + ": a row of " + std::to_string(row) + " elements is not a whole number of " +
                   std::string(traits->name) + " blocks of " + std::to_string(traits->block_size));
  return n / traits->block_size * traits->type_size;
}

Status Catalog::add(Entry e) {
  if (by_name.contains(e.info.name))
    return Corrupt(meta.source + ": tensor \"" + e.info.name + "\" appears twice");
  by_name.emplace(e.info.name, entries.size());
  entries.push_back(std::move(e));
  return Status::Ok();
}

void Catalog::finish() {
  meta.tensors.clear();
  meta.total_bytes = 0;
  for (const auto& e : entries) {
    meta.tensors.push_back(e.info);
    meta.total_bytes = saturating_add(meta.total_bytes, e.info.bytes);
  }
}

}  // namespace gantry::weights

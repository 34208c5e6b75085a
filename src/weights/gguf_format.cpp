// GGUF tensors through model::GgufFile (which validates the file): ggml dims reversed to row-major;
// ggml's plain types become DTypes, block types stay ggml types (dequantised on request).
#include <algorithm>

#include "gantry/model/gguf.h"
#include "weights/catalog.h"

namespace gantry::weights {
namespace {

std::optional<DType> plain_dtype(model::GgmlType t) {
  using G = model::GgmlType;
  switch (t) {
    case G::kF32:
      return DType::kFloat32;
    case G::kF16:
      return DType::kFloat16;
    case G::kBF16:
      return DType::kBFloat16;
    case G::kF64:
      return DType::kFloat64;
    case G::kI8:
      return DType::kInt8;
    case G::kI16:
      return DType::kInt16;
    case G::kI32:
      return DType::kInt32;
    case G::kI64:
      return DType::kInt64;
    default:
      return std::nullopt;
  }
}

}  // namespace

Result<Catalog> parse_gguf(const WeightSource& src) {
  const std::string& label = src.label();
  std::optional<model::GgufFile> file;
  if (src.kind() == WeightSource::Kind::kFile) {
    GANTRY_ASSIGN_OR_RETURN(auto f, model::GgufFile::open(src.path()));
    file.emplace(std::move(f));
  } else {
    GANTRY_ASSIGN_OR_RETURN(Bytes all, src.read(0, src.size()));
    auto f = model::GgufFile::parse(
        std::span(reinterpret_cast<const uint8_t*>(all.data.data()), all.data.size()), label);
    if (!f.ok()) return f.status();
    file.emplace(std::move(*f));
  }
  Catalog cat;
  cat.meta.format = WeightFormat::kGguf;
  cat.meta.source = label;
  cat.sources.push_back(src);
  for (const auto& [k, v] : file->metadata()) {
    cat.meta.metadata[k] = v.as_string() ? *v.as_string() : v.to_string();
    if (!v.as_string()) cat.meta.rendered_keys.push_back(k);
  }
  for (const auto& t : file->tensors()) {
    std::vector<int64_t> dims(t.dims.rbegin(), t.dims.rend());
    for (auto d : dims)
      if (d < 0) return Corrupt(label + ": tensor \"" + t.name + "\": dimension too large");
    Entry e;
    WeightType type = t.type.type;
    if (auto d = plain_dtype(t.type.type)) type = *d;
    e.info = TensorInfo{t.name, type, Shape(std::move(dims)), t.size_bytes, ""};
    e.offset = file->data_offset() + t.offset;
    if (e.offset < file->data_offset() || e.offset > src.size() || t.size_bytes > src.size() - e.offset)
      return Corrupt(label + ": tensor \"" + t.name + "\" lies outside the file");
    GANTRY_ASSIGN_OR_RETURN(uint64_t want,
                            checked_bytes(type, e.info.shape, label + ": tensor \"" + t.name + "\""));
    if (want != t.size_bytes) return Corrupt(label + ": tensor \"" + t.name + "\": size mismatch");
    GANTRY_RETURN_IF_ERROR(cat.add(std::move(e)));
  }
  cat.finish();
  return cat;
}

}  // namespace gantry::weights

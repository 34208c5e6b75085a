// safetensors writer. Layout (the published format): 8-byte little-endian header length N, N bytes of
// JSON ({"__metadata__": {string: string}, name: {"dtype", "shape", "data_offsets": [begin, end]}}),
// padded with spaces so the data section starts 8-byte aligned, then every tensor's bytes back to back
// (the format allows no holes; offsets are relative to the data section), larger elements first as the
// reference implementation orders them, so each tensor stays aligned to its element size.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "gantry/core/file_io.h"
#include "gantry/weights/writer.h"
#include "weights/writer_common.h"

namespace gantry::weights {
namespace {

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "F32";
    case DType::kFloat16:
      return "F16";
    case DType::kBFloat16:
      return "BF16";
    case DType::kFloat64:
      return "F64";
    case DType::kFloat8E4M3:
      return "F8_E4M3";
    case DType::kFloat8E5M2:
      return "F8_E5M2";
    case DType::kBool:
      return "BOOL";
    case DType::kUInt8:
      return "U8";
    case DType::kUInt16:
      return "U16";
    case DType::kUInt32:
      return "U32";
    case DType::kUInt64:
      return "U64";
    case DType::kInt8:
      return "I8";
    case DType::kInt16:
      return "I16";
    case DType::kInt32:
      return "I32";
    case DType::kInt64:
      return "I64";
    default:
      return nullptr;
  }
}

}  // namespace

Status write_safetensors(const std::filesystem::path& path, const std::vector<Weight>& weights,
                         const std::map<std::string, std::string>& metadata) {
  const std::string where = "writing safetensors " + path.string();
  for (const Weight& w : weights) {
    if (w.quantised())
      return InvalidArgument(where + ": '" + w.name + "' is " + weight_type_name(w.type) +
                             ", which safetensors cannot hold (dequantize it, or write GGUF)");
    if (!safetensors_dtype(std::get<DType>(w.type)))
      return InvalidArgument(where + ": '" + w.name + "' is " + weight_type_name(w.type) +
                             ", which safetensors has no dtype for");
    if (w.name == "__metadata__")
      return InvalidArgument(where + ": a tensor may not be named __metadata__ (the header's metadata key)");
  }
  if (Status s = detail::check_weights(weights, "safetensors"); !s.ok()) return s.with_context(where);

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  // Data order: decreasing element size, stable.
  std::vector<size_t> order(weights.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return dtype_size(std::get<DType>(weights[a].type)) > dtype_size(std::get<DType>(weights[b].type));
  });
  std::vector<uint64_t> begin(weights.size());
  uint64_t offset = 0;
  for (size_t i : order) {
    begin[i] = offset;
    offset += weights[i].data.byte_size();
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    const Weight& w = weights[i];
    header[w.name] = {{"dtype", safetensors_dtype(std::get<DType>(w.type))},
                      {"shape", w.shape.dims()},
                      {"data_offsets", {begin[i], begin[i] + w.data.byte_size()}}};
  }
  // Invalid UTF-8 in a name or value is replaced rather than thrown about (names come from files).
  std::string json = header.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  json.append((8 - json.size() % 8) % 8, ' ');
  const uint64_t n = json.size();
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i) prefix[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);

  auto file = AtomicFile::create(path);
  if (!file.ok()) return file.status().with_context(where);
  GANTRY_RETURN_IF_ERROR(file->write(prefix));
  GANTRY_RETURN_IF_ERROR(file->write(json));
  for (size_t i : order) {
    const Weight& w = weights[i];
    const auto* p = static_cast<const std::byte*>(w.data.data());
    if (w.data.byte_size()) GANTRY_RETURN_IF_ERROR(file->write(std::span(p, w.data.byte_size())));
  }
  return file->commit();
}

}  // namespace gantry::weights

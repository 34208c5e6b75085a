// safetensors: an 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {str: str}},
// then the data section; offsets are relative to it.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "gantry/core/json.h"
#include "weights/catalog.h"

namespace gantry::weights {
namespace {

using Json = nlohmann::json;

struct Parsed {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

Result<uint64_t> get_u64(const Json& v, const std::string& what) {
  if (!v.is_number_unsigned()) {
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
    return Corrupt(what + " is not a non-negative integer: " + v.dump().substr(0, 80));
  }
  return v.get<uint64_t>();
}

Result<Parsed> parse_entry(const std::string& label, const std::string& name, const Json& v,
                           uint64_t data_size) {
  const std::string what = label + ": tensor \"" + name + "\"";
  if (!v.is_object()) return Corrupt(what + ": entry is not an object");
  const auto dt = v.find("dtype");
  const auto sh = v.find("shape");
  const auto off = v.find("data_offsets");
  if (dt == v.end() || !dt->is_string()) return Corrupt(what + ": missing or non-string \"dtype\"");
  if (sh == v.end() || !sh->is_array()) return Corrupt(what + ": missing or non-array \"shape\"");
  if (off == v.end() || !off->is_array() || off->size() != 2)
    return Corrupt(what + ": \"data_offsets\" must be [begin, end]");
  const auto dtype = safetensors_dtype(dt->get<std::string>());
  if (!dtype)
    return Unsupported(what + ": dtype \"" + dt->get<std::string>() +
                       "\" is not one Gantry loads (F64 F32 F16 BF16 F8_E4M3 F8_E5M2 BOOL U8..U64 I8..I64)");
  std::vector<int64_t> dims;
  for (const auto& d : *sh) {
    GANTRY_ASSIGN_OR_RETURN(uint64_t u, get_u64(d, what + ": a dimension"));
    if (u > static_cast<uint64_t>(INT64_MAX))
      return Corrupt(what + ": dimension " + std::to_string(u) + " too large");
    dims.push_back(static_cast<int64_t>(u));
  }
  Parsed p{name, *dtype, Shape(std::move(dims)), 0, 0};
  GANTRY_ASSIGN_OR_RETURN(p.begin, get_u64((*off)[0], what + ": data_offsets[0]"));
  GANTRY_ASSIGN_OR_RETURN(p.end, get_u64((*off)[1], what + ": data_offsets[1]"));
  if (p.begin > p.end)
    return Corrupt(what + ": data_offsets begin " + std::to_string(p.begin) + " > end " +
                   std::to_string(p.end));
  if (p.end > data_size)
    return Corrupt(what + ": data_offsets end " + std::to_string(p.end) + " lies outside the " +
                   std::to_string(data_size) + "-byte data section (truncated file?)");
  GANTRY_ASSIGN_OR_RETURN(uint64_t want, checked_bytes(WeightType{p.dtype}, p.shape, what));
  if (p.end - p.begin != want)
    return Corrupt(what + ": " + std::string(dtype_name(p.dtype)) + " " + p.shape.to_string() + " needs " +
                   std::to_string(want) + " bytes, data_offsets give " + std::to_string(p.end - p.begin));
  return p;
}

}  // namespace

Status add_safetensors(Catalog& cat, const WeightSource& src, size_t source_index,
                       const std::string& shard_name, const std::function<bool(const std::string&)>& wanted) {
  const std::string& label = src.label();
  if (src.size() < 8)
    return Corrupt(label + ": " + std::to_string(src.size()) + " bytes is too short for safetensors");
  GANTRY_ASSIGN_OR_RETURN(Bytes len_bytes, src.read(0, 8));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | std::to_integer<uint64_t>(len_bytes.data[static_cast<size_t>(i)]);
  if (n > kMaxSafetensorsHeader)
    return Corrupt(label + ": safetensors header length " + std::to_string(n) + " is above the " +
                   std::to_string(kMaxSafetensorsHeader) + "-byte limit");
  if (n > src.size() - 8)
    return Corrupt(label + ": safetensors header length " + std::to_string(n) + " runs past the end of the " +
                   std::to_string(src.size()) + "-byte file");
  GANTRY_ASSIGN_OR_RETURN(Bytes header, src.read(8, n));
  const auto* p = reinterpret_cast<const char*>(header.data.data());
  auto header_json =
      parse_json<Json>(std::string_view(p, header.data.size()), label + ": the safetensors header");
  if (!header_json.ok()) return Corrupt(header_json.status().message());
  const Json& j = *header_json;
  if (!j.is_object()) return Corrupt(label + ": the safetensors header is not a JSON object");
  const uint64_t data_start = 8 + n;
  const uint64_t data_size = src.size() - data_start;
  std::vector<Parsed> parsed;
  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) return Corrupt(label + ": \"__metadata__\" is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) return Corrupt(label + ": __metadata__ \"" + mk + "\" is not a string");
        cat.meta.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    GANTRY_ASSIGN_OR_RETURN(Parsed e, parse_entry(label, key, value, data_size));
    parsed.push_back(std::move(e));
  }
  std::sort(parsed.begin(), parsed.end(), [](const Parsed& a, const Parsed& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < parsed.size(); ++i) {
    if (parsed[i].begin < parsed[i - 1].end)
      return Corrupt(label + ": tensors \"" + parsed[i - 1].name + "\" and \"" + parsed[i].name +
                     "\" overlap (data_offsets " + std::to_string(parsed[i - 1].begin) + "-" +
                     std::to_string(parsed[i - 1].end) + " and " + std::to_string(parsed[i].begin) + "-" +
                     std::to_string(parsed[i].end) + ")");
  }
  for (auto& e : parsed) {
    if (wanted && !wanted(e.name)) continue;
    Entry entry;
    entry.info = TensorInfo{e.name, e.dtype, e.shape, e.end - e.begin, shard_name};
    entry.shard = source_index;
    entry.offset = data_start + e.begin;
    GANTRY_RETURN_IF_ERROR(cat.add(std::move(entry)));
  }
  return Status::Ok();
}

Result<Catalog> parse_safetensors(const WeightSource& src) {
  Catalog cat;
  cat.meta.format = WeightFormat::kSafetensors;
  cat.meta.source = src.label();
  cat.sources.push_back(src);
  GANTRY_RETURN_IF_ERROR(add_safetensors(cat, src, 0, "", nullptr));
  cat.finish();
  return cat;
}

}  // namespace gantry::weights

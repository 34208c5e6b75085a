// A single .npy file: one tensor, named after the file ("embed.npy" -> "embed").
#include <filesystem>

#include "weights/catalog.h"
#include "weights/npy_header.h"

namespace gantry::weights {

Result<Catalog> parse_npy(const WeightSource& src) {
  const std::string& label = src.label();
  GANTRY_ASSIGN_OR_RETURN(Bytes head, src.read(0, std::min<uint64_t>(src.size(), uint64_t{1} << 20)));
  GANTRY_ASSIGN_OR_RETURN(NpyHeader h, parse_npy_header(head.data, label));
  std::string name = src.path().empty() ? "array" : src.path().stem().string();
  if (src.kind() == WeightSource::Kind::kUrl) {
    const auto& u = src.url_string();
    name = u.substr(u.rfind('/') + 1);
    if (name.ends_with(".npy")) name.resize(name.size() - 4);
  }
  GANTRY_ASSIGN_OR_RETURN(uint64_t bytes, checked_bytes(WeightType{h.dtype}, h.shape, label + ": array"));
  if (src.size() - h.data_offset != bytes)
    return Corrupt(label + ": " + std::string(dtype_name(h.dtype)) + " " + h.shape.to_string() + " needs " +
                   std::to_string(bytes) + " bytes of data, the file holds " +
                   std::to_string(src.size() - h.data_offset));
  Catalog cat;
  cat.meta.format = WeightFormat::kNpy;
  cat.meta.source = label;
  cat.sources.push_back(src);
  Entry e;
  e.info = TensorInfo{name, h.dtype, h.shape, bytes, ""};
  e.offset = h.data_offset;
  GANTRY_RETURN_IF_ERROR(cat.add(std::move(e)));
  cat.finish();
  return cat;
}

}  // namespace gantry::weights

// ONNX initializers: raw_data (a view into the parsed model), typed fields (decoded by
// model::parse_tensor_proto) and external data files, which must lie inside the model's directory.
#include <onnx/onnx_pb.h>

#include <climits>
#include <map>

#include "gantry/model/tensor_proto.h"
#include "weights/catalog.h"

namespace gantry::weights {
namespace {

namespace fs = std::filesystem;

// The external data file `location`, confined to `dir` (after resolving symlinks).
Result<WeightSource> open_external(const std::string& what, const fs::path& dir,
                                   const std::string& location) {
  const fs::path rel(location);
  if (location.empty() || rel.is_absolute() || location.find('\0') != std::string::npos)
    return InvalidArgument(what + ": external data location \"" + location + "\" must be a relative path");
  for (const auto& part : rel)
    if (part == "..")
      return InvalidArgument(what + ": external data location \"" + location +
                             "\" leaves the model's directory");
  std::error_code ec;
  const fs::path real_dir = fs::canonical(dir.empty() ? fs::path(".") : dir, ec);
  if (ec) return IoError(what + ": " + dir.string() + ": " + ec.message());
  const fs::path p = dir / rel;
  if (!fs::exists(p, ec)) return NotFound(what + ": external data file " + p.string() + " is missing");
  const fs::path real = fs::canonical(p, ec);
  if (ec) return IoError(what + ": " + p.string() + ": " + ec.message());
  const auto r = real.lexically_relative(real_dir);
  if (r.empty() || *r.begin() == "..")
    return InvalidArgument(what + ": external data file resolves to " + real.string() +
                           ", outside the model's directory");
  auto src = WeightSource::file(real);
  if (!src.ok()) return src.status().with_context(what);
  return src;
}

Result<uint64_t> parse_uint(const std::string& what, const std::string& v) {
  if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos || v.size() > 19)
    return Corrupt(what + ": external data field \"" + v + "\" is not a number");
  return std::stoull(v);
}

}  // namespace

Result<Catalog> parse_onnx(const WeightSource& src) {
  const std::string& label = src.label();
  if (src.size() > static_cast<uint64_t>(INT_MAX))
    return Unsupported(label + ": ONNX files above 2 GiB must keep their weights as external data");
  GANTRY_ASSIGN_OR_RETURN(Bytes all, src.read(0, src.size()));
  auto proto = std::make_shared<onnx::ModelProto>();
  if (!proto->ParseFromArray(all.data.data(), static_cast<int>(all.data.size())))
    return Corrupt(label + ": not a valid ONNX model (protobuf parse failed)");
  Catalog cat;
  cat.meta.format = WeightFormat::kOnnx;
  cat.meta.source = label;
  cat.sources.push_back(src);
  cat.keepalive = proto;
  if (!proto->producer_name().empty()) cat.meta.metadata["producer_name"] = proto->producer_name();
  cat.meta.metadata["ir_version"] = std::to_string(proto->ir_version());
  for (const auto& p : proto->metadata_props()) cat.meta.metadata[p.key()] = p.value();
  std::map<std::string, size_t> external;  // location -> source index
  for (const auto& init : proto->graph().initializer()) {
    const std::string what = label + ": initializer \"" + init.name() + "\"";
    const auto dtype = model::dtype_from_onnx(init.data_type());
    if (!dtype) return Unsupported(what + ": element type " + model::onnx_elem_type_name(init.data_type()));
    if (*dtype == DType::kString) continue;  // not a weight
    std::vector<int64_t> dims(init.dims().begin(), init.dims().end());
    Entry e;
    e.info.name = init.name();
    e.info.type = *dtype;
    e.info.shape = Shape(std::move(dims));
    GANTRY_ASSIGN_OR_RETURN(e.info.bytes, checked_bytes(e.info.type, e.info.shape, what));
    const uint64_t bytes = e.info.bytes;
    if (init.data_location() == onnx::TensorProto::EXTERNAL) {
      if (src.kind() != WeightSource::Kind::kFile)
        return Unsupported(what + ": external data needs the model as a file in its directory");
      std::string location;
      uint64_t offset = 0, length = bytes;
      for (const auto& kv : init.external_data()) {
        if (kv.key() == "location")
          location = kv.value();
        else if (kv.key() == "offset") {
          GANTRY_ASSIGN_OR_RETURN(offset, parse_uint(what, kv.value()));
        } else if (kv.key() == "length") {
          GANTRY_ASSIGN_OR_RETURN(length, parse_uint(what, kv.value()));
        }
      }
      if (length != bytes)
        return Corrupt(what + ": external data length " + std::to_string(length) + ", the shape needs " +
                       std::to_string(bytes));
      auto it = external.find(location);
      if (it == external.end()) {
        GANTRY_ASSIGN_OR_RETURN(WeightSource ext, open_external(what, src.path().parent_path(), location));
        cat.sources.push_back(ext);
        cat.meta.shards.push_back(location);
        it = external.emplace(location, cat.sources.size() - 1).first;
      }
      const auto& ext = cat.sources[it->second];
      if (offset > ext.size() || bytes > ext.size() - offset)
        return Corrupt(what + ": external data " + std::to_string(offset) + "+" + std::to_string(bytes) +
                       " lies outside " + location + " (" + std::to_string(ext.size()) + " bytes)");
      e.info.shard = location;
      e.shard = it->second;
      e.offset = offset;
    } else if (init.has_raw_data()) {
      if (init.raw_data().size() != bytes)
        return Corrupt(what + ": raw_data holds " + std::to_string(init.raw_data().size()) + " bytes, " +
                       std::string(dtype_name(*dtype)) + " " + e.info.shape.to_string() + " needs " +
                       std::to_string(bytes));
      const std::string* raw = &init.raw_data();
      e.materialize = [raw, proto]() -> Result<Bytes> {
        return Bytes{std::as_bytes(std::span(raw->data(), raw->size())), proto};
      };
    } else {
      const onnx::TensorProto* tp = &init;
      e.materialize = [tp, proto, what]() -> Result<Bytes> {
        const std::string ser = tp->SerializeAsString();
        auto t = model::parse_tensor_proto(std::as_bytes(std::span(ser.data(), ser.size())));
        if (!t.ok()) return t.status().with_context(what);
        auto holder = std::make_shared<Tensor>(std::move(t->tensor));
        return Bytes{std::span(static_cast<const std::byte*>(holder->data()), holder->byte_size()), holder};
      };
    }
    GANTRY_RETURN_IF_ERROR(cat.add(std::move(e)));
  }
  cat.finish();
  return cat;
}

}  // namespace gantry::weights

#include "gantry/model/onnx_info.h"

#include <onnx/onnx_pb.h>

#include <climits>
#include <set>

#include "gantry/core/file_io.h"
#include "gantry/model/tensor_proto.h"

namespace gantry::model {
namespace {

OnnxValueInfo value_info(const onnx::ValueInfoProto& v) {
  OnnxValueInfo info;
  info.name = v.name();
  if (!v.has_type()) {
    info.kind = "unknown";
    return info;
  }
  const auto& type = v.type();
  switch (type.value_case()) {
    case onnx::TypeProto::kTensorType: {
      const auto& t = type.tensor_type();
      info.dtype = dtype_from_onnx(t.elem_type());
      info.elem_type_name = onnx_elem_type_name(t.elem_type());
      if (t.has_shape()) {
        std::vector<int64_t> dims;
        std::vector<std::string> names;
        bool named = false;
        for (const auto& d : t.shape().dim()) {
          if (d.has_dim_value() && d.dim_value() >= 0) {
            dims.push_back(d.dim_value());
            names.emplace_back();
          } else {
            dims.push_back(Shape::kDynamic);
            names.push_back(d.has_dim_param() ? d.dim_param() : std::string());
            named = named || !names.back().empty();
          }
        }
        info.shape = Shape(std::move(dims));
        if (named) info.dim_names = std::move(names);
      }
      break;
    }
    case onnx::TypeProto::kSequenceType:
      info.kind = "sequence";
      break;
    case onnx::TypeProto::kMapType:
      info.kind = "map";
      break;
    case onnx::TypeProto::kOptionalType:
      info.kind = "optional";
      break;
    case onnx::TypeProto::kSparseTensorType: {
      info.kind = "sparse_tensor";
      info.dtype = dtype_from_onnx(type.sparse_tensor_type().elem_type());
      info.elem_type_name = onnx_elem_type_name(type.sparse_tensor_type().elem_type());
      break;
    }
    default:
      info.kind = "unknown";
      break;
  }
  return info;
}

}  // namespace

std::string OnnxValueInfo::shape_text() const {
  if (!shape) return "?";
  std::string out = "[";
  for (size_t i = 0; i < shape->rank(); ++i) {
    if (i) out += ',';
    if ((*shape)[i] >= 0)
      out += std::to_string((*shape)[i]);
    else if (i < dim_names.size() && !dim_names[i].empty())
      out += dim_names[i];
    else
      out += '?';
  }
  return out + "]";
}

int64_t OnnxModelInfo::default_opset() const {
  for (const auto& o : opsets)
    if (o.domain.empty() || o.domain == "ai.onnx") return o.version;
  return 0;
}

Result<OnnxModelInfo> parse_onnx_info(std::span<const std::byte> bytes, const std::string& origin) {
  if (bytes.empty()) return Corrupt(origin + ": empty file, not an ONNX model");
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return Unsupported(origin + ": ONNX files over 2 GiB must keep their weights as external data");
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return Corrupt(origin + ": not a valid ONNX model (truncated or corrupt protobuf)");
  if (!model.has_graph())
    return Corrupt(origin +
                   ": not a valid ONNX model (no graph; the file may be truncated or another format)");
  if (model.ir_version() <= 0) return Corrupt(origin + ": not a valid ONNX model (no IR version)");
  if (model.opset_import_size() == 0 && model.ir_version() >= 3)
    return Corrupt(origin + ": ONNX model declares no opset imports (the file may be truncated)");
  OnnxModelInfo info;
  info.ir_version = model.ir_version();
  info.producer_name = model.producer_name();
  info.producer_version = model.producer_version();
  info.domain = model.domain();
  info.model_version = model.model_version();
  info.doc_string = model.doc_string();
  info.file_size = bytes.size();
  for (const auto& o : model.opset_import()) info.opsets.push_back({o.domain(), o.version()});
  const auto& g = model.graph();
  info.graph_name = g.name();
  info.node_count = static_cast<size_t>(g.node_size());
  info.initializer_count = static_cast<size_t>(g.initializer_size());
  std::set<std::string> initializers;
  for (const auto& init : g.initializer()) {
    initializers.insert(init.name());
    if (init.data_location() == onnx::TensorProto::EXTERNAL) info.uses_external_data = true;
  }
  for (const auto& in : g.input())
    if (!initializers.count(in.name())) info.inputs.push_back(value_info(in));
  for (const auto& out : g.output()) info.outputs.push_back(value_info(out));
  return info;
}

Result<OnnxModelInfo> read_onnx_info(const std::filesystem::path& path) {
  auto bytes = read_file(path);
  if (!bytes.ok()) return bytes.status();
  return parse_onnx_info(std::as_bytes(std::span<const char>(bytes->data(), bytes->size())), path.string());
}

}  // namespace gantry::model

// What an ONNX model file declares, read with the ONNX protobuf classes (no ONNX Runtime needed):
// graph inputs (initializers excluded) and outputs with element types and shapes, opset imports, producer,
// IR version and file size.
//
// A missing file is NotFound; an empty, truncated or corrupt file (or one without a graph or opset imports)
// is a Corrupt error naming the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gantry/core/dtype.h"
#include "gantry/core/shape.h"
#include "gantry/core/status.h"

namespace gantry::model {

struct OnnxValueInfo {
  std::string name;
  std::string kind = "tensor";         // "tensor", "sequence", "map", "optional", "sparse_tensor", "unknown"
  std::optional<DType> dtype;          // nullopt for non-tensors and types Gantry cannot hold
  std::string elem_type_name;          // ONNX's name ("FLOAT", "INT64", ...), also for unsupported types
  std::optional<Shape> shape;          // nullopt when the model leaves the rank unknown
  std::vector<std::string> dim_names;  // per dimension: the symbolic name of a dynamic dim, else ""
  // "[1,?,128]" style, with names for symbolic dims ("[batch,512]"); "?" for unknown rank.
  std::string shape_text() const;
};

struct OnnxOpset {
  std::string domain;  // "" is the default ai.onnx domain
  int64_t version = 0;
};

struct OnnxModelInfo {
  int64_t ir_version = 0;
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  int64_t model_version = 0;
  std::string graph_name;
  std::string doc_string;
  std::vector<OnnxOpset> opsets;
  std::vector<OnnxValueInfo> inputs;  // graph inputs that are not initializers
  std::vector<OnnxValueInfo> outputs;
  size_t node_count = 0;
  size_t initializer_count = 0;
  bool uses_external_data = false;
  uint64_t file_size = 0;
  // Opset of the default ("" or "ai.onnx") domain, 0 when absent.
  int64_t default_opset() const;
};

Result<OnnxModelInfo> parse_onnx_info(std::span<const std::byte> bytes,
                                      const std::string& origin = "ONNX model");
Result<OnnxModelInfo> read_onnx_info(const std::filesystem::path& path);

}  // namespace gantry::model

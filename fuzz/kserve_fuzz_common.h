// Shared by the KServe fuzz targets (HTTP JSON, gRPC, the JSON "data" pre-scan): how they describe the
// inputs of the made-up model they parse requests against.
#pragma once

#include <utility>

#include "gantry/backend/model.h"

namespace gantry::server::fuzz {

// A tensor of the fuzzed model: `name`, `dtype`, `shape` (Shape::kDynamic where any size goes), unnamed dims.
inline backend::TensorInfo tensor_info(const char* name, DType dtype, Shape shape) {
  backend::TensorInfo i;
  i.name = name;
  i.dtype = dtype;
  i.shape = std::move(shape);
  i.dim_names.assign(i.shape.rank(), "");
  return i;
}

}  // namespace gantry::server::fuzz

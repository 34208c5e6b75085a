// Capabilities (what a backend can do) and Requirements (what a model needs), as plain data,
// matched with a reason for every mismatch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gantry/core/dtype.h"

namespace gantry::backend {

struct Capabilities {
  std::vector<DType> dtypes;          // element types its models may take and return
  std::vector<std::string> families;  // device families it can run on (hw::kFamily*, in this build)
  int64_t max_batch = 0;              // 0: no backend limit
  bool dynamic_shapes = false;        // accepts inputs whose shapes vary between calls
  bool streams = false;               // can stream partial results (e.g. tokens)
  bool text_generation = false;       // models expose a generation API beyond infer_*
  std::vector<std::string> formats;   // model formats it loads: "onnx", "gguf"
  bool model_parallel = false;        // can split one model over devices (pipeline, tensor-parallel)
};

struct Requirements {
  std::vector<DType> dtypes;
  std::vector<std::string> families;  // device families (hw::kFamily*): any one will do; empty: any
  int64_t batch = 0;                  // 0: no requirement
  bool dynamic_shapes = false;
  bool streams = false;
  bool text_generation = false;
  std::string format;  // empty: any
};

// One human-readable reason per unmet requirement; empty when `caps` satisfies `req`.
std::vector<std::string> mismatches(const Capabilities& caps, const Requirements& req);

}  // namespace gantry::backend

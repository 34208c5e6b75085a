// Placement: where and how a backend runs one model (provider, devices, threads, session options).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/shape.h"
#include "gantry/core/status.h"
#include "gantry/model/manifest.h"  // GraphOptimizationLevel, SessionBucket

namespace gantry::backend {

struct Placement {
  // Canonical provider name: "cpu", "cuda", "tensorrt", "rocm", "openvino", "coreml", "directml"
  // (ONNX Runtime), or a backend's own ("llama-cpu", "llama-cuda", ...).
  std::string provider = "cpu";
  std::vector<int> device_ids;    // empty: the provider's default device (GPU 0)
  std::string strategy = "auto";  // pool|round-robin|data-parallel|pipeline|tensor-parallel|auto
  int intra_op_threads = 0;       // 0: the backend's default
  int inter_op_threads = 0;       // 0: the backend's default
  // ONNX Runtime's graph optimisation level; other backends may ignore it.
  model::GraphOptimizationLevel graph_optimization = model::GraphOptimizationLevel::kAll;
  bool memory_pattern = true;
  bool cpu_arena = true;
  std::vector<model::SessionBucket> session_buckets;
  std::map<std::string, std::string> options;  // backend-specific extras (e.g. llama n_ctx)
  // The name the model is known by (its metadata().name and the owner its memory is charged to);
  // empty: the package manifest's name.
  std::string model_name;

  int primary_device() const { return device_ids.empty() ? 0 : device_ids.front(); }
};

}  // namespace gantry::backend

// Placement: where and how a backend runs one model. The generic part (provider, devices, threads,
// strategy, name) is read by the factory and the runtime; each backend's own options ride along typed
// (gantry/model/backend_options.h) and only that backend looks inside them.
#pragma once

#include <string>
#include <vector>

#include "gantry/model/backend_options.h"
#include "gantry/model/manifest.h"

namespace gantry::backend {

struct Placement {
  // Provider name within the backend: "cpu", "cuda", "tensorrt", "rocm", "openvino", "coreml", "directml"
  // (ONNX Runtime's execution providers), or "cpu" / "cuda" for llama.cpp.
  std::string provider = "cpu";
  std::vector<int> device_ids;                        // empty: the provider's default device (GPU 0)
  model::Strategy strategy = model::Strategy::kAuto;  // the manifest's hardware_requirements.strategy
  int intra_op_threads = 0;                           // 0: the backend's default
  int inter_op_threads = 0;                           // 0: the backend's default
  // The name the model is known by (its metadata().name and the owner its memory is charged to);
  // empty: the package manifest's name.
  std::string model_name;
  model::OnnxOptions onnx;    // read by the ONNX Runtime backend only
  model::LlamaOptions llama;  // read by the llama.cpp backend only

  int primary_device() const { return device_ids.empty() ? 0 : device_ids.front(); }
};

}  // namespace gantry::backend

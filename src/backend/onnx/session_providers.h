// Execution providers in ONNX Runtime's own types (private to the backend; the public side is
// gantry/backend/onnx/providers.h): the CUDA plugin's devices and adding a provider to a session.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <vector>

#include "gantry/backend/placement.h"
#include "gantry/core/status.h"

namespace gantry::onnx {

// The CUDA plugin EP's devices (registering the plugin on first use); index = CUDA device ordinal.
Result<std::vector<Ort::ConstEpDevice>> cuda_ep_devices();

// Adds `placement.provider` on `placement.primary_device()` to `options` (the CPU EP needs nothing).
Status append_provider(Ort::SessionOptions& options, const backend::Placement& placement);

}  // namespace gantry::onnx

// ONNX Runtime execution providers: which ones this process can use, and how to add one to a session.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <string>
#include <string_view>
#include <vector>

#include "gantry/backend/backend.h"
#include "gantry/backend/placement.h"
#include "gantry/core/status.h"

namespace gantry::onnx {

// Canonical provider names this backend knows ("cpu", "cuda", "tensorrt", "rocm", "migraphx", "openvino",
// "coreml", "directml").
const std::vector<std::string>& known_providers();

// ORT's own name for a canonical provider ("cuda" -> "CUDAExecutionProvider"); "" when unknown.
std::string ort_provider_name(std::string_view provider);

std::string_view provider_family(std::string_view provider);

// Where the CUDA plugin EP library is looked for: $GANTRY_ORT_CUDA_EP when set, else
// libonnxruntime_providers_cuda.so next to the linked libonnxruntime.
std::string cuda_plugin_path();

// The CUDA plugin EP's devices (registering the plugin on first use); index = CUDA device ordinal.
Result<std::vector<Ort::ConstEpDevice>> cuda_ep_devices();

// Whether `provider` can be used here: built into this ORT, or (CUDA) a plugin library present and
// registering with a device. Never throws; the reason says what is missing and what to do.
backend::Support provider_available(std::string_view provider);

// Adds `placement.provider` on `placement.primary_device()` to `options` (the CPU EP needs nothing).
Status append_provider(Ort::SessionOptions& options, const backend::Placement& placement);

}  // namespace gantry::onnx

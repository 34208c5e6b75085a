// ONNX Runtime execution providers: which ones this process can use, and how to add one to a session.
#pragma once

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

// Whether `provider` can be used here: built into this ORT, or (CUDA) a plugin library present and
// registering with a device. Never throws; the reason says what is missing and what to do.
backend::Support provider_available(std::string_view provider);

}  // namespace gantry::onnx

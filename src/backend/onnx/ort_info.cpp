#include "gantry/backend/onnx/ort_info.h"

#include <onnxruntime_cxx_api.h>

namespace gantry::onnx {

std::string ort_version() { return Ort::GetVersionString(); }

std::vector<std::string> ort_builtin_providers() { return Ort::GetAvailableProviders(); }

}  // namespace gantry::onnx

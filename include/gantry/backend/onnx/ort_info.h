// Facts about the ONNX Runtime library this build links.
#pragma once

#include <string>
#include <vector>

namespace gantry::onnx {

// The linked library's version, e.g. "1.29.0".
std::string ort_version();

// Execution providers compiled into the linked library (e.g. "CPUExecutionProvider").
std::vector<std::string> ort_builtin_providers();

}  // namespace gantry::onnx

// Facts about the llama.cpp/ggml library this build links, and the devices ggml sees.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace gantry::llama {

struct GgmlDevice {
  std::string name;         // "CPU", "CUDA0", ...
  std::string description;  // e.g. the CPU model or GPU name
  std::string type;         // "cpu" | "gpu" | "igpu" | "accel" | "meta"
  size_t memory_free = 0;
  size_t memory_total = 0;
};

// "0.5.0-dev (de3ff815)"
std::string llama_version();

// Loads ggml's dynamic backends (when built with GGML_BACKEND_DL) from the directory holding
// libllama, then lists every device ggml can use. Safe to call more than once.
std::vector<GgmlDevice> ggml_devices();

}  // namespace gantry::llama

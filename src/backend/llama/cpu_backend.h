// ggml's CPU backend started for a speed measurement (plan --speed): the device, and a backend on it with a
// given number of threads. Internal to src/backend/llama (remote_speed.cpp, cpu_model_speed.cpp).
#pragma once

#include <ggml-backend.h>

#include <memory>

#include "gantry/core/status.h"

namespace gantry::llama {

struct CpuBackend {
  ggml_backend_dev_t device = nullptr;
  std::unique_ptr<ggml_backend, decltype(&ggml_backend_free)> backend{nullptr, ggml_backend_free};
};

// Sets up llama.cpp's runtime if needed; `threads` below 1 counts as 1. Unavailable when ggml has no CPU
// device or cannot start its backend.
Result<CpuBackend> start_cpu_backend(int threads);

}  // namespace gantry::llama

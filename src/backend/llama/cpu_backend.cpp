#include "backend/llama/cpu_backend.h"

#include <algorithm>

#include "backend/llama/runtime_init.h"

namespace gantry::llama {

Result<CpuBackend> start_cpu_backend(int threads) {
  ensure_llama_runtime();
  CpuBackend cpu;
  cpu.device = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  if (!cpu.device) return Unavailable("ggml has no CPU device");
  cpu.backend.reset(ggml_backend_dev_init(cpu.device, nullptr));
  if (!cpu.backend) return Unavailable("cannot start ggml's CPU backend");
  using SetThreads = void (*)(ggml_backend_t, int);
  if (auto set = reinterpret_cast<SetThreads>(ggml_backend_reg_get_proc_address(
          ggml_backend_dev_backend_reg(cpu.device), "ggml_backend_set_n_threads"))) {
    set(cpu.backend.get(), std::max(1, threads));
  }
  return cpu;
}

}  // namespace gantry::llama

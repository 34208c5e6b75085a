#include "backend/llama/runtime_init.h"

#include <llama.h>

#include <mutex>

#include "backend/llama/log_bridge.h"
#include "gantry/backend/llama/llama_info.h"

namespace gantry::llama {

void ensure_llama_runtime() {
  static std::once_flag once;
  std::call_once(once, [] {
    install_log_bridge();
    llama_backend_init();
    (void)ggml_devices();  // loads ggml's dynamic backends (GPU builds) from libllama's directory
  });
}

}  // namespace gantry::llama

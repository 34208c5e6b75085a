#include "gantry/backend/llama/llama_info.h"

#include <dlfcn.h>
#include <ggml-backend.h>
#include <llama.h>

#include <filesystem>
#include <mutex>

namespace gantry::llama {
namespace {

const char* dev_type_name(enum ggml_backend_dev_type t) {
  switch (t) {
    case GGML_BACKEND_DEVICE_TYPE_CPU:
      return "cpu";
    case GGML_BACKEND_DEVICE_TYPE_GPU:
      return "gpu";
    case GGML_BACKEND_DEVICE_TYPE_IGPU:
      return "igpu";
    case GGML_BACKEND_DEVICE_TYPE_ACCEL:
      return "accel";
    default:
      return "other";
  }
}

// Plain ggml_backend_load_all() searches only the executable's directory and finds nothing when the
// libraries live elsewhere, so point it at the directory libllama was loaded from.
void load_backends_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&llama_backend_init), &info) && info.dli_fname) {
      const auto dir = std::filesystem::path(info.dli_fname).parent_path();
      ggml_backend_load_all_from_path(dir.c_str());
    }
  });
}

}  // namespace

std::string llama_version() { return std::string(GANTRY_LLAMA_VERSION) + " (" + GANTRY_LLAMA_COMMIT + ")"; }

std::vector<GgmlDevice> ggml_devices() {
  load_backends_once();
  std::vector<GgmlDevice> out;
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    ggml_backend_dev_t dev = ggml_backend_dev_get(i);
    GgmlDevice d;
    d.name = ggml_backend_dev_name(dev);
    d.description = ggml_backend_dev_description(dev);
    d.type = dev_type_name(ggml_backend_dev_type(dev));
    ggml_backend_dev_memory(dev, &d.memory_free, &d.memory_total);
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace gantry::llama

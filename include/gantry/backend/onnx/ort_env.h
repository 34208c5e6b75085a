// OrtRuntime: the one Ort::Env of this process and what hangs off it (registered plugin EPs).
//
// ONNX Runtime wants exactly one Env per process; this registry creates it on first use, routes ORT's
// log messages at warning level and above to Gantry's logger, and remembers which plugin execution
// provider libraries were registered (and why a registration failed).
#pragma once

#include <onnxruntime_cxx_api.h>

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::onnx {

class OrtRuntime {
 public:
  // The process-wide runtime. Fails when ONNX Runtime cannot be initialised (e.g. the process command
  // line is too long for ORT's stack, see DESIGN.md "Traps").
  static Result<OrtRuntime*> get();

  Ort::Env& env() { return env_; }

  // Registers a plugin EP library once under `registration_name` (later calls return the first
  // outcome) and returns the EP devices whose EP is called `ep_name`.
  Result<std::vector<Ort::ConstEpDevice>> plugin_devices(const std::string& registration_name,
                                                         const std::string& library_path,
                                                         const std::string& ep_name);

 private:
  OrtRuntime();
  Ort::Env env_;
  std::mutex mu_;
  struct Plugin {
    std::string name;
    Status status;
  };
  std::vector<Plugin> plugins_;
};

// Size of /proc/self/cmdline in bytes (0 when unreadable). ORT overflows its stack above ~30 KB.
size_t process_cmdline_bytes();
inline constexpr size_t kMaxOrtCmdlineBytes = 28 * 1024;

}  // namespace gantry::onnx

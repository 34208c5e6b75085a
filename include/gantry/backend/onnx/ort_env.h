// OrtRuntime: the one Ort::Env of this process and what hangs off it (registered plugin EPs, the
// memory pools sessions may allocate from).
//
// ONNX Runtime wants exactly one Env per process; this registry creates it on first use, routes ORT's
// log messages at warning level and above to Gantry's logger, and remembers which plugin execution
// provider libraries were registered (and why a registration failed).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gantry/backend/onnx/ort_types.h"
#include "gantry/core/status.h"
#include "gantry/memory/block_pool.h"

namespace gantry::onnx {

class OrtRuntime {
 public:
  // The process-wide runtime. Fails when ONNX Runtime cannot be initialised (e.g. the process command
  // line is too long for ORT's stack, see DESIGN.md "Traps").
  static Result<OrtRuntime*> get();

  Ort::Env& env() { return *env_; }

  // Registers a plugin EP library once under `registration_name` (later calls return the first
  // outcome) and returns the EP devices whose EP is called `ep_name` (owned by the env; wrap one in an
  // Ort::ConstEpDevice to use ORT's C++ API on it).
  Result<std::vector<const OrtEpDevice*>> plugin_devices(const std::string& registration_name,
                                                         const std::string& library_path,
                                                         const std::string& ep_name);

  // Makes `pool` the env's allocator for its device: "cpu" registers it for ORT's CPU memory, "cuda:N"
  // for the DEFAULT memory of the CUDA EP's device N (the plugin must be registered and see it).
  // Idempotent for the same pool; another pool for the same device replaces it for sessions created
  // afterwards (earlier sessions keep the one they took: both pools must outlive their sessions), and
  // logs that it did (kapsl refuses a second pool; docs/from-the-seeds.md says why Gantry does not).
  // Only sessions with the session config entry "session.use_env_allocators" = "1" use it.
  Status use_pool(memory::BlockPool* pool);
  // Stops offering `pool` to sessions created from now on (nothing when it is not registered): call it
  // before destroying a registered pool. Sessions that already took it keep using it.
  void release_pool(memory::BlockPool* pool);
  // The pool registered for `device` ("cpu", "cuda:0"), or nullptr.
  memory::BlockPool* pool_for(const std::string& device);

 private:
  OrtRuntime();
  ~OrtRuntime();  // never runs: the runtime lives for the whole process
  std::unique_ptr<Ort::Env> env_;
  std::mutex mu_;
  struct Plugin {
    std::string name;
    Status status;
  };
  std::vector<Plugin> plugins_;
  // Every adapter ever registered lives as long as the process (sessions keep raw pointers to it).
  std::vector<std::unique_ptr<class PoolAllocator>> allocators_;
  std::map<std::string, PoolAllocator*> registered_;  // by device
};

// Size of /proc/self/cmdline in bytes (0 when unreadable). ORT overflows its stack above ~30 KB.
size_t process_cmdline_bytes();
inline constexpr size_t kMaxOrtCmdlineBytes = 28 * 1024;

}  // namespace gantry::onnx

#include "gantry/backend/threads.h"

#include <algorithm>
#include <thread>

#include "gantry/core/log.h"

namespace gantry::backend {

int hardware_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

int cap_threads(int requested, std::string_view what) {
  const int hw = hardware_threads();
  if (requested <= hw) return requested;
  GANTRY_LOG_WARN("{} = {} is more than this machine's {} hardware threads; using {}", what, requested, hw,
                  hw);
  return hw;
}

}  // namespace gantry::backend

#include "gantry/core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <mutex>

namespace gantry {

spdlog::logger& logger() {
  static std::once_flag once;
  static std::shared_ptr<spdlog::logger> instance;
  std::call_once(once, [] {
    instance = spdlog::stderr_color_mt("gantry");
    instance->set_pattern("%^[%l]%$ %v");
    const char* env = std::getenv("GANTRY_LOG_LEVEL");
    instance->set_level(env ? spdlog::level::from_str(env) : spdlog::level::info);
  });
  return *instance;
}

void set_log_level(spdlog::level::level_enum level) { logger().set_level(level); }

}  // namespace gantry

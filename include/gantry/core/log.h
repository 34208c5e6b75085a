// Gantry's logger: spdlog to stderr, level from GANTRY_LOG_LEVEL (trace|debug|info|warn|error|off),
// default "info". stdout is reserved for a command's own output.
#pragma once

#include <spdlog/spdlog.h>

namespace gantry {

// The process-wide "gantry" logger (spdlog's registry owns it); created on first use.
spdlog::logger& logger();

// Overrides the level chosen from the environment (e.g. from a --verbose flag).
void set_log_level(spdlog::level::level_enum level);

}  // namespace gantry

#define GANTRY_LOG_DEBUG(...) ::gantry::logger().debug(__VA_ARGS__)
#define GANTRY_LOG_INFO(...) ::gantry::logger().info(__VA_ARGS__)
#define GANTRY_LOG_WARN(...) ::gantry::logger().warn(__VA_ARGS__)
#define GANTRY_LOG_ERROR(...) ::gantry::logger().error(__VA_ARGS__)

// Captures what Gantry's logger writes while it lives (a test's "the warning was logged" assertions).
#pragma once

#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>

#include "gantry/core/log.h"

namespace gantry::test_util {

class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)) {
    sink_->set_pattern("[%l] %v");
    logger().sinks().push_back(sink_);
    level_ = logger().level();
    if (level_ > spdlog::level::info) logger().set_level(spdlog::level::info);
  }
  ~LogCapture() {
    auto& sinks = logger().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    logger().set_level(level_);
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::string text() const {
    logger().flush();
    return out_.str();
  }
  bool has(const std::string& fragment) const { return text().find(fragment) != std::string::npos; }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  spdlog::level::level_enum level_;
};

}  // namespace gantry::test_util

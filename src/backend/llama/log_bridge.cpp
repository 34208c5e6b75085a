#include "backend/llama/log_bridge.h"

#include <ggml.h>
#include <llama.h>

#include <algorithm>
#include <mutex>

#include "gantry/core/log.h"

namespace gantry::llama {

struct LogCapture::Impl {
  bool quiet = false;
  mutable std::mutex mu;
  std::vector<std::string> lines;
  std::vector<std::string> problems;
};

namespace {

struct BridgeState {
  std::mutex mu;
  std::string pending;  // a line llama.cpp is still writing (it logs in pieces)
  int pending_level = GGML_LOG_LEVEL_INFO;
  std::vector<LogCapture::Impl*> captures;
  int quiet = 0;  // QuietLlamaLogs scopes alive
};

BridgeState& state() {
  static BridgeState s;
  return s;
}

void emit(int level, const std::string& line) {
  if (line.empty()) return;
  bool quiet = state().quiet > 0;
  for (auto* c : state().captures) {
    quiet = quiet || c->quiet;
    std::lock_guard lock(c->mu);
    c->lines.push_back(line);
    if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR) c->problems.push_back(line);
  }
  if (quiet) level = GGML_LOG_LEVEL_DEBUG;
  switch (level) {
    case GGML_LOG_LEVEL_ERROR:
      GANTRY_LOG_ERROR("llama.cpp: {}", line);
      break;
    case GGML_LOG_LEVEL_WARN:
      GANTRY_LOG_WARN("llama.cpp: {}", line);
      break;
    default:
      GANTRY_LOG_DEBUG("llama.cpp: {}", line);
      break;
  }
}

void on_log(enum ggml_log_level level, const char* text, void* /*user*/) {
  if (!text) return;
  auto& s = state();
  std::lock_guard lock(s.mu);
  if (level != GGML_LOG_LEVEL_CONT) {
    if (!s.pending.empty()) emit(s.pending_level, s.pending);
    s.pending.clear();
    s.pending_level = level;
  }
  s.pending += text;
  size_t nl;
  while ((nl = s.pending.find('\n')) != std::string::npos) {
    emit(s.pending_level, s.pending.substr(0, nl));
    s.pending.erase(0, nl + 1);
  }
}

}  // namespace

void install_log_bridge() {
  static std::once_flag once;
  std::call_once(once, [] {
    llama_log_set(on_log, nullptr);
    ggml_log_set(on_log, nullptr);
  });
}

QuietLlamaLogs::QuietLlamaLogs() {
  install_log_bridge();
  std::lock_guard lock(state().mu);
  ++state().quiet;
}

QuietLlamaLogs::~QuietLlamaLogs() {
  std::lock_guard lock(state().mu);
  --state().quiet;
}

LogCapture::LogCapture(bool quiet) : impl_(new Impl) {
  impl_->quiet = quiet;
  install_log_bridge();
  std::lock_guard lock(state().mu);
  state().captures.push_back(impl_);
}

LogCapture::~LogCapture() {
  {
    std::lock_guard lock(state().mu);
    auto& v = state().captures;
    v.erase(std::remove(v.begin(), v.end(), impl_), v.end());
  }
  delete impl_;
}

std::vector<std::string> LogCapture::lines() const {
  std::lock_guard lock(impl_->mu);
  return impl_->lines;
}

std::string LogCapture::problems() const {
  std::lock_guard lock(impl_->mu);
  std::string out;
  for (const auto& p : impl_->problems) {
    if (!out.empty()) out += "; ";
    out += p;
  }
  return out;
}

}  // namespace gantry::llama

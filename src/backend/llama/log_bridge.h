// Routes llama.cpp/ggml logs into Gantry's logger, and lets a caller capture them for a while
// (to explain a failed load, or to read the buffer sizes llama.cpp reports).
#pragma once

#include <string>
#include <vector>

namespace gantry::llama {

// Installs the bridge once per process (llama_log_set + ggml_log_set). llama.cpp's info/debug lines go
// to Gantry's debug level, its warnings and errors to warn/error.
void install_log_bridge();

// While alive, llama.cpp's warnings and errors go to Gantry's debug level (e.g. the "failed to
// compute graph" lines an intended abort causes).
class QuietLlamaLogs {
 public:
  QuietLlamaLogs();
  ~QuietLlamaLogs();
  QuietLlamaLogs(const QuietLlamaLogs&) = delete;
  QuietLlamaLogs& operator=(const QuietLlamaLogs&) = delete;
};

// While alive, every complete llama.cpp log line (any level) from any thread is also appended to
// lines(). Captures nest; each sees every line. A quiet capture demotes llama.cpp's warnings and
// errors to Gantry's debug level meanwhile: the caller reports them in its own Status.
class LogCapture {
 public:
  explicit LogCapture(bool quiet = false);
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::vector<std::string> lines() const;
  // Error- and warning-level lines only, joined with "; " (for error messages).
  std::string problems() const;

  struct Impl;  // shared with the bridge

 private:
  Impl* impl_;
};

}  // namespace gantry::llama

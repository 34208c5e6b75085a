// Stops ONNX Runtime runs midway: ONNX Runtime checks a run's terminate flag (RunOptions::SetTerminate)
// between nodes; something must set it while Run blocks its thread. One thread for the process does, for
// every run that gave a CancelCheck: it asks each one every kPollInterval while any is in flight and sleeps
// otherwise, and sets the run's flag the first time its check says true.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <atomic>
#include <chrono>
#include <memory>

#include "gantry/backend/generation.h"

namespace gantry::onnx {

class RunTerminator {
 public:
  static constexpr std::chrono::microseconds kPollInterval{1000};

  // The process's terminator (its thread starts on first use and lives as long as the process).
  static RunTerminator& get();

  // One run being watched, from watch() until destroyed: its RunOptions (pass options() to Run) and
  // whether the terminator set their flag. Destroy it after Run returns; the check is not called after.
  class Watch {
   public:
    Watch(Watch&&) = delete;
    ~Watch();
    const OrtRunOptions* options() const;
    bool terminated() const;

   private:
    friend class RunTerminator;
    struct Run;
    Watch(RunTerminator& owner, std::shared_ptr<Run> run) : owner_(owner), run_(std::move(run)) {}
    RunTerminator& owner_;
    std::shared_ptr<Run> run_;
  };

  // Starts watching `cancelled` (non-empty; it must outlive the Watch) for a run about to start. Fails only
  // when ONNX Runtime cannot make RunOptions.
  Result<std::unique_ptr<Watch>> watch(const backend::CancelCheck& cancelled);

 private:
  RunTerminator();
  ~RunTerminator() = delete;  // never runs: the thread lives for the whole process
  void loop();
  void forget(Watch::Run* run);
  struct State;
  State* state_;
};

}  // namespace gantry::onnx

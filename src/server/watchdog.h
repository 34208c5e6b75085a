// Watchdog: whether the server can still serve, for liveness (/v2/health/live, gRPC ServerLive), private
// to src/server/.
//
// A thread probes, once a second, the parts every request needs and that a deadlock or a stuck task
// would stop: the control pool (a task must run), the model manager (its lock, and each loaded
// model's statistics, which take the model's own locks, a text model's engine among them). A probe
// that has not come back after `timeout` makes alive() fail, naming the part that hangs, so an
// orchestrator restarts the process instead of sending it traffic forever. Inference itself is not
// probed: a long request is not a hang.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "gantry/core/status.h"

namespace gantry::server {

class Watchdog {
 public:
  // `probe_control` posts its argument to the control pool; `probe_models` reads every model's state and
  // says whether one is stuck (a LoopMonitor's verdict). timeout 0: no watchdog (alive() is always Ok).
  Watchdog(std::chrono::milliseconds timeout, std::function<void(std::function<void()>)> probe_control,
           std::function<Status()> probe_models);
  ~Watchdog();  // stops the thread (a probe stuck forever is left behind: the process is going down)
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Ok, or Unavailable naming the part that has not answered for longer than the timeout.
  Status alive() const;

 private:
  void loop();
  // Runs `what` until it returns or the watchdog stops; false when stopped.
  bool await(const char* part, const std::function<void(std::function<void()>)>& run);

  const std::chrono::milliseconds timeout_;
  std::function<void(std::function<void()>)> probe_control_;
  std::function<Status()> probe_models_;
  mutable std::mutex verdict_mu_;
  Status verdict_;  // the last model probe's (a stuck loop), Ok when none
  // The probe in progress: which part, since when (steady clock, ns; 0 while none runs).
  std::atomic<const char*> part_{nullptr};
  std::atomic<int64_t> since_ns_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

// Whether models' own scheduling loops still step: a model whose loop has work (ModelStats::loop_work)
// but has taken no step (loop_steps) for longer than the timeout is stuck. Fed by the watchdog's thread.
class LoopMonitor {
 public:
  explicit LoopMonitor(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  // One observation of model `name` at `now`; Unavailable naming it once it is stuck.
  Status observe(const std::string& name, uint64_t work, uint64_t steps,
                 std::chrono::steady_clock::time_point now);

 private:
  struct Seen {
    uint64_t steps = 0;
    std::chrono::steady_clock::time_point since;  // when steps last changed, or work began
  };
  std::chrono::milliseconds timeout_;
  std::map<std::string, Seen, std::less<>> seen_;
};

}  // namespace gantry::server

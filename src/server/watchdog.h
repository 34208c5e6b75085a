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
#include <memory>
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
  // Stops the thread. A model probe stuck past the timeout (the deadlock it found) is left behind,
  // holding only the watchdog's shared state: the process is going down.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Ok, or Unavailable naming the part that has not answered for longer than the timeout.
  Status alive() const;

 private:
  // What the thread touches, shared with it so that a thread left behind never reads freed memory.
  struct Shared {
    std::chrono::milliseconds timeout;
    std::function<void(std::function<void()>)> probe_control;
    std::function<Status()> probe_models;
    mutable std::mutex verdict_mu;
    Status verdict;  // the last model probe's (a stuck loop), Ok when none
    // The probe in progress: which part, since when (steady clock, ns); whether it is the model probe,
    // which blocks (the control probe is waited for in slices and sees a stop).
    std::atomic<const char*> part{nullptr};
    std::atomic<int64_t> since_ns{0};
    std::atomic<bool> in_model_probe{false};
    std::mutex mu;
    std::condition_variable cv;
    bool stopping = false;
  };
  static void loop(const std::shared_ptr<Shared>& s);
  // Runs the control probe until it answers or the watchdog stops; false when stopped.
  static bool await_control(Shared& s);

  std::shared_ptr<Shared> s_;
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

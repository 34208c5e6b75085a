#include "backend/onnx/run_terminator.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "gantry/core/log.h"

namespace gantry::onnx {

struct RunTerminator::Watch::Run {
  const backend::CancelCheck* cancelled = nullptr;
  OrtRunOptions* options = nullptr;
  std::atomic<bool> terminated{false};
  ~Run() {
    if (options) Ort::GetApi().ReleaseRunOptions(options);
  }
};

struct RunTerminator::State {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Watch::Run*> runs;    // in flight, not yet terminated
  Watch::Run* checking = nullptr;   // the run whose check the thread is calling now (outside mu)
  std::condition_variable checked;  // `checking` went back to nullptr
};

RunTerminator& RunTerminator::get() {
  static RunTerminator* terminator = new RunTerminator();  // leaked on purpose: see ~RunTerminator
  return *terminator;
}

RunTerminator::RunTerminator() : state_(new State()) {
  std::thread([this] { loop(); }).detach();
}

Result<std::unique_ptr<RunTerminator::Watch>> RunTerminator::watch(const backend::CancelCheck& cancelled) {
  auto run = std::make_shared<Watch::Run>();
  run->cancelled = &cancelled;
  if (OrtStatus* st = Ort::GetApi().CreateRunOptions(&run->options)) {
    std::string msg = Ort::GetApi().GetErrorMessage(st);
    Ort::GetApi().ReleaseStatus(st);
    return Internal("ONNX Runtime could not make RunOptions: " + msg);
  }
  {
    std::lock_guard lock(state_->mu);
    state_->runs.push_back(run.get());
  }
  state_->cv.notify_one();
  return std::unique_ptr<Watch>(new Watch(*this, std::move(run)));
}

RunTerminator::Watch::~Watch() { owner_.forget(run_.get()); }
const OrtRunOptions* RunTerminator::Watch::options() const { return run_->options; }
bool RunTerminator::Watch::terminated() const { return run_->terminated.load(std::memory_order_acquire); }

void RunTerminator::forget(Watch::Run* run) {
  std::unique_lock lock(state_->mu);
  auto& runs = state_->runs;
  runs.erase(std::remove(runs.begin(), runs.end(), run), runs.end());
  // The thread may be calling this run's check right now: wait for it, so the check is never called after.
  state_->checked.wait(lock, [&] { return state_->checking != run; });
}

void RunTerminator::loop() {
  State& s = *state_;
  std::unique_lock lock(s.mu);
  for (;;) {
    s.cv.wait(lock, [&] { return !s.runs.empty(); });
    // Each run's check is called without the lock (a check may take its own locks), one at a time.
    for (size_t i = 0; i < s.runs.size(); ++i) {
      Watch::Run* run = s.runs[i];
      s.checking = run;
      lock.unlock();
      bool cancel = false;
      try {
        cancel = (*run->cancelled)();
      } catch (const std::exception& e) {  // no exception leaves this thread
        GANTRY_LOG_WARN("an ONNX run's cancel check threw ({}): the run is cancelled", e.what());
        cancel = true;
      } catch (...) {
        GANTRY_LOG_WARN("an ONNX run's cancel check threw: the run is cancelled");
        cancel = true;
      }
      if (cancel) {
        run->terminated.store(true, std::memory_order_release);
        if (OrtStatus* st = Ort::GetApi().RunOptionsSetTerminate(run->options))
          Ort::GetApi().ReleaseStatus(st);
      }
      lock.lock();
      s.checking = nullptr;
      s.checked.notify_all();
      if (cancel) {
        auto& runs = s.runs;
        auto it = std::find(runs.begin(), runs.end(), run);
        if (it != runs.end()) {
          runs.erase(it);
          --i;
        }
      }
      // A run forgotten meanwhile shifted the list: index i may now name the next one, which is fine (it is
      // checked in the next round at worst).
    }
    if (!s.runs.empty()) {
      lock.unlock();
      std::this_thread::sleep_for(kPollInterval);
      lock.lock();
    }
  }
}

}  // namespace gantry::onnx

#include "watchdog.h"

#include <fmt/format.h>

#include <future>
#include <memory>

#include "gantry/core/log.h"

namespace gantry::server {
namespace {
using Clock = std::chrono::steady_clock;
constexpr auto kProbeInterval = std::chrono::seconds(1);
constexpr const char* kControlPart = "the control pool (metadata, /metrics, readiness)";
constexpr const char* kModelPart = "the model manager or a model's engine (their locks)";

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}
}  // namespace

Watchdog::Watchdog(std::chrono::milliseconds timeout,
                   std::function<void(std::function<void()>)> probe_control,
                   std::function<Status()> probe_models)
    : s_(std::make_shared<Shared>()) {
  s_->timeout = timeout;
  s_->probe_control = std::move(probe_control);
  s_->probe_models = std::move(probe_models);
  if (timeout.count() > 0) thread_ = std::thread([s = s_] { loop(s); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(s_->mu);
    s_->stopping = true;
  }
  s_->cv.notify_all();
  if (!thread_.joinable()) return;
  if (s_->in_model_probe.load() && now_ns() - s_->since_ns.load() > s_->timeout.count() * 1'000'000) {
    // The model probe hangs (the deadlock it found): joining would hang the shutdown too.
    GANTRY_LOG_ERROR("watchdog: {} still hangs at shutdown; leaving its probe behind", kModelPart);
    thread_.detach();
    return;
  }
  thread_.join();
}

bool Watchdog::await_control(Shared& s) {
  auto done = std::make_shared<std::promise<void>>();
  auto answered = done->get_future();
  s.since_ns.store(now_ns());
  s.part.store(kControlPart);
  s.probe_control([done] { done->set_value(); });
  // Waited for in slices, so that a stop is seen even when the pool never runs the task.
  while (answered.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
    std::lock_guard lock(s.mu);
    if (s.stopping) return false;
  }
  s.part.store(nullptr);
  return true;
}

void Watchdog::loop(const std::shared_ptr<Shared>& s) {
  for (;;) {
    if (!await_control(*s)) return;
    // The model probe blocks on locks: it runs on this thread, and alive() reads how long it has.
    s->since_ns.store(now_ns());
    s->in_model_probe.store(true);
    s->part.store(kModelPart);
    Status verdict;
    try {
      verdict = s->probe_models();
    } catch (const std::exception& e) {
      GANTRY_LOG_WARN("watchdog: the model probe threw: {}", e.what());
    }
    s->part.store(nullptr);
    s->in_model_probe.store(false);
    {
      std::lock_guard v(s->verdict_mu);
      if (!verdict.ok() && s->verdict.ok()) GANTRY_LOG_ERROR("watchdog: {}", verdict.message());
      s->verdict = verdict;
    }
    std::unique_lock lock(s->mu);
    if (s->cv.wait_for(lock, kProbeInterval, [&] { return s->stopping; })) return;
  }
}

Status Watchdog::alive() const {
  if (s_->timeout.count() <= 0) return Status::Ok();
  {
    std::lock_guard v(s_->verdict_mu);
    if (!s_->verdict.ok()) return s_->verdict;
  }
  const char* part = s_->part.load();
  if (part == nullptr) return Status::Ok();
  const double stuck_s = static_cast<double>(now_ns() - s_->since_ns.load()) / 1e9;
  if (stuck_s * 1000 <= static_cast<double>(s_->timeout.count())) return Status::Ok();
  return Unavailable(
      fmt::format("{} has not answered for {:.0f} s (--liveness-timeout {:.0f} s): the server "
                  "can no longer serve; restart it",
                  part, stuck_s, static_cast<double>(s_->timeout.count()) / 1000));
}

Status LoopMonitor::observe(const std::string& name, uint64_t work, uint64_t steps, Clock::time_point now) {
  auto it = seen_.find(name);
  if (work == 0 || it == seen_.end() || it->second.steps != steps) {
    seen_[name] = Seen{steps, now};  // idle, new, or it stepped: the clock starts again
    return Status::Ok();
  }
  const auto stuck = now - it->second.since;
  if (stuck <= timeout_) return Status::Ok();
  return Unavailable(
      fmt::format("model '{}': its decoding loop has taken no step for {:.0f} s with {} request(s) in it "
                  "(--liveness-timeout); restart the server",
                  name, std::chrono::duration<double>(stuck).count(), work));
}

}  // namespace gantry::server

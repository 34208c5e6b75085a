#include "watchdog.h"

#include <fmt/format.h>

#include <future>
#include <memory>

#include "gantry/core/log.h"

namespace gantry::server {
namespace {
using Clock = std::chrono::steady_clock;
constexpr auto kProbeInterval = std::chrono::seconds(1);

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}
}  // namespace

Watchdog::Watchdog(std::chrono::milliseconds timeout,
                   std::function<void(std::function<void()>)> probe_control,
                   std::function<Status()> probe_models)
    : timeout_(timeout), probe_control_(std::move(probe_control)), probe_models_(std::move(probe_models)) {
  if (timeout_.count() > 0) thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  if (part_.load() != nullptr && now_ns() - since_ns_.load() > timeout_.count() * 1'000'000) {
    // The probe hangs (the deadlock it found): joining would hang the shutdown too.
    GANTRY_LOG_ERROR("watchdog: {} still hangs at shutdown; leaving its probe behind", part_.load());
    thread_.detach();
    return;
  }
  thread_.join();
}

bool Watchdog::await(const char* part, const std::function<void(std::function<void()>)>& run) {
  auto done = std::make_shared<std::promise<void>>();
  auto finished = done->get_future();
  since_ns_.store(now_ns());
  part_.store(part);
  run([done] { done->set_value(); });
  // Wait in slices so that a stop is seen even when the probe never comes back.
  while (finished.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
  }
  part_.store(nullptr);
  return true;
}

void Watchdog::loop() {
  for (;;) {
    if (!await("the control pool (metadata, /metrics, readiness)", probe_control_)) return;
    // The model probe blocks on locks: it runs on this thread, and alive() reads how long it has.
    since_ns_.store(now_ns());
    part_.store("the model manager or a model's engine (their locks)");
    Status verdict;
    try {
      verdict = probe_models_();
    } catch (const std::exception& e) {
      GANTRY_LOG_WARN("watchdog: the model probe threw: {}", e.what());
    }
    {
      std::lock_guard v(verdict_mu_);
      if (!verdict.ok() && verdict_.ok()) GANTRY_LOG_ERROR("watchdog: {}", verdict.message());
      verdict_ = verdict;
    }
    part_.store(nullptr);
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, kProbeInterval, [this] { return stopping_; })) return;
  }
}

Status Watchdog::alive() const {
  if (timeout_.count() <= 0) return Status::Ok();
  {
    std::lock_guard v(verdict_mu_);
    if (!verdict_.ok()) return verdict_;
  }
  const char* part = part_.load();
  if (part == nullptr) return Status::Ok();
  const double stuck_s = static_cast<double>(now_ns() - since_ns_.load()) / 1e9;
  if (stuck_s * 1000 <= static_cast<double>(timeout_.count())) return Status::Ok();
  return Unavailable(
      fmt::format("{} has not answered for {:.0f} s (--liveness-timeout {:.0f} s): the server "
                  "can no longer serve; restart it",
                  part, stuck_s, static_cast<double>(timeout_.count()) / 1000));
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

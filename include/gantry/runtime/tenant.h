// Tenants: who a request is for, and what that one may use. A tenant is named by the server's keys file
// (docs/tenants.md); the runtime checks its limits at admission, in one place (ModelQueue::admit), and
// front ends only say whose a request is (runtime::Admission).
//
//   auto t = registry.update("acme", limits);          // a reload keeps its usage, takes the new limits
//   auto hold = t->admit("qwen", &max_tokens, &why);    // a Hold, or a refusal with when to come back
//   hold->add_tokens(prompt + generated);               // counted in its tokens/min window
//
// - Limits are optional, each on its own: requests and tokens (prompt + generated) in any 60 s
//   window, requests at once, max_tokens per request (a larger one is lowered to it), the models it
//   may use. A refusal says which limit refused and when the window frees enough (retry_after).
// - Priority and weight order the waiting line (ModelQueue); they limit nothing by themselves.
// - Thread-safe; time comes from the clock given at construction (tests inject one).
// - A key never reaches a Tenant: its name is what logs and metrics show.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::runtime {

using TenantClock = std::function<std::chrono::steady_clock::time_point()>;
TenantClock steady_tenant_clock();

// Interactive requests take a freed place before batch ones; batch ones never take the places kept
// for interactive ones (ModelQueue).
enum class Priority { kInteractive, kBatch };
std::string_view priority_name(Priority p);                     // "interactive", "batch"
std::optional<Priority> parse_priority(std::string_view name);  // nullopt for any other name

struct TenantLimits {
  std::optional<uint64_t> requests_per_minute;
  std::optional<uint64_t> tokens_per_minute;  // prompt + generated
  std::optional<uint64_t> max_concurrent;     // requests admitted and not yet ended, on all models
  std::optional<int> max_tokens;              // per request: a larger (or unset) max_tokens is lowered
  std::vector<std::string> models;            // served names it may use; empty: every model
  Priority priority = Priority::kInteractive;
  double weight = 1;                                  // > 0: its share of a model's waiting line
  std::optional<std::chrono::milliseconds> deadline;  // a request's deadline when it sets none
};

// The sum of amounts added in the last `span` (a sliding window). Amounts within `merge` of the
// latest are counted as added at the latest's time: a window holds at most span / merge entries, and
// frees() is never earlier than the truth (at most `merge` later). Not thread-safe (Tenant locks it).
class RateWindow {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RateWindow(Clock::duration span = std::chrono::minutes(1),
                      Clock::duration merge = std::chrono::milliseconds(250))
      : span_(span), merge_(merge) {}
  void add(Clock::time_point t, uint64_t amount);
  uint64_t used(Clock::time_point now);  // drops what left the window
  // The first time at which used() + need <= limit: `now` when it holds already; never, when need
  // > limit (then now + span: as long as a window can take).
  Clock::time_point frees(Clock::time_point now, uint64_t limit, uint64_t need);
  // Takes `amount` back from the latest entry (what add() just counted, when refused after all).
  void take_back(uint64_t amount);
  // When the oldest amount still counted leaves the window (now when none is).
  Clock::time_point resets(Clock::time_point now);

 private:
  void prune(Clock::time_point now);
  Clock::duration span_, merge_;
  std::deque<std::pair<Clock::time_point, uint64_t>> entries_;
  uint64_t sum_ = 0;
};

// What a tenant has left, for OpenAI's x-ratelimit-* headers (limit, remaining, reset seconds).
struct RateState {
  struct Line {
    uint64_t limit = 0, remaining = 0;
    double reset_s = 0;  // until the window is empty again
  };
  std::optional<Line> requests, tokens;
};

// Counters of one tenant, for /metrics (by name).
struct TenantCounters {
  uint64_t admitted = 0;
  uint64_t refused_rate = 0;         // requests/min or tokens/min
  uint64_t refused_concurrency = 0;  // max_concurrent
  uint64_t refused_model = 0;        // a model it may not use
  uint64_t refused_queue = 0;        // its share of a model's waiting line, or the line full
  uint64_t refused_deadline = 0;     // predicted to miss its deadline
  uint64_t cancelled_deadline = 0;   // admitted, then ran past its deadline
  uint64_t tokens = 0;               // prompt + generated, counted at the end of each request
  uint64_t in_flight = 0;
};

// Owned by a shared_ptr (admit() hands out holds that share it).
class Tenant : public std::enable_shared_from_this<Tenant> {
 public:
  Tenant(std::string name, TenantLimits limits, TenantClock clock = steady_tenant_clock());
  Tenant(const Tenant&) = delete;
  Tenant& operator=(const Tenant&) = delete;

  const std::string& name() const { return name_; }
  TenantLimits limits() const;
  void set_limits(TenantLimits limits);  // a reload: usage so far stays counted
  std::chrono::steady_clock::time_point now() const { return clock_(); }

  // The right to run one request; held until it ends (move-only, released once).
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& o) noexcept : tenant_(std::move(o.tenant_)) {}
    Hold& operator=(Hold&& o) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold() { release(); }
    explicit operator bool() const { return tenant_ != nullptr; }
    void release();
    // Releases it as never admitted: refused after the tenant's own checks (the model's queue full),
    // the request leaves its requests/min window again.
    void refund();
    Tenant* tenant() const { return tenant_.get(); }

   private:
    friend class Tenant;
    std::shared_ptr<Tenant> tenant_;
  };

  // Admits one request for `model` (its served name), counting it in the requests/min window, or
  // refuses it: NotFound for a model it may not use; ResourceExhausted for a limit, with
  // `*retry_after` set to when it would pass (seconds, rounded up, >= 1). Lowers `*max_tokens` (when
  // given) to the tenant's max_tokens.
  Result<Hold> admit(std::string_view model, int* max_tokens, int* retry_after);
  void add_tokens(uint64_t n);  // prompt + generated tokens of a request that ended
  void note_refused_queue();
  void note_refused_deadline();
  void note_cancelled_deadline();

  RateState rate_state();
  TenantCounters counters() const;

 private:
  void end_one(bool refund);

  std::string name_;
  TenantClock clock_;
  mutable std::mutex mu_;
  TenantLimits limits_;
  RateWindow requests_, tokens_;
  TenantCounters counters_;
};

// Every tenant by name. update() keeps a tenant's object (and its usage) across reloads of the keys
// file; one no longer named stays until the requests that hold it end (they keep it alive).
class TenantRegistry {
 public:
  explicit TenantRegistry(TenantClock clock = steady_tenant_clock()) : clock_(std::move(clock)) {}
  std::shared_ptr<Tenant> update(const std::string& name, TenantLimits limits);
  std::shared_ptr<Tenant> find(std::string_view name) const;
  // Drops the tenants not in `names` from the registry (their requests in flight keep them).
  void retain(const std::vector<std::string>& names);
  std::vector<std::shared_ptr<Tenant>> list() const;  // by name

 private:
  TenantClock clock_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Tenant>, std::less<>> tenants_;
};

// Whose a request is and when it must end, given to ModelQueue's entry points by a front end.
struct Admission {
  std::shared_ptr<Tenant> tenant;  // null: no tenant (no limits, interactive, weight 1)
  // The request's own deadline (x-request-deadline-ms), else the tenant's default; none: no deadline.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // Set by a refusal: seconds until it would pass (Retry-After). Shared so the front end that made
  // the Admission reads what the queue wrote.
  std::shared_ptr<int> retry_after = std::make_shared<int>(0);
};

}  // namespace gantry::runtime

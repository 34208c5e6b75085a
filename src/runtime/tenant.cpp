#include "gantry/runtime/tenant.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace gantry::runtime {
namespace {
using Clock = std::chrono::steady_clock;

// Whole seconds from `now` until `then`, rounded up, at least 1 (a Retry-After).
int seconds_until(Clock::time_point now, Clock::time_point then) {
  const double s = std::chrono::duration<double>(then - now).count();
  return std::max(1, static_cast<int>(std::ceil(s)));
}
}  // namespace

TenantClock steady_tenant_clock() {
  return [] { return Clock::now(); };
}

std::string_view priority_name(Priority p) { return p == Priority::kBatch ? "batch" : "interactive"; }

std::optional<Priority> parse_priority(std::string_view name) {
  if (name == "interactive") return Priority::kInteractive;
  if (name == "batch") return Priority::kBatch;
  return std::nullopt;
}

// ------------------------------------------------------------------------------------ RateWindow
void RateWindow::add(Clock::time_point t, uint64_t amount) {
  if (!entries_.empty() && t - entries_.back().first < merge_) {
    entries_.back().first = std::max(entries_.back().first, t);
    entries_.back().second += amount;
  } else {
    entries_.emplace_back(t, amount);
  }
  sum_ += amount;
}

void RateWindow::prune(Clock::time_point now) {
  while (!entries_.empty() && entries_.front().first + span_ <= now) {
    sum_ -= entries_.front().second;
    entries_.pop_front();
  }
}

uint64_t RateWindow::used(Clock::time_point now) {
  prune(now);
  return sum_;
}

Clock::time_point RateWindow::frees(Clock::time_point now, uint64_t limit, uint64_t need) {
  prune(now);
  if (need > limit) return now + span_;
  if (sum_ + need <= limit) return now;
  uint64_t left = sum_;
  for (const auto& [t, amount] : entries_) {
    left -= amount;
    if (left + need <= limit) return t + span_;
  }
  return now + span_;  // not reached: an empty window holds need <= limit
}

void RateWindow::take_back(uint64_t amount) {
  if (entries_.empty()) return;
  const uint64_t n = std::min(amount, entries_.back().second);
  entries_.back().second -= n;
  sum_ -= n;
  if (entries_.back().second == 0) entries_.pop_back();
}

Clock::time_point RateWindow::resets(Clock::time_point now) {
  prune(now);
  return entries_.empty() ? now : entries_.back().first + span_;
}

// ------------------------------------------------------------------------------------ Tenant
Tenant::Tenant(std::string name, TenantLimits limits, TenantClock clock)
    : name_(std::move(name)), clock_(std::move(clock)), limits_(std::move(limits)) {}

TenantLimits Tenant::limits() const {
  std::lock_guard lock(mu_);
  return limits_;
}

void Tenant::set_limits(TenantLimits limits) {
  std::lock_guard lock(mu_);
  limits_ = std::move(limits);
}

Tenant::Hold& Tenant::Hold::operator=(Hold&& o) noexcept {
  if (this != &o) {
    release();
    tenant_ = std::move(o.tenant_);
  }
  return *this;
}

void Tenant::Hold::release() {
  if (!tenant_) return;
  tenant_->end_one(false);
  tenant_.reset();
}

void Tenant::Hold::refund() {
  if (!tenant_) return;
  tenant_->end_one(true);
  tenant_.reset();
}

void Tenant::end_one(bool refund) {
  std::lock_guard lock(mu_);
  if (counters_.in_flight > 0) --counters_.in_flight;
  if (refund) {
    requests_.take_back(1);
    if (counters_.admitted > 0) --counters_.admitted;
  }
}

Result<Tenant::Hold> Tenant::admit(std::string_view model, int* max_tokens, int* retry_after) {
  const Clock::time_point now = clock_();
  std::lock_guard lock(mu_);
  const TenantLimits& l = limits_;
  if (!l.models.empty() && std::find(l.models.begin(), l.models.end(), model) == l.models.end()) {
    ++counters_.refused_model;
    return NotFound(fmt::format("model '{}' is not one this API key may use (tenant '{}')", model, name_));
  }
  if (l.max_concurrent && counters_.in_flight >= *l.max_concurrent) {
    ++counters_.refused_concurrency;
    if (retry_after) *retry_after = 1;  // when one of its requests ends: not known ahead
    return ResourceExhausted(fmt::format(
        "tenant '{}' has {} requests in flight, its limit; retry when one ends", name_, counters_.in_flight));
  }
  if (l.requests_per_minute) {
    const Clock::time_point when = requests_.frees(now, *l.requests_per_minute, 1);
    if (when > now) {
      ++counters_.refused_rate;
      const int s = seconds_until(now, when);
      if (retry_after) *retry_after = s;
      return ResourceExhausted(
          fmt::format("tenant '{}' is at its limit of {} requests per minute; retry in {} s", name_,
                      *l.requests_per_minute, s));
    }
  }
  if (l.tokens_per_minute) {
    const Clock::time_point when = tokens_.frees(now, *l.tokens_per_minute, 1);
    if (when > now) {
      ++counters_.refused_rate;
      const int s = seconds_until(now, when);
      if (retry_after) *retry_after = s;
      return ResourceExhausted(
          fmt::format("tenant '{}' is at its limit of {} tokens per minute; retry in {} s", name_,
                      *l.tokens_per_minute, s));
    }
  }
  if (max_tokens && l.max_tokens && (*max_tokens <= 0 || *max_tokens > *l.max_tokens))
    *max_tokens = *l.max_tokens;
  requests_.add(now, 1);
  ++counters_.admitted;
  ++counters_.in_flight;
  Hold h;
  h.tenant_ = shared_from_this();
  return h;
}

void Tenant::add_tokens(uint64_t n) {
  if (n == 0) return;
  const Clock::time_point now = clock_();
  std::lock_guard lock(mu_);
  tokens_.add(now, n);
  counters_.tokens += n;
}

void Tenant::note_refused_queue() {
  std::lock_guard lock(mu_);
  ++counters_.refused_queue;
}

void Tenant::note_refused_deadline() {
  std::lock_guard lock(mu_);
  ++counters_.refused_deadline;
}

void Tenant::note_cancelled_deadline() {
  std::lock_guard lock(mu_);
  ++counters_.cancelled_deadline;
}

RateState Tenant::rate_state() {
  const Clock::time_point now = clock_();
  std::lock_guard lock(mu_);
  RateState r;
  auto line = [now](RateWindow& w, uint64_t limit) {
    RateState::Line l;
    l.limit = limit;
    const uint64_t used = w.used(now);
    l.remaining = used >= limit ? 0 : limit - used;
    l.reset_s = std::chrono::duration<double>(w.resets(now) - now).count();
    return l;
  };
  if (limits_.requests_per_minute) r.requests = line(requests_, *limits_.requests_per_minute);
  if (limits_.tokens_per_minute) r.tokens = line(tokens_, *limits_.tokens_per_minute);
  return r;
}

TenantCounters Tenant::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

// ------------------------------------------------------------------------------------ TenantRegistry
std::shared_ptr<Tenant> TenantRegistry::update(const std::string& name, TenantLimits limits) {
  std::lock_guard lock(mu_);
  auto it = tenants_.find(name);
  if (it != tenants_.end()) {
    it->second->set_limits(std::move(limits));
    return it->second;
  }
  auto t = std::make_shared<Tenant>(name, std::move(limits), clock_);
  tenants_.emplace(name, t);
  return t;
}

std::shared_ptr<Tenant> TenantRegistry::find(std::string_view name) const {
  std::lock_guard lock(mu_);
  auto it = tenants_.find(name);
  return it == tenants_.end() ? nullptr : it->second;
}

void TenantRegistry::retain(const std::vector<std::string>& names) {
  std::lock_guard lock(mu_);
  for (auto it = tenants_.begin(); it != tenants_.end();) {
    if (std::find(names.begin(), names.end(), it->first) == names.end())
      it = tenants_.erase(it);
    else
      ++it;
  }
}

std::vector<std::shared_ptr<Tenant>> TenantRegistry::list() const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<Tenant>> out;
  for (const auto& [name, t] : tenants_) out.push_back(t);
  return out;
}

}  // namespace gantry::runtime

#include "gantry/runtime/admission.h"

#include <fmt/format.h>

namespace gantry::runtime {

Admission::Ticket::Ticket(Ticket&& o) noexcept : owner_(o.owner_), model_(std::move(o.model_)) {
  o.owner_ = nullptr;
}

Admission::Ticket& Admission::Ticket::operator=(Ticket&& o) noexcept {
  if (this != &o) {
    release();
    owner_ = o.owner_;
    model_ = std::move(o.model_);
    o.owner_ = nullptr;
  }
  return *this;
}

void Admission::Ticket::release() {
  if (owner_ == nullptr) return;
  owner_->give_back(model_);
  owner_ = nullptr;
}

Result<Admission::Ticket> Admission::admit(std::string_view model, size_t capacity) {
  std::lock_guard lock(mu_);
  auto it = held_.find(model);
  const size_t held = it == held_.end() ? 0 : it->second;
  if (held >= capacity + max_queue_) {
    return ResourceExhausted(fmt::format(
        "model '{}' is at capacity ({} running at once, {} waiting; --parallel / --max-queue); retry later",
        model, capacity, max_queue_));
  }
  if (it == held_.end()) it = held_.emplace(std::string(model), 0).first;
  ++it->second;
  Ticket t;
  t.owner_ = this;
  t.model_ = it->first;
  return t;
}

void Admission::give_back(const std::string& model) {
  std::lock_guard lock(mu_);
  auto it = held_.find(model);
  if (it == held_.end()) return;
  if (--it->second == 0) held_.erase(it);
}

size_t Admission::max_queue() const {
  std::lock_guard lock(mu_);
  return max_queue_;
}

void Admission::set_max_queue(size_t n) {
  std::lock_guard lock(mu_);
  max_queue_ = n;
}

std::map<std::string, size_t, std::less<>> Admission::outstanding() const {
  std::lock_guard lock(mu_);
  return held_;
}

}  // namespace gantry::runtime

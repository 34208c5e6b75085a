#include "gantry/memory/owner_scope.h"

#include <atomic>

namespace gantry::memory {

namespace {
thread_local OwnerScope* t_current = nullptr;
thread_local uint64_t t_serial = 0;
std::atomic<uint64_t> g_next_serial{1};
}  // namespace

OwnerScope::OwnerScope(std::string owner)
    : owner_(std::move(owner)),
      serial_(g_next_serial.fetch_add(1, std::memory_order_relaxed)),
      previous_(t_current) {
  t_current = this;
  t_serial = serial_;
}

OwnerScope::~OwnerScope() {
  t_current = previous_;
  t_serial = previous_ ? previous_->serial_ : 0;
}

std::string_view OwnerScope::current() {
  return t_current ? std::string_view(t_current->owner_) : kUnattributed;
}

uint64_t OwnerScope::current_serial() { return t_serial; }

}  // namespace gantry::memory

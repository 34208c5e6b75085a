#include "gantry/backend/fair_queue.h"

#include <algorithm>

namespace gantry::backend {

FairQueue::Key FairQueue::key_for(const Schedule& s) {
  const double weight = s.weight > 0 ? s.weight : 1;
  auto it = last_.find(s.flow);
  const double start = it == last_.end() ? vtime_ : std::max(vtime_, it->second);
  Key k;
  k.priority = s.priority;
  k.start = start;
  k.tag = start + 1.0 / weight;
  if (it == last_.end())
    last_.emplace(s.flow, k.tag);
  else
    it->second = k.tag;
  return k;
}

void FairQueue::started(const Key& key) {
  // The virtual time is the start of what runs: a flow that was idle starts from there, not from
  // where it left off (no banked credit).
  vtime_ = std::max(vtime_, key.start);
  if (last_.size() > 1024) forget_idle_flows();
}

void FairQueue::forget_idle_flows() {
  for (auto it = last_.begin(); it != last_.end();) {
    if (it->second <= vtime_)
      it = last_.erase(it);
    else
      ++it;
  }
}

}  // namespace gantry::backend

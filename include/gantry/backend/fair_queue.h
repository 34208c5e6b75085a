// FairQueue: the order of a scheduler's waiting line when requests carry a Schedule (who they are for,
// their class, their weight): priority classes first, weighted fair queuing among flows (tenants)
// within a class, and no starvation. Used by the BatchEngine for which queued generation takes a
// freed slot; plain data, no backend in it, so it is tested on its own (tests/backend/fair_queue_test.cpp).
//
// - Each entry gets a tag when it is queued: max(the tag of the last entry started, its flow's last
//   tag) + 1 / weight (start-time fair queuing), so a flow with weight 2 gets twice the starts of one
//   with weight 1 while both wait, and a flow that was idle does not bank credit.
// - An entry goes in front of those of a lower class (a larger priority number) and of its own class
//   with a larger tag, but never in front of one that has already been passed kMaxOvertakes times: a
//   batch request waits for at most that many later arrivals (no starvation).
// - Not thread-safe: its scheduler's lock guards it.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

namespace gantry::backend {

// What a request says about its place in a waiting line (GenerationRequest::schedule).
struct Schedule {
  int priority = 0;   // 0 interactive, 1 batch: lower first
  std::string flow;   // whose (a tenant's name); "" for requests without one
  double weight = 1;  // > 0
};

class FairQueue {
 public:
  static constexpr int kMaxOvertakes = 8;

  struct Key {
    int priority = 0;
    double start = 0;  // its virtual start: where its flow's share begins
    double tag = 0;    // start + 1 / weight: the line's order within a class
    int overtaken = 0;
  };

  // The key of an entry being queued now.
  Key key_for(const Schedule& s);

  // Where an entry with `key` goes in a line of `n` entries whose keys `at(i)` returns (front first):
  // the index to insert at. Counts one overtake on each entry it goes in front of.
  template <typename At>
  size_t place(const Key& key, size_t n, At&& at) {
    size_t i = n;
    while (i > 0) {
      Key& before = at(i - 1);
      if (before.overtaken >= kMaxOvertakes || !comes_before(key, before)) break;
      --i;
    }
    for (size_t j = i; j < n; ++j) ++at(j).overtaken;
    return i;
  }

  void started(const Key& key);  // an entry left the line to run: the line's virtual time moves on
  void forget_idle_flows();      // drops flows whose last tag the virtual time has passed (memory only:
                                 // such a flow starts at the virtual time either way)

  static bool comes_before(const Key& a, const Key& b) {
    return a.priority != b.priority ? a.priority < b.priority : a.tag < b.tag;
  }

 private:
  double vtime_ = 0;
  std::map<std::string, double, std::less<>> last_;
};

}  // namespace gantry::backend

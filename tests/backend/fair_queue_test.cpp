// FairQueue (gantry/backend/fair_queue.h): the waiting line's order by class, weighted fair shares
// among flows, and the bound on how often an entry is passed. A plain vector plays the line.
#include "gantry/backend/fair_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gantry::backend {
namespace {

struct Entry {
  std::string name;
  FairQueue::Key key;
};

struct Line {
  FairQueue fq;
  std::vector<Entry> entries;
  void push(const std::string& name, Schedule s) {
    Entry e{name, fq.key_for(s)};
    const size_t at =
        fq.place(e.key, entries.size(), [this](size_t i) -> FairQueue::Key& { return entries[i].key; });
    entries.insert(entries.begin() + static_cast<std::ptrdiff_t>(at), e);
  }
  std::string pop() {
    Entry e = entries.front();
    entries.erase(entries.begin());
    fq.started(e.key);
    return e.name;
  }
};

Schedule flow(const std::string& f, double weight = 1, int priority = 0) {
  return Schedule{priority, f, weight};
}

TEST(FairQueue, WithoutSchedulesTheLineIsFirstComeFirstServed) {
  Line l;
  for (int i = 0; i < 5; ++i) l.push(std::to_string(i), Schedule{});
  std::string order;
  while (!l.entries.empty()) order += l.pop();
  EXPECT_EQ(order, "01234");
}

TEST(FairQueue, WeightsShareTheStartsBetweenFlows) {
  Line l;
  for (int i = 0; i < 6; ++i) l.push("A", flow("a", 2));  // a flood arrives first
  for (int i = 0; i < 6; ++i) l.push("B", flow("b", 1));
  std::string first6;
  for (int i = 0; i < 6; ++i) first6 += l.pop();
  EXPECT_EQ(first6, "AABAAB") << "weight 2 gets two starts for each of weight 1's";
}

TEST(FairQueue, ALateFlowIsNotStuckBehindAFlood) {
  Line l;
  for (int i = 0; i < 20; ++i) l.push("F", flow("flood"));
  l.pop();
  l.pop();
  l.push("Q", flow("quiet"));
  EXPECT_EQ(l.pop(), "Q")
      << "a flow that was idle starts at the line's virtual time, ahead of the flood's backlog";
}

TEST(FairQueue, InteractiveFirstButABatchEntryIsPassedAtMostKMaxOvertakesTimes) {
  Line l;
  l.push("b", flow("nightly", 1, 1));
  for (int i = 0; i < FairQueue::kMaxOvertakes + 3; ++i) l.push("i", flow("chat", 1, 0));
  std::string order;
  while (!l.entries.empty()) order += l.pop();
  EXPECT_EQ(order, std::string(FairQueue::kMaxOvertakes, 'i') + "b" + "iii")
      << "interactive before batch, until the batch entry was passed kMaxOvertakes times";
}

}  // namespace
}  // namespace gantry::backend

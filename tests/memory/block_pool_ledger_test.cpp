// Per-owner bytes have one record, a Budget's ledger: a BlockPool reports what the budget decides with,
// whether the budget is given (the runtime's) or the pool's own unlimited one.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "gantry/memory/block_pool.h"
#include "gantry/memory/budget.h"
#include "gantry/memory/owner_scope.h"

namespace gantry::memory {
namespace {

constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * KiB;

// Every owner the pool lists has, in the pool's report, exactly the ledger's in_use and peak, and
// in_use is the sum of the rounded sizes of its live allocations.
void expect_one_record(const BlockPool& pool, const std::map<std::string, std::vector<void*>>& live) {
  uint64_t total = 0;
  for (const OwnerStats& o : pool.owners()) {
    SCOPED_TRACE(o.owner);
    auto u = pool.budget().usage(o.owner);
    ASSERT_TRUE(u);
    EXPECT_EQ(o.bytes_in_use, u->in_use);
    EXPECT_EQ(o.peak_in_use, u->peak);
    uint64_t sizes = 0;
    auto it = live.find(o.owner);
    if (it != live.end())
      for (void* p : it->second) sizes += pool.allocation_size(p);
    EXPECT_EQ(o.bytes_in_use, sizes);
    EXPECT_EQ(o.allocations, it == live.end() ? 0u : it->second.size());
    total += o.bytes_in_use;
  }
  EXPECT_EQ(total, pool.stats().bytes_in_use);
}

void churn(BlockPool& pool) {
  std::mt19937 rng(7);
  const char* const names[] = {"model-a", "model-b", "cache"};
  std::map<std::string, std::vector<void*>> live;
  for (int step = 0; step < 400; ++step) {
    const std::string owner = names[rng() % 3];
    auto& mine = live[owner];
    if (!mine.empty() && rng() % 3 == 0) {
      const size_t i = rng() % mine.size();
      ASSERT_TRUE(pool.free(mine[i]).ok());
      mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      // Small slots, large runs, and sizes that repeat (the reuse cache).
      const uint64_t sizes[] = {1, 100, 4 * KiB + 3, 40 * KiB, 256 * KiB, 1 * MiB + 7};
      auto p = pool.allocate_for(owner, sizes[rng() % 6]);
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      mine.push_back(*p);
    }
    if (step % 50 == 0) pool.reset_peaks();
    expect_one_record(pool, live);
  }
  for (auto& [owner, ps] : live)
    for (void* p : ps) ASSERT_TRUE(pool.free(p).ok());
  live.clear();
  expect_one_record(pool, live);
  for (const OwnerStats& o : pool.owners()) EXPECT_EQ(o.bytes_in_use, 0u) << o.owner;
  EXPECT_EQ(pool.budget().over_credits(), 0u);
}

TEST(BlockPoolLedger, PoolWithABudgetReportsTheBudgetsLedger) {
  Budget budget("cpu", 1024 * MiB);
  BlockPoolOptions o;
  o.budget = &budget;
  BlockPool pool(make_host_backing(), o);
  EXPECT_EQ(&pool.budget(), &budget);
  churn(pool);
  EXPECT_EQ(budget.ledger().size(), 3u);
}

TEST(BlockPoolLedger, PoolWithoutABudgetStillReportsPerOwnerBytes) {
  BlockPool pool(make_host_backing());
  EXPECT_EQ(pool.options().budget, nullptr);
  EXPECT_EQ(pool.budget().capacity(), UINT64_MAX);  // its own, unlimited
  EXPECT_EQ(pool.budget().device(), "cpu");
  churn(pool);
  void* a = nullptr;
  {
    OwnerScope scope("m");
    a = *pool.allocate(300 * KiB);
  }
  EXPECT_EQ(pool.owner("m")->bytes_in_use, 300 * KiB);
  EXPECT_EQ(pool.owner("m")->peak_in_use, 300 * KiB);
  EXPECT_EQ(pool.owner("m")->allocations, 1u);
  ASSERT_TRUE(pool.free(a).ok());
  EXPECT_EQ(pool.owner("m")->bytes_in_use, 0u);
  EXPECT_EQ(pool.owner("m")->peak_in_use, 300 * KiB);
  EXPECT_FALSE(pool.owner("never"));
}

TEST(BlockPoolLedger, AnAllocationThePoolCannotPlaceLeavesNoTraceInTheLedger) {
  Budget budget("cpu", 64 * MiB);
  BlockPoolOptions o;
  o.budget = &budget;
  o.capacity = 4 * MiB;  // the pool runs out before the budget does
  o.keep_empty_blocks = 0;
  BlockPool pool(make_host_backing(), o);
  void* a = *pool.allocate_for("m", 3 * MiB);
  auto b = pool.allocate_for("m", 3 * MiB);  // the budget grants it, the pool cannot map a block
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(pool.stats().failed, 1u);
  EXPECT_EQ(budget.usage("m")->in_use, 3 * MiB);
  EXPECT_EQ(budget.usage("m")->peak, 3 * MiB);  // not 6: the refund took the failed charge back
  EXPECT_EQ(budget.peak(), 3 * MiB);
  EXPECT_EQ(pool.owner("m")->bytes_in_use, 3 * MiB);
  EXPECT_EQ(pool.owner("m")->peak_in_use, 3 * MiB);
  ASSERT_TRUE(pool.free(a).ok());
  EXPECT_EQ(budget.usage("m")->in_use, 0u);
  EXPECT_EQ(budget.over_credits(), 0u);
}

TEST(BlockPoolLedger, ResetPeaksResetsTheLedgersOwnerPeaks) {
  Budget budget("cpu", 64 * MiB);
  BlockPoolOptions o;
  o.budget = &budget;
  BlockPool pool(make_host_backing(), o);
  void* weights = *pool.allocate_for("m", 2 * MiB);
  ASSERT_TRUE(pool.free(*pool.allocate_for("m", 8 * MiB)).ok());
  EXPECT_EQ(budget.usage("m")->peak, 10 * MiB);
  pool.reset_peaks();
  EXPECT_EQ(budget.usage("m")->peak, 2 * MiB);
  EXPECT_EQ(pool.owner("m")->peak_in_use, 2 * MiB);
  EXPECT_EQ(budget.peak(), 10 * MiB);  // the budget's own peak of used() is not the pool's to reset
  ASSERT_TRUE(pool.free(weights).ok());
}

// Owners allocating on several threads while another reads the ledger and resets the peaks: with the
// pool's own ledger (guarded by the pool's lock) and with a given budget (its own lock, never nested).
void race_readers_and_owners(BlockPool& pool) {
  constexpr int kThreads = 4;
  constexpr int kMaxLive = 16;
  constexpr uint64_t kMaxSize = 96 * KiB;  // a multiple of 64: the rounded size is at most this
  std::atomic<bool> done{false};
  std::atomic<int> errors{0};
  std::thread reader([&] {
    while (!done.load()) {
      for (const OwnerStats& o : pool.owners())
        if (o.bytes_in_use > kMaxLive * kMaxSize) ++errors;  // no thread ever holds more
      uint64_t sum = 0;                                      // one snapshot of the ledger
      for (const OwnerUsage& u : pool.budget().ledger()) sum += u.footprint();
      if (sum > kThreads * kMaxLive * kMaxSize) ++errors;
      pool.reset_peaks();
    }
  });
  std::vector<std::thread> owners;
  for (int t = 0; t < kThreads; ++t)
    owners.emplace_back([&, t] {
      const std::string name = "owner" + std::to_string(t);
      OwnerScope scope(name);
      std::mt19937 rng(t);
      std::vector<void*> mine;
      for (int i = 0; i < 4000; ++i) {
        if (mine.size() >= kMaxLive || (!mine.empty() && rng() % 2)) {
          if (!pool.free(mine.back()).ok()) ++errors;
          mine.pop_back();
        } else {
          // Through the scope (the thread's cached account) and by name (looked up).
          auto p =
              i % 5 ? pool.allocate(rng() % kMaxSize + 1) : pool.allocate_for(name, rng() % kMaxSize + 1);
          if (!p.ok()) {
            ++errors;
            continue;
          }
          mine.push_back(*p);
        }
      }
      for (void* p : mine)
        if (!pool.free(p).ok()) ++errors;
    });
  for (auto& th : owners) th.join();
  done = true;
  reader.join();
  EXPECT_EQ(errors.load(), 0);
  ASSERT_EQ(pool.owners().size(), static_cast<size_t>(kThreads));
  for (const OwnerStats& o : pool.owners()) {
    EXPECT_EQ(o.bytes_in_use, 0u) << o.owner;
    EXPECT_EQ(o.allocations, 0u) << o.owner;
    EXPECT_EQ(pool.budget().usage(o.owner)->in_use, 0u) << o.owner;
  }
  EXPECT_EQ(pool.budget().used(), 0u);
  EXPECT_EQ(pool.budget().over_credits(), 0u);
  EXPECT_EQ(pool.stats().bytes_in_use, 0u);
}

TEST(BlockPoolLedger, OwnLedgerUnderConcurrentOwnersAndReaders) {
  BlockPool pool(make_host_backing());
  race_readers_and_owners(pool);
}

TEST(BlockPoolLedger, GivenBudgetUnderConcurrentOwnersAndReaders) {
  Budget budget("cpu", 1024 * MiB);
  BlockPoolOptions o;
  o.budget = &budget;
  BlockPool pool(make_host_backing(), o);
  race_readers_and_owners(pool);
  EXPECT_EQ(budget.ledger().size(), 4u);
}

TEST(BudgetRefund, TakesBackTheChargeAndItsPeaks) {
  Budget b("cpu", 100 * MiB);
  ASSERT_TRUE(b.charge("a", 10 * MiB).ok());
  Budget::Receipt r;
  ASSERT_TRUE(b.charge("a", 30 * MiB, r).ok());
  EXPECT_EQ(r.owner_peak, 10 * MiB);
  EXPECT_EQ(r.peak, 10 * MiB);
  EXPECT_EQ(b.usage("a")->peak, 40 * MiB);
  b.refund("a", 30 * MiB, r);
  EXPECT_EQ(b.usage("a")->in_use, 10 * MiB);
  EXPECT_EQ(b.usage("a")->peak, 10 * MiB);
  EXPECT_EQ(b.peak(), 10 * MiB);
  EXPECT_EQ(b.over_credits(), 0u);
  // A refused charge changes nothing (and its receipt is not to be refunded).
  EXPECT_FALSE(b.charge("a", 200 * MiB, r).ok());
  EXPECT_EQ(b.usage("a")->in_use, 10 * MiB);
}

}  // namespace
}  // namespace gantry::memory

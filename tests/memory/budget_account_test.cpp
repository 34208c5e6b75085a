// Budget::Account (an owner's line, charged without a lookup by name), used() as a running sum, and a
// budget guarded by its user's mutex (the *_held operations).
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <random>
#include <string>

#include "gantry/memory/budget.h"

namespace gantry::memory {
namespace {

constexpr uint64_t MiB = 1ull << 20;

TEST(BudgetAccount, IsTheOwnersLineOfTheLedger) {
  Budget b("cpu", 100 * MiB);
  Budget::Account& a = b.account("m");
  EXPECT_EQ(a.owner(), "m");
  EXPECT_EQ(&b.account("m"), &a);  // one line per owner
  EXPECT_FALSE(b.usage("m")) << "an account alone lists nothing";
  EXPECT_TRUE(b.ledger().empty());

  Budget::Receipt r;
  ASSERT_TRUE(b.charge(a, 10 * MiB, r).ok());
  ASSERT_TRUE(b.charge("m", 5 * MiB).ok());  // by name: the same line
  EXPECT_EQ(b.usage("m")->in_use, 15 * MiB);
  b.credit(a, 4 * MiB);
  EXPECT_EQ(b.usage("m")->in_use, 11 * MiB);
  EXPECT_EQ(b.usage("m")->peak, 15 * MiB);
  EXPECT_EQ(b.used(), 11 * MiB);

  // A refused charge through an account lists nothing and changes nothing.
  Budget::Account& big = b.account("big");
  EXPECT_FALSE(b.charge(big, 200 * MiB, r).ok());
  EXPECT_FALSE(b.usage("big"));
  EXPECT_EQ(b.used(), 11 * MiB);

  // release() empties the account; a later charge through it lists the owner afresh.
  b.release("m");
  EXPECT_FALSE(b.usage("m"));
  EXPECT_EQ(b.used(), 0u);
  ASSERT_TRUE(b.charge(a, 2 * MiB, r).ok());
  EXPECT_EQ(b.usage("m")->in_use, 2 * MiB);
  EXPECT_EQ(b.usage("m")->peak, 2 * MiB);
  b.credit(a, 3 * MiB);  // 1 MiB more than charged since the release
  EXPECT_EQ(b.over_credits(), 1 * MiB);
  EXPECT_EQ(b.usage("m")->in_use, 0u);
}

// used() is kept as a running sum: after any mix of operations it is the sum of the ledger's footprints.
TEST(BudgetAccount, UsedIsAlwaysTheSumOfFootprints) {
  Budget b("cpu", 64 * MiB);
  std::mt19937 rng(11);
  const char* const owners[] = {"a", "b", "c", "d"};
  uint64_t peak = 0;
  for (int step = 0; step < 2000; ++step) {
    const std::string o = owners[rng() % 4];
    const uint64_t n = (rng() % 64 + 1) * (MiB / 8);
    switch (rng() % 6) {
      case 0:
        (void)b.reserve(o, n);
        break;
      case 1:
        b.unreserve(o, n);
        break;
      case 2:
      case 3: {
        Budget::Receipt r;
        (void)b.charge(b.account(o), n, r);
        break;
      }
      case 4:
        b.credit(o, n);
        break;
      default:
        if (rng() % 8 == 0) b.release(o);
        break;
    }
    uint64_t sum = 0;
    for (const OwnerUsage& u : b.ledger()) sum += u.footprint();
    ASSERT_EQ(b.used(), sum) << "step " << step;
    ASSERT_LE(b.used(), b.capacity());
    peak = std::max(peak, sum);
    ASSERT_EQ(b.peak(), peak) << "step " << step;
  }
}

TEST(BudgetGuarded, HeldOperationsRunUnderTheUsersMutex) {
  std::mutex guard;
  Budget b("cpu", 10 * MiB, guard);
  int asked = 0;
  b.add_reclaimer("cache", [&](uint64_t) -> uint64_t {
    ++asked;
    return 0;
  });
  Budget::Account& a = b.account("m");
  Budget::Receipt r;
  {
    std::lock_guard lock(guard);
    ASSERT_TRUE(b.charge_held(a, 6 * MiB, r).ok());
    // Refused at once: no reclaimer runs under the guard.
    const Status s = b.charge_held(a, 6 * MiB, r);
    EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
    EXPECT_NE(s.message().find("on cpu"), std::string::npos) << s.message();
    ASSERT_TRUE(b.charge_held(a, 3 * MiB, r).ok());
    b.refund_held(a, 3 * MiB, r);  // as if the allocation then failed
    b.credit_held(a, 1 * MiB);
  }
  EXPECT_EQ(asked, 0);
  // The other operations take the guard themselves.
  EXPECT_EQ(b.usage("m")->in_use, 5 * MiB);
  EXPECT_EQ(b.usage("m")->peak, 6 * MiB);  // the refunded 9 MiB left no trace
  EXPECT_EQ(b.peak(), 6 * MiB);
  EXPECT_EQ(b.used(), 5 * MiB);
  EXPECT_TRUE(guard.try_lock()) << "every operation let the guard go";
  guard.unlock();
}

}  // namespace
}  // namespace gantry::memory

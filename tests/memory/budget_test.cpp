#include "gantry/memory/budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace gantry::memory {
namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;

TEST(Budget, ReserveChargeCreditFootprint) {
  Budget b("cuda:0", 100 * MiB);
  ASSERT_TRUE(b.reserve("a", 40 * MiB).ok());
  EXPECT_EQ(b.used(), 40 * MiB);
  // Charges inside the reservation cost nothing extra.
  ASSERT_TRUE(b.charge("a", 30 * MiB).ok());
  EXPECT_EQ(b.used(), 40 * MiB);
  EXPECT_EQ(b.usage("a")->in_use, 30 * MiB);
  // Beyond the reservation they count.
  ASSERT_TRUE(b.charge("a", 20 * MiB).ok());
  EXPECT_EQ(b.usage("a")->footprint(), 50 * MiB);
  EXPECT_EQ(b.used(), 50 * MiB);
  EXPECT_EQ(b.available(), 50 * MiB);
  b.credit("a", 45 * MiB);
  EXPECT_EQ(b.usage("a")->in_use, 5 * MiB);
  EXPECT_EQ(b.usage("a")->peak, 50 * MiB);
  EXPECT_EQ(b.used(), 40 * MiB);  // the reservation remains
  EXPECT_EQ(b.peak(), 50 * MiB);
  b.unreserve("a", 100 * MiB);  // never below zero
  EXPECT_EQ(b.usage("a")->reserved, 0u);
  EXPECT_EQ(b.used(), 5 * MiB);
  b.credit("a", 7 * MiB);  // 2 MiB more than charged
  EXPECT_EQ(b.usage("a")->in_use, 0u);
  EXPECT_EQ(b.over_credits(), 2 * MiB);
  b.credit("nobody", 1);
  EXPECT_EQ(b.over_credits(), 2 * MiB + 1);
  b.release("a");
  EXPECT_FALSE(b.usage("a"));
  EXPECT_EQ(b.used(), 0u);
}

TEST(Budget, RefusalChangesNothingAndSaysTheNumbers) {
  Budget b("cuda:0", GiB + GiB / 2);
  ASSERT_TRUE(b.reserve("m1", GiB / 2).ok());
  ASSERT_TRUE(b.charge("m2", GiB / 2 + GiB / 5).ok());
  const uint64_t used = b.used();
  Status s = b.reserve("m3", 2 * GiB - GiB / 10);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("1.9 GiB"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cuda:0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("budget 1.5 GiB"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("1.2 GiB used by 2 models"), std::string::npos) << s.message();
  EXPECT_EQ(b.used(), used);
  EXPECT_FALSE(b.usage("m3"));
  Status c = b.charge("m1", GiB);  // footprint would go 0.5 -> 1.0 GiB: +0.5, over
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(b.usage("m1")->in_use, 0u);
  EXPECT_EQ(b.used(), used);
  // Exactly to the capacity fits.
  ASSERT_TRUE(b.charge("m1", b.available() + GiB / 2).ok());
  EXPECT_EQ(b.available(), 0u);
  EXPECT_FALSE(b.charge("m4", 1).ok());
}

TEST(Budget, LedgerListsEachOwnerOnce) {
  Budget b("cpu", GiB);
  ASSERT_TRUE(b.reserve("m", 1).ok());
  ASSERT_TRUE(b.charge("m", 2).ok());
  auto ledger = b.ledger();
  ASSERT_EQ(ledger.size(), 1u);
  EXPECT_EQ(ledger[0].owner, "m");
  EXPECT_EQ(ledger[0].footprint(), 2u);
}

TEST(Budget, ConcurrentRaceForTheLastBytesNeverOvercommits) {
  for (int round = 0; round < 20; ++round) {
    Budget b("cpu", 1000);
    std::atomic<int> granted{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&, t] {
        while (!go.load()) {
        }
        for (int i = 0; i < 100; ++i) {
          // Reservations and charges on different owners, so every grant adds exactly 3 bytes.
          const std::string owner = (i % 2 ? "c" : "r") + std::to_string((t + i) % 5);
          if ((i % 2 ? b.charge(owner, 3) : b.reserve(owner, 3)).ok()) granted.fetch_add(1);
          EXPECT_LE(b.used(), 1000u);
        }
      });
    go = true;
    for (auto& th : threads) th.join();
    EXPECT_EQ(granted.load(), 333);  // floor(1000 / 3): every byte handed out, none twice
    EXPECT_EQ(b.used(), 999u);
    EXPECT_LE(b.peak(), 1000u);
  }
}

// A cache that gives back the bytes it reserved when asked (as a host prompt cache does).
struct FakeCache {
  Budget& b;
  std::string owner;
  uint64_t held = 0;
  int calls = 0;
  uint64_t give(uint64_t wanted) {
    ++calls;
    const uint64_t n = std::min(wanted, held);
    held -= n;
    b.unreserve(owner, n);
    return n;
  }
};

TEST(Budget, CachesAreReclaimedBeforeARequestIsRefused) {
  Budget b("cpu", 100 * MiB);
  FakeCache cache{b, "llama", 0, 0};
  const uint64_t id = b.add_reclaimer("llama", [&](uint64_t w) { return cache.give(w); });
  ASSERT_TRUE(b.reserve("llama", 30 * MiB).ok());  // the model
  ASSERT_TRUE(b.reserve("llama", 50 * MiB).ok());  // its cache
  cache.held = 50 * MiB;
  // Fits without the cache: no call.
  ASSERT_TRUE(b.reserve("onnx", 20 * MiB).ok());
  EXPECT_EQ(cache.calls, 0);
  // 15 MiB more than is free: the cache is asked for exactly the shortfall.
  ASSERT_TRUE(b.reserve("onnx", 15 * MiB).ok());
  EXPECT_EQ(cache.calls, 1);
  EXPECT_EQ(cache.held, 35 * MiB);
  EXPECT_EQ(b.reclaimed(), 15 * MiB);
  EXPECT_EQ(b.used(), 100 * MiB);
  // charge() reclaims too.
  ASSERT_TRUE(b.charge("onnx", 40 * MiB).ok());  // footprint 35 -> 40: 5 MiB more
  EXPECT_EQ(cache.held, 30 * MiB);
  // The owner's own cache is never asked on its behalf (it makes its own room).
  EXPECT_FALSE(b.reserve("llama", 1 * MiB).ok());
  EXPECT_EQ(cache.calls, 2);
  // More than every cache holds: refused, with the numbers, and nothing else changes.
  Status s = b.reserve("big", 60 * MiB);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(cache.held, 0u) << "the cache gave what it had";
  EXPECT_FALSE(b.usage("big"));
  b.remove_reclaimer(id);
  cache.held = 0;
  ASSERT_TRUE(b.reserve("llama", 10 * MiB).ok());
  cache.held = 10 * MiB;
  EXPECT_FALSE(b.reserve("big2", 40 * MiB).ok());
  EXPECT_EQ(cache.calls, 3) << "a removed reclaimer is not called";
}

TEST(Budget, RemoveReclaimerWaitsForARunningOne) {
  Budget b("cpu", 10);
  std::atomic<bool> entered{false}, release{false}, removed{false};
  const uint64_t id = b.add_reclaimer("cache", [&](uint64_t) -> uint64_t {
    entered = true;
    while (!release.load()) std::this_thread::yield();
    EXPECT_FALSE(removed.load()) << "remove_reclaimer returned while the reclaimer ran";
    return 0;
  });
  ASSERT_TRUE(b.reserve("m", 10).ok());
  std::thread asker([&] { EXPECT_FALSE(b.reserve("n", 5).ok()); });
  while (!entered.load()) std::this_thread::yield();
  std::thread remover([&] {
    b.remove_reclaimer(id);
    removed = true;
  });
  release = true;
  asker.join();
  remover.join();
  EXPECT_TRUE(removed.load());
}

TEST(FormatBytes, Units) {
  EXPECT_EQ(format_bytes(12), "12 B");
  EXPECT_EQ(format_bytes(640 * MiB), "640.0 MiB");
  EXPECT_EQ(format_bytes(GiB + GiB / 2), "1.5 GiB");
  EXPECT_EQ(format_bytes(2048), "2.0 KiB");
}

TEST(ParseByteSize, Good) {
  EXPECT_EQ(*parse_byte_size("4GiB"), 4 * GiB);
  EXPECT_EQ(*parse_byte_size("512MiB"), 512 * MiB);
  EXPECT_EQ(*parse_byte_size("1.5GB"), 1500000000u);
  EXPECT_EQ(*parse_byte_size("1024"), 1024u);
  EXPECT_EQ(*parse_byte_size("70G"), 70 * GiB);
  EXPECT_EQ(*parse_byte_size(" 2 kib "), 2048u);
  EXPECT_EQ(*parse_byte_size("3KB"), 3000u);
  EXPECT_EQ(*parse_byte_size("1t"), 1ull << 40);
  EXPECT_EQ(*parse_byte_size("7b"), 7u);
}

TEST(ParseByteSize, Bad) {
  for (const char* bad : {"", "GiB", "-1GiB", "4 parsecs", "1.5", "1e3", "4GiBs", "1..2G", "99999999999TB"}) {
    auto r = parse_byte_size(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  EXPECT_NE(parse_byte_size("4 parsecs").status().message().find("unknown unit 'parsecs'"),
            std::string::npos);
}

TEST(ParseBudgetSpec, Good) {
  auto s = parse_budget_spec("cpu=4GiB,cuda:0=70GiB");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(*s->devices.at("cpu").bytes, 4 * GiB);
  EXPECT_EQ(*s->devices.at("cuda:0").bytes, 70 * GiB);
  EXPECT_EQ(*s->fallback.fraction, 0.9);  // default for devices not named
  EXPECT_EQ(s->capacity_for("cuda:0", 80 * GiB), 70 * GiB);
  EXPECT_EQ(s->capacity_for("cuda:1", 10 * GiB), 9 * GiB);

  auto pct = parse_budget_spec("80%");
  ASSERT_TRUE(pct.ok());
  EXPECT_TRUE(pct->devices.empty());
  EXPECT_DOUBLE_EQ(*pct->fallback.fraction, 0.8);
  EXPECT_EQ(pct->capacity_for("cpu", 1000), 800u);

  auto mixed = parse_budget_spec(" cpu:0 = 0.5 , CUDA:00=90% ");
  ASSERT_TRUE(mixed.ok()) << mixed.status().to_string();
  EXPECT_DOUBLE_EQ(*mixed->devices.at("cpu").fraction, 0.5);
  EXPECT_DOUBLE_EQ(*mixed->devices.at("cuda:0").fraction, 0.9);

  auto both = parse_budget_spec("cuda:1=2GiB,1");
  ASSERT_TRUE(both.ok());
  EXPECT_DOUBLE_EQ(*both->fallback.fraction, 1.0);
  EXPECT_EQ(both->capacity_for("cpu", 123), 123u);
}

TEST(ParseBudgetSpec, Bad) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c :
       {Case{"", "empty"}, Case{"cpu=4GiB,,cuda:0=1G", "empty item"}, Case{"gpu=4GiB", "bad device 'gpu'"},
        Case{"cuda:x=1G", "bad device"}, Case{"cpu=120%", "not in (0, 100]"},
        Case{"cpu=0%", "not in (0, 100]"}, Case{"cpu=1.5", "not in (0, 1]"}, Case{"cpu=0", "not in (0, 1]"},
        Case{"cpu=4 parsecs", "unknown unit"}, Case{"80%,50%", "two items without a device"},
        Case{"cpu=1G,cpu:0=2G", "twice"}, Case{"cpu=abc%", "bad percentage"}}) {
    auto r = parse_budget_spec(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << c.text << ": " << r.status().message();
  }
}

}  // namespace
}  // namespace gantry::memory

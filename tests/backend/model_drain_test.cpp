// Model::enter()/drain()/reset() under contention: once drain() has returned, no call runs and
// none starts until reset(); calls refused meanwhile get Unavailable. Several threads hammer
// infer_one while another cycles drain -> check -> reset a fixed number of times, each step waiting for
// what it needs to have happened (a call run, a call refused), never for a length of time.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "gantry/backend/model.h"

namespace gantry::backend {
namespace {

// Records, with atomics, how many calls are inside infer_one and whether any ran while the test
// said the model was drained.
class CountingModel : public Model {
 public:
  std::atomic<int> running{0};
  std::atomic<bool> drained{false};  // set by the test between drain() returning and reset()
  std::atomic<uint64_t> ran{0};
  std::atomic<uint64_t> refused{0};
  std::atomic<uint64_t> ran_while_drained{0};
  std::atomic<uint64_t> wrong_refusal{0};  // refused with something other than Unavailable

  CountingModel() {
    meta_.name = "counting";
    meta_.backend = "test";
  }

  const ModelMetadata& metadata() const override { return meta_; }
  Status init() override { return Status::Ok(); }

  Result<std::vector<NamedTensor>> infer_one(std::span<const NamedTensor>) override {
    auto guard = enter();
    if (!guard.ok()) {
      refused.fetch_add(1);
      if (guard.status().code() != StatusCode::kUnavailable) wrong_refusal.fetch_add(1);
      return guard.status();
    }
    running.fetch_add(1);
    if (drained.load()) ran_while_drained.fetch_add(1);
    // A little work so that calls overlap drain(); check again at the end of it.
    volatile uint64_t sink = 0;
    for (int i = 0; i < 200; ++i) sink = sink + static_cast<uint64_t>(i);
    if (drained.load()) ran_while_drained.fetch_add(1);
    running.fetch_sub(1);
    ran.fetch_add(1);
    return std::vector<NamedTensor>{};
  }

 private:
  ModelMetadata meta_;
};

TEST(ModelDrain, NoCallRunsBetweenDrainAndReset) {
  CountingModel model;
  std::atomic<bool> stop{false};
  const unsigned callers = std::max(4u, std::thread::hardware_concurrency() * 2);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < callers; ++t)
    threads.emplace_back([&] {
      // A refused caller backs off a little, as a client told Unavailable would: refused calls
      // briefly count as in flight, so a storm of them can keep drain() waiting for a long time.
      while (!stop.load())
        if (!model.infer_one({}).ok()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    });

  constexpr uint64_t kCycles = 50;
  uint64_t cycles = 0;
  uint64_t running_after_drain = 0;
  for (; cycles < kCycles; ++cycles) {
    // Let callers in until one has run since the last reset, so that drain() has calls to wait for.
    for (const uint64_t ran = model.ran.load(); model.ran.load() == ran;) std::this_thread::yield();
    ASSERT_TRUE(model.drain().ok());
    model.drained.store(true);
    // Watch the drained window until a caller has been refused in it: nothing may be running, nor start.
    for (const uint64_t refused = model.refused.load(); model.refused.load() == refused;) {
      if (model.running.load() != 0) ++running_after_drain;
      std::this_thread::yield();
    }
    if (model.running.load() != 0) ++running_after_drain;
    // (stats().in_flight may briefly count a call that enter() is about to refuse: not checked here.)
    model.drained.store(false);
    ASSERT_TRUE(model.reset().ok());
  }
  stop.store(true);
  for (auto& t : threads) t.join();

  std::printf("drain cycles %llu, calls run %llu, refused %llu\n", static_cast<unsigned long long>(cycles),
              static_cast<unsigned long long>(model.ran.load()),
              static_cast<unsigned long long>(model.refused.load()));
  EXPECT_EQ(running_after_drain, 0u) << "a call was running after drain() returned";
  EXPECT_EQ(model.ran_while_drained.load(), 0u) << "a call ran between drain() and reset()";
  EXPECT_EQ(model.wrong_refusal.load(), 0u) << "a refused call did not get Unavailable";
  // Both paths were exercised in every cycle (the waits above make sure of it).
  EXPECT_EQ(cycles, kCycles);
  EXPECT_GE(model.ran.load(), kCycles);
  EXPECT_GE(model.refused.load(), kCycles);
  EXPECT_EQ(model.stats().in_flight, 0);
  EXPECT_EQ(model.stats().calls, model.ran.load());
}

TEST(ModelDrain, RefusedCallNamesTheModelAndReset) {
  CountingModel model;
  ASSERT_TRUE(model.drain().ok());
  auto r = model.infer_one({});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("counting"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("reset()"), std::string::npos) << r.status().message();
  ASSERT_TRUE(model.reset().ok());
  EXPECT_TRUE(model.infer_one({}).ok());
}

}  // namespace
}  // namespace gantry::backend

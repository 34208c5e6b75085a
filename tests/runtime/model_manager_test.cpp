// The model manager's rules on fake models whose memory is declared exactly: reservation, LRU eviction of
// idle unpinned models, refusal with the numbers, keep_alive, unload waiting for handles, racing loads.
#include "gantry/runtime/model_manager.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace gantry::runtime {
namespace {

using namespace std::chrono_literals;

class FakeModel final : public backend::Model {
 public:
  explicit FakeModel(std::string name, std::atomic<int>* alive = nullptr,
                     const std::atomic<bool>* broken = nullptr)
      : alive_(alive), broken_(broken) {
    meta_.name = std::move(name);
    meta_.backend = "fake";
    if (alive_) alive_->fetch_add(1);
  }
  ~FakeModel() override {
    if (alive_) alive_->fetch_sub(1);
  }
  const backend::ModelMetadata& metadata() const override { return meta_; }
  Status init() override { return Status::Ok(); }
  Result<std::vector<NamedTensor>> infer_one(std::span<const NamedTensor>) override {
    auto guard = enter();
    if (!guard.ok()) return guard.status();
    return std::vector<NamedTensor>{};
  }
  Status health() const override {
    return broken_ && broken_->load() ? Unavailable("RPC server 10.0.0.2:50052 was lost") : Status::Ok();
  }

 private:
  backend::ModelMetadata meta_;
  std::atomic<int>* alive_;
  const std::atomic<bool>* broken_;
};

// Returns once the clock reads later than `t`, so that the next use is stamped strictly after it.
void after_a_clock_tick(Clock::time_point t) {
  while (Clock::now() <= t) std::this_thread::yield();
}

class ModelManagerTest : public ::testing::Test {
 protected:
  void SetUp() override { budgets_.emplace("cpu", std::make_unique<memory::Budget>("cpu", 100)); }

  Result<ModelHandle> load(ModelManager& m, const std::string& name, uint64_t bytes,
                           ManagedLoadOptions o = {}) {
    GANTRY_ASSIGN_OR_RETURN(auto begin, m.begin_load(name, o));
    if (auto* h = std::get_if<ModelHandle>(&begin)) return std::move(*h);
    auto adm = std::get<ModelManager::Admission>(std::move(begin));
    backend::MemoryEstimate e;
    e.bytes["cpu"] = bytes;
    e.basis = "declared by the test";
    if (Status s = adm.reserve(e); !s.ok()) {
      adm.fail(s);
      return s;
    }
    return adm.finish(std::make_unique<FakeModel>(name, &alive_, &broken_), "fake", "cpu");
  }

  memory::Budget& cpu() { return *budgets_.at("cpu"); }
  ModelState state(ModelManager& m, const std::string& name) { return m.info(name).value().state; }

  Budgets budgets_;
  std::atomic<int> alive_{0};
  std::atomic<bool> broken_{false};
};

TEST_F(ModelManagerTest, AModelThatBreaksFailsAtOnceAndGoesWithItsLastHandle) {
  ModelManager m(budgets_);
  auto h = load(m, "a", 40);
  ASSERT_TRUE(h.ok()) << h.status().message();
  auto other = load(m, "b", 10);
  ASSERT_TRUE(other.ok());
  broken_ = true;  // e.g. an RPC server holding some of its layers was lost (b "breaks" too: same flag)
  auto refused = m.acquire("a");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("failed (RPC server 10.0.0.2:50052 was lost)"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(state(m, "a"), ModelState::kFailed);
  EXPECT_EQ(alive_.load(), 2);  // the call in flight still holds it
  EXPECT_EQ(cpu().used(), 50u);
  *h = ModelHandle();  // the last handle goes: destroyed, memory released
  EXPECT_EQ(alive_.load(), 1);
  EXPECT_EQ(cpu().used(), 10u);
  EXPECT_EQ(state(m, "a"), ModelState::kFailed);
  EXPECT_EQ(m.info("a")->reason, "RPC server 10.0.0.2:50052 was lost");

  // It can be loaded again (the host is back).
  broken_ = false;
  *other = ModelHandle();
  auto again = load(m, "a", 40);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(state(m, "a"), ModelState::kReady);
}

TEST_F(ModelManagerTest, ReservesTheEstimateAndListsTheModel) {
  ModelManager m(budgets_);
  auto h = load(m, "a", 40);
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(cpu().used(), 40u);
  auto info = m.info("a");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->state, ModelState::kReady);
  EXPECT_EQ(info->reserved_bytes.at("cpu"), 40u);
  EXPECT_EQ(info->handles, 1);
  EXPECT_EQ(info->memory_basis, "declared by the test");
}

TEST_F(ModelManagerTest, LoadingTheSameNameAgainReturnsTheLoadedModel) {
  ModelManager m(budgets_);
  auto a = load(m, "a", 40);
  ASSERT_TRUE(a.ok());
  auto b = load(m, "a", 40);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(&a->model(), &b->model());
  EXPECT_EQ(alive_.load(), 1);
  EXPECT_EQ(cpu().used(), 40u);
}

TEST_F(ModelManagerTest, EvictsTheLeastRecentlyUsedIdleModel) {
  ModelManager m(budgets_);
  ASSERT_TRUE(load(m, "a", 40).ok());  // handles dropped at once: idle
  after_a_clock_tick(m.info("a")->last_used);
  ASSERT_TRUE(load(m, "b", 40).ok());
  after_a_clock_tick(m.info("b")->last_used);
  ASSERT_TRUE(m.acquire("a").ok());  // a used again: b is now the least recently used
  auto c = load(m, "c", 40);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(state(m, "a"), ModelState::kReady);
  EXPECT_EQ(state(m, "b"), ModelState::kEvicted);
  EXPECT_NE(m.info("b")->reason.find("make room for 'c'"), std::string::npos) << m.info("b")->reason;
  EXPECT_EQ(cpu().used(), 80u);
  EXPECT_EQ(alive_.load(), 2);  // b's model was destroyed
  auto again = m.acquire("b");
  EXPECT_EQ(again.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(again.status().message().find("evicted"), std::string::npos);
}

TEST_F(ModelManagerTest, PinnedAndInUseModelsAreNeverEvicted) {
  ModelManager m(budgets_);
  ManagedLoadOptions pinned;
  pinned.pinned = true;
  ASSERT_TRUE(load(m, "pinned", 40, pinned).ok());
  auto busy = load(m, "busy", 40);  // handle kept: in use
  ASSERT_TRUE(busy.ok());
  auto c = load(m, "c", 40);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
  const std::string& msg = c.status().message();
  EXPECT_NE(msg.find("in use or pinned"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cpu"), std::string::npos) << msg;
  EXPECT_EQ(state(m, "pinned"), ModelState::kReady);
  EXPECT_EQ(state(m, "busy"), ModelState::kReady);
  EXPECT_EQ(state(m, "c"), ModelState::kFailed);
  EXPECT_EQ(cpu().used(), 80u);  // the failed load released what it had
}

TEST_F(ModelManagerTest, AModelLargerThanTheBudgetIsRefusedWithTheNumbers) {
  ModelManager m(budgets_);
  auto r = load(m, "huge", 150);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("does not fit"), std::string::npos) << r.status().message();
  EXPECT_EQ(alive_.load(), 0);  // refused before any model was created
  EXPECT_EQ(m.info("huge")->state, ModelState::kFailed);
}

TEST_F(ModelManagerTest, KeepAliveZeroUnloadsWhenIdle) {
  ModelManager m(budgets_);
  ManagedLoadOptions o;
  o.keep_alive = 0ms;
  {
    auto h = load(m, "a", 40, o);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(m.sweep(), 0);  // in use
  }
  EXPECT_EQ(m.sweep(), 1);
  EXPECT_EQ(state(m, "a"), ModelState::kUnloaded);
  EXPECT_EQ(cpu().used(), 0u);
  EXPECT_EQ(alive_.load(), 0);
}

TEST_F(ModelManagerTest, KeepAliveTimerUnloadsInTheBackground) {
  ModelManager m(budgets_);
  m.start_keep_alive_timer();
  ManagedLoadOptions o;
  o.keep_alive = 50ms;
  ASSERT_TRUE(load(m, "a", 40, o).ok());
  ManagedLoadOptions forever;
  forever.keep_alive = -1ms;
  ASSERT_TRUE(load(m, "b", 40, forever).ok());
  EXPECT_TRUE(m.wait_for_state("a", ModelState::kUnloaded, 60s)) << model_state_name(state(m, "a"));
  EXPECT_EQ(state(m, "b"), ModelState::kReady);
}

TEST_F(ModelManagerTest, UnloadWaitsForHandles) {
  ModelManager m(budgets_);
  auto h = load(m, "a", 40);
  ASSERT_TRUE(h.ok());
  Status s = m.unload("a", 50ms);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.message();
  EXPECT_EQ(state(m, "a"), ModelState::kReady);
  std::thread releaser([&] {
    // Released only once unload() below has started waiting for it (it marks the model draining first).
    EXPECT_TRUE(m.wait_for_state("a", ModelState::kDraining, 60s));
    *h = ModelHandle();
  });
  s = m.unload("a", 60s);
  releaser.join();
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(state(m, "a"), ModelState::kUnloaded);
  EXPECT_EQ(alive_.load(), 0);
  EXPECT_EQ(m.unload("a").code(), StatusCode::kNotFound);
}

TEST_F(ModelManagerTest, RacingLoadsNeverOvercommit) {
  ModelManager m(budgets_);
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::vector<ModelHandle> handles(kThreads);
  std::atomic<int> ok{0}, refused{0};
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      auto h = load(m, "m" + std::to_string(i), 30);  // handles kept: nothing is evictable
      if (h.ok()) {
        handles[i] = std::move(*h);
        ok.fetch_add(1);
      } else {
        EXPECT_EQ(h.status().code(), StatusCode::kResourceExhausted);
        refused.fetch_add(1);
      }
      EXPECT_LE(cpu().used(), cpu().capacity());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 3);
  EXPECT_EQ(refused.load(), kThreads - 3);
  EXPECT_EQ(cpu().used(), 90u);
  EXPECT_LE(cpu().peak(), 100u);
}

TEST_F(ModelManagerTest, ConcurrentLoadsOfOneNameCreateOneModel) {
  ModelManager m(budgets_);
  // This thread holds the admission while three others ask for the same name: none may get a model (nor
  // an admission of its own) before this load has finished.
  auto first = m.begin_load("same", {});
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(std::holds_alternative<ModelManager::Admission>(*first));
  auto adm = std::get<ModelManager::Admission>(std::move(*first));
  std::atomic<bool> finished{false};
  std::atomic<int> admissions{0};
  std::vector<std::thread> threads;
  std::vector<ModelHandle> handles(4);
  for (int i = 1; i < 4; ++i) {
    threads.emplace_back([&, i] {
      auto begin = m.begin_load("same", {});
      ASSERT_TRUE(begin.ok());
      if (auto* h = std::get_if<ModelHandle>(&*begin)) {
        EXPECT_TRUE(finished.load()) << "a handle before the load had finished";
        handles[i] = std::move(*h);
        return;
      }
      admissions.fetch_add(1);
    });
  }
  finished.store(true);
  auto h = adm.finish(std::make_unique<FakeModel>("same"), "fake", "cpu");
  ASSERT_TRUE(h.ok());
  handles[0] = std::move(*h);
  for (auto& t : threads) t.join();
  EXPECT_EQ(admissions.load(), 0) << "a second load of the same name was admitted";
  for (auto& handle : handles) {
    ASSERT_TRUE(handle);
    EXPECT_EQ(&handle.model(), &handles[0].model());
  }
  EXPECT_EQ(m.info("same")->handles, 4);
}

TEST_F(ModelManagerTest, AnEvictedModelCanBeLoadedAgain) {
  ModelManager m(budgets_);
  ASSERT_TRUE(load(m, "a", 60).ok());
  ASSERT_TRUE(load(m, "b", 60).ok());  // evicts a
  EXPECT_EQ(state(m, "a"), ModelState::kEvicted);
  auto a = load(m, "a", 60);  // evicts b
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(state(m, "a"), ModelState::kReady);
  EXPECT_EQ(state(m, "b"), ModelState::kEvicted);
  EXPECT_TRUE(a->model().infer_one({}).ok());
}

}  // namespace
}  // namespace gantry::runtime

// The liveness watchdog (src/server/watchdog.h): alive while its probes come back; failing, and naming the
// part, once one hangs past the timeout; alive again when it returns.
#include "server/watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace gantry::server {
namespace {

using namespace std::chrono_literals;

// Polls `cond` (bounded): the watchdog decides on its own thread.
template <typename F>
bool eventually(F cond) {
  for (int i = 0; i < 20'000; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

TEST(Watchdog, AliveWhileProbesAnswerAndFailsNamingTheHungPart) {
  std::mutex manager;  // stands for the model manager's lock
  std::mutex mu;
  std::condition_variable cv;
  int probes = 0;
  Watchdog w(
      50ms, [](std::function<void()> done) { done(); },
      [&] {
        std::lock_guard hold(manager);
        std::lock_guard lock(mu);
        ++probes;
        cv.notify_all();
        return Status::Ok();
      });
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 20s, [&] { return probes >= 1; }));
  }
  EXPECT_TRUE(w.alive().ok());
  std::unique_lock deadlock(manager);  // the next probe hangs on it
  ASSERT_TRUE(eventually([&] { return !w.alive().ok(); }));
  const Status st = w.alive();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("the model manager"), std::string::npos) << st.message();
  deadlock.unlock();
  EXPECT_TRUE(eventually([&] { return w.alive().ok(); }));
}

TEST(Watchdog, AStuckControlPoolFailsLivenessAndShutdownDoesNotHang) {
  std::mutex mu;
  std::condition_variable cv;
  std::function<void()> parked;  // a control pool whose threads never run the task
  {
    Watchdog w(
        50ms,
        [&](std::function<void()> done) {
          std::lock_guard lock(mu);
          parked = std::move(done);
          cv.notify_all();
        },
        [] { return Status::Ok(); });
    ASSERT_TRUE(eventually([&] { return !w.alive().ok(); }));
    EXPECT_NE(w.alive().message().find("the control pool"), std::string::npos) << w.alive().message();
  }  // the destructor returns although the probe never came back
  std::lock_guard lock(mu);
  EXPECT_TRUE(static_cast<bool>(parked));
}

TEST(Watchdog, ATimeoutOfZeroIsNoWatchdog) {
  Watchdog w(
      0ms, [](std::function<void()>) {}, [] { return Status::Ok(); });
  EXPECT_TRUE(w.alive().ok());
}

TEST(Watchdog, AModelProbeVerdictFailsLivenessUntilItClears) {
  std::atomic<bool> stuck{true};
  Watchdog w(
      50ms, [](std::function<void()> done) { done(); },
      [&] { return stuck.load() ? Unavailable("model 'm': stuck") : Status::Ok(); });
  ASSERT_TRUE(eventually([&] { return !w.alive().ok(); }));
  EXPECT_NE(w.alive().message().find("model 'm'"), std::string::npos);
  stuck.store(false);
  EXPECT_TRUE(eventually([&] { return w.alive().ok(); }));
}

// A loop with work and no step for longer than the timeout is stuck; stepping, or having no work, is not.
TEST(LoopMonitor, WorkWithoutStepsPastTheTimeoutIsStuck) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0{};
  LoopMonitor m(10s);
  EXPECT_TRUE(m.observe("a", 2, 7, t0).ok());
  EXPECT_TRUE(m.observe("a", 2, 7, t0 + 10s).ok());
  const Status st = m.observe("a", 2, 7, t0 + 11s);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("model 'a'"), std::string::npos) << st.message();
  EXPECT_TRUE(m.observe("a", 2, 8, t0 + 12s).ok());  // it stepped
  EXPECT_TRUE(m.observe("a", 2, 8, t0 + 21s).ok());  // within the timeout of that step
  EXPECT_TRUE(m.observe("a", 0, 8, t0 + 60s).ok());  // idle: the clock starts again
  EXPECT_TRUE(m.observe("a", 1, 8, t0 + 61s).ok());  // work again
  EXPECT_TRUE(m.observe("a", 1, 8, t0 + 70s).ok());
  EXPECT_FALSE(m.observe("a", 1, 8, t0 + 72s).ok());
  EXPECT_TRUE(m.observe("b", 5, 0, t0 + 72s).ok());  // another model is its own
}

}  // namespace
}  // namespace gantry::server

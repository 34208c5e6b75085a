// Issue 34: streamed requests whose clients vanished deadlocked `gantry serve`. A request queued in a
// text model's engine held a model handle (through its callbacks); cancelled before admission, it was
// dropped under the engine's lock, and dropping the handle takes the model manager's lock, while the
// manager's keep-alive timer (woken by every handle release) held the manager's lock and asked the
// engine for its stats (the engine's lock): ABBA. The lock order is now one way (docs/architecture.md):
// this replays the pattern many times over. The old code hung here within a few rounds (and a
// ThreadSanitizer build, `make tsan`, reports the inversion even in a round that does not hang).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "gantry/runtime/runtime.h"

namespace gantry::runtime {
namespace {

namespace fs = std::filesystem;
const std::string kTinyLlama = (fs::path(GANTRY_DEPS_DIR) / "models" / "tiny-llama.gguf").string();

TEST(LockOrder, QueuedRequestsHoldingHandlesAreDroppedWhileTheManagerReadsStats) {
  ASSERT_TRUE(fs::exists(kTinyLlama)) << kTinyLlama << " is missing: run `make setup`";
  RuntimeOptions o;
  o.verdict_cache_dir = "none";
  o.keep_alive_timer = true;  // wakes at every handle release and reads every model's state
  auto rt = Runtime::create(std::move(o));
  ASSERT_TRUE(rt.ok()) << rt.status().to_string();
  LoadOptions lo;
  lo.factory.llama.parallel = 1;  // one slot: the rest of each round waits in the queue
  lo.factory.llama.n_ctx = 256;
  lo.factory.intra_op_threads = 1;
  auto model = (*rt)->load(kTinyLlama, lo);
  ASSERT_TRUE(model.ok()) << model.status().to_string();

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0};
  std::thread reader([&] {  // /metrics, the dashboard, the watchdog: the manager's list() and info()
    while (!stop.load()) {
      (void)(*rt)->manager().list();
      (void)(*rt)->manager().info("tiny-llama");
      reads.fetch_add(1);
    }
  });
  constexpr int kRounds = 40;
  constexpr int kPerRound = 12;
  int cancelled = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::unique_ptr<backend::Generation>> gens;
    for (int i = 0; i < kPerRound; ++i) {
      auto held = (*rt)->get("tiny-llama");
      ASSERT_TRUE(held.ok()) << held.status().to_string();
      backend::GenerationRequest r;
      r.prompt = "Once upon a time";
      r.max_tokens = 4;
      r.sampling.temperature = 0;
      // The request holds a handle, as a protocol's hooks do, and drops it with the request.
      auto handle = std::make_shared<ModelHandle>(std::move(*held));
      r.on_done = [handle] {};
      r.on_text = [handle](std::string_view) { return true; };
      auto g = model->model().start_generation(std::move(r));
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      gens.push_back(std::move(*g));
    }
    for (size_t i = 1; i < gens.size(); ++i) gens[i]->cancel();  // the clients vanish while queued
    for (auto& g : gens) {
      auto r = g->wait();
      if (r.ok() && r->finish == backend::FinishReason::kCancelled) ++cancelled;
    }
  }
  stop.store(true);
  reader.join();
  EXPECT_GT(cancelled, 0) << "no request was cancelled: the pattern was not exercised";
  EXPECT_GT(reads.load(), 0u);
  // Every handle the requests held goes back: the unload (which waits for them) succeeds.
  *model = ModelHandle();
  EXPECT_TRUE((*rt)->unload("tiny-llama").ok());
}

}  // namespace
}  // namespace gantry::runtime

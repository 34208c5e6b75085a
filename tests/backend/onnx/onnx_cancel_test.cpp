// Cancelling an ONNX run midway: a long run (models/slow_chain_256.onnx, ~3000 small nodes) cancelled from
// another thread ends Cancelled; an uncancelled one returns its outputs; the check that throws cancels.
// Synchronised on events (the terminator's first call of the check means the run is in flight), never on
// sleeps; how fast it stops is the benchmark's (bench/onnx_cancel_bench.cpp), not an assertion here.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "gantry/backend/onnx/onnx_model.h"

namespace gantry::onnx {
namespace {

namespace fs = std::filesystem;
const fs::path kSlow = fs::path(GANTRY_DEPS_DIR) / "models" / "slow_chain_256.onnx";

std::unique_ptr<OnnxModel> open_slow() {
  backend::Placement p;
  p.provider = "cpu";
  p.intra_op_threads = 1;
  auto m = OnnxModel::open(kSlow, p);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(m).value() : nullptr;
}

std::vector<NamedTensor> slow_inputs() {
  auto t = Tensor::allocate(DType::kFloat32, Shape({64, 256})).value();
  for (auto& x : t.values<float>()) x = 0.5f;
  std::vector<NamedTensor> in;
  in.push_back({"input", std::move(t)});
  return in;
}

// A check another thread flips: `asked` is fulfilled the first time the check is called while the run is in
// flight (by the terminator, on its thread), so the canceller knows the run has started.
struct RemoteCancel {
  std::atomic<bool> cancel{false};
  std::thread::id caller = std::this_thread::get_id();
  std::once_flag once;
  std::promise<void> asked;
  void signal() {
    std::call_once(once, [this] { asked.set_value(); });
  }
  backend::CancelCheck check() {
    return [this] {
      if (std::this_thread::get_id() != caller) signal();  // the terminator's thread: the run is in flight
      return cancel.load();
    };
  }
};

TEST(OnnxCancel, ALongRunCancelledFromAnotherThreadEndsCancelled) {
  if (!fs::exists(kSlow)) FAIL() << kSlow << " missing: run `make setup`";
  auto model = open_slow();
  ASSERT_TRUE(model);
  RemoteCancel remote;
  auto started = remote.asked.get_future();
  std::thread canceller([&] {
    started.wait();
    remote.cancel = true;
  });
  const auto check = remote.check();
  auto out = model->infer_cancellable(slow_inputs(), check);
  remote.signal();  // never asked (a run that ended first): the assertions below say so
  canceller.join();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kCancelled) << out.status().to_string();
  EXPECT_NE(out.status().message().find("cancelled"), std::string::npos) << out.status().message();
  // The model serves the next request as before.
  auto again = model->infer_one(slow_inputs());
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->front().tensor.shape(), Shape({64, 256}));
}

TEST(OnnxCancel, AnUncancelledRunReturnsItsOutputsAndACancelledOneNeverStarts) {
  if (!fs::exists(kSlow)) FAIL() << kSlow << " missing: run `make setup`";
  auto model = open_slow();
  ASSERT_TRUE(model);
  std::atomic<int> calls{0};
  const backend::CancelCheck never = [&] {
    calls.fetch_add(1);
    return false;
  };
  auto out = model->infer_cancellable(slow_inputs(), never);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  auto plain = model->infer_one(slow_inputs());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(out->front().tensor.values<float>()[0], plain->front().tensor.values<float>()[0]);
  EXPECT_GE(calls.load(), 1);
  const backend::CancelCheck already = [] { return true; };
  auto refused = model->infer_cancellable(slow_inputs(), already);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kCancelled);
}

TEST(OnnxCancel, ACheckThatThrowsCancelsTheRun) {
  if (!fs::exists(kSlow)) FAIL() << kSlow << " missing: run `make setup`";
  auto model = open_slow();
  ASSERT_TRUE(model);
  std::atomic<int> calls{0};
  const backend::CancelCheck throws = [&]() -> bool {
    if (calls.fetch_add(1) == 0) return false;  // infer_cancellable's own first call
    throw std::runtime_error("broken check");
  };
  auto out = model->infer_cancellable(slow_inputs(), throws);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kCancelled) << out.status().to_string();
}

}  // namespace
}  // namespace gantry::onnx

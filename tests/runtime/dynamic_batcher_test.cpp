// DynamicBatcher on a real ONNX model (the MLP): concurrent requests batch together, every request
// gets its own rows back equal to running it alone, and what is still queued when it stops is answered.
#include "gantry/runtime/dynamic_batcher.h"

#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <thread>

#include "backend/onnx/onnx_test_util.h"
#include "gantry/runtime/runtime.h"

namespace gantry::runtime {
namespace {
using gantry::testing::kMlp;
using gantry::testing::random_f32;

std::unique_ptr<runtime::Runtime> make_runtime() {
  runtime::RuntimeOptions o;
  o.verdict_cache_dir = "none";
  o.keep_alive_timer = false;
  return runtime::Runtime::create(std::move(o)).value();
}

runtime::LoadOptions one_thread() {
  runtime::LoadOptions lo;
  lo.factory.intra_op_threads = 1;
  return lo;
}

struct Outcome {
  Result<std::vector<NamedTensor>> outputs = Internal("not run");
  BatchTiming timing;
};

TEST(DynamicBatcher, ConcurrentRequestsBatchAndGetTheirOwnRows) {
  REQUIRE_MODEL(kMlp);
  auto rt = make_runtime();
  auto h = rt->load(kMlp.string(), one_thread()).value();
  ASSERT_TRUE(h.model().metadata().batchable);
  // 48 requests of 1, 2 or 3 rows: 96 rows. A batch of 96 rows starts when all of them are queued, and
  // the delay never runs out first: which requests share a batch depends on no timing.
  constexpr int kRequests = 48;
  constexpr int64_t kRows = 96;
  BatchingConfig cfg;
  cfg.max_batch_size = kRows;
  cfg.max_queue_delay = std::chrono::hours(1);
  DynamicBatcher batcher("mlp", h.model(), cfg);

  std::vector<std::promise<Outcome>> done(kRequests);
  std::vector<Tensor> inputs;
  for (int i = 0; i < kRequests; ++i) inputs.push_back(random_f32(Shape({1 + i % 3, 64}), 100 + i));
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i) {
    clients.emplace_back([&, i] {
      DynamicBatcher::Item item;
      item.inputs = {{h.model().metadata().inputs[0].name, inputs[i]}};
      item.handle = rt->get("mlp_64_128_10").value();
      item.done = [&, i](Result<std::vector<NamedTensor>> out, const BatchTiming& t, ModelHandle) {
        done[i].set_value(Outcome{std::move(out), t});
      };
      ASSERT_TRUE(batcher.submit(std::move(item)).ok());
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < kRequests; ++i) {
    auto fut = done[i].get_future();
    ASSERT_EQ(fut.wait_for(std::chrono::seconds(60)), std::future_status::ready);
    Outcome o = fut.get();
    ASSERT_TRUE(o.outputs.ok()) << o.outputs.status().message();
    EXPECT_EQ(o.timing.batch_requests, static_cast<size_t>(kRequests)) << "all 48 run as one batch";
    EXPECT_EQ(o.timing.batch_rows, kRows);
    // The same request alone gives the same numbers (rows never influence each other).
    std::vector<NamedTensor> alone_in = {{h.model().metadata().inputs[0].name, inputs[i]}};
    auto alone = h.model().infer_one(alone_in).value();
    ASSERT_EQ(alone.size(), o.outputs->size());
    const Tensor& a = alone[0].tensor;
    const Tensor& b = (*o.outputs)[0].tensor;
    ASSERT_EQ(a.shape(), b.shape()) << "request " << i;
    auto av = a.values<float>();
    auto bv = b.values<float>();
    for (size_t k = 0; k < av.size(); ++k)
      EXPECT_NEAR(av[k], bv[k], 1e-5f * (1 + std::abs(av[k]))) << i << "/" << k;
  }
}

TEST(DynamicBatcher, AnEmptyRequestFailsAloneNotItsBatch) {
  REQUIRE_MODEL(kMlp);
  auto rt = make_runtime();
  auto h = rt->load(kMlp.string(), one_thread()).value();
  BatchingConfig cfg;
  cfg.max_batch_size = 4;  // rows 1 + 1 (an empty request counts one) + 2: the third starts the batch
  cfg.max_queue_delay = std::chrono::hours(1);  // only a full batch starts
  DynamicBatcher batcher("mlp", h.model(), cfg);
  const std::string name = h.model().metadata().inputs[0].name;
  const std::vector<Tensor> inputs = {random_f32(Shape({1, 64}), 1),
                                      Tensor::allocate(DType::kFloat32, Shape({0, 64})).value(),
                                      random_f32(Shape({2, 64}), 2)};
  std::vector<std::promise<Outcome>> done(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    DynamicBatcher::Item item;
    item.inputs = {{name, inputs[i]}};
    item.handle = rt->get("mlp_64_128_10").value();
    item.done = [&, i](Result<std::vector<NamedTensor>> out, const BatchTiming& t, ModelHandle) {
      done[i].set_value(Outcome{std::move(out), t});
    };
    ASSERT_TRUE(batcher.submit(std::move(item)).ok());
  }
  std::vector<Outcome> outcomes;
  for (auto& d : done) {
    auto fut = d.get_future();
    ASSERT_EQ(fut.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    outcomes.push_back(fut.get());
    EXPECT_EQ(outcomes.back().timing.batch_requests, 3u) << "the three were batched together";
  }
  ASSERT_FALSE(outcomes[1].outputs.ok());
  EXPECT_EQ(outcomes[1].outputs.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(outcomes[1].outputs.status().message().find("dimension 0 is 0"), std::string::npos)
      << outcomes[1].outputs.status().message();
  for (size_t i : {size_t{0}, size_t{2}}) {
    ASSERT_TRUE(outcomes[i].outputs.ok()) << outcomes[i].outputs.status().message();
    std::vector<NamedTensor> alone_in = {{name, inputs[i]}};
    auto alone = h.model().infer_one(alone_in).value();
    const Tensor& a = alone[0].tensor;
    const Tensor& b = (*outcomes[i].outputs)[0].tensor;
    ASSERT_EQ(a.shape(), b.shape());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.byte_size())) << "request " << i;
  }
}

TEST(DynamicBatcher, WhatIsQueuedWhenItStopsIsAnsweredNeverLost) {
  REQUIRE_MODEL(kMlp);
  auto rt = make_runtime();
  auto h = rt->load(kMlp.string(), one_thread()).value();
  BatchingConfig cfg;
  cfg.max_batch_size = 64;
  cfg.max_queue_delay = std::chrono::hours(1);  // nothing leaves the queue during the test
  auto batcher = std::make_unique<DynamicBatcher>("mlp", h.model(), cfg);
  std::atomic<int> unavailable{0};
  std::atomic<int> handles_back{0};
  auto item = [&] {
    DynamicBatcher::Item it;
    it.inputs = {{h.model().metadata().inputs[0].name, random_f32(Shape({1, 64}), 1)}};
    it.handle = rt->get("mlp_64_128_10").value();
    it.done = [&](Result<std::vector<NamedTensor>> out, const BatchTiming&, ModelHandle back) {
      if (out.status().code() == StatusCode::kUnavailable) ++unavailable;
      if (back) ++handles_back;
    };
    return it;
  };
  ASSERT_TRUE(batcher->submit(item()).ok());
  ASSERT_TRUE(batcher->submit(item()).ok());
  EXPECT_EQ(batcher->depth(), 2u);
  batcher.reset();  // the two queued ones are answered (with Unavailable), never lost
  EXPECT_EQ(unavailable.load(), 2);
  EXPECT_EQ(handles_back.load(), 2) << "each answer gets its handle back, to drop where it likes";
}

TEST(DynamicBatcher, ItsLineIsInFairOrderInteractiveFirst) {
  REQUIRE_MODEL(kMlp);
  auto rt = make_runtime();
  auto h = rt->load(kMlp.string(), one_thread()).value();
  BatchingConfig cfg;
  cfg.max_batch_size = 64;
  cfg.max_queue_delay = std::chrono::hours(1);  // nothing leaves the queue during the test
  auto batcher = std::make_unique<DynamicBatcher>("mlp", h.model(), cfg);
  std::vector<std::string> order;  // answered in queue order when the batcher stops
  auto item = [&](std::string name, int priority) {
    DynamicBatcher::Item it;
    it.inputs = {{h.model().metadata().inputs[0].name, random_f32(Shape({1, 64}), 1)}};
    it.handle = rt->get("mlp_64_128_10").value();
    it.schedule = backend::Schedule{priority, name, 1};
    it.done = [&order, name](Result<std::vector<NamedTensor>>, const BatchTiming&, ModelHandle) {
      order.push_back(name);
    };
    return it;
  };
  ASSERT_TRUE(batcher->submit(item("nightly", 1)).ok());
  ASSERT_TRUE(batcher->submit(item("chat", 0)).ok());
  batcher.reset();
  EXPECT_EQ(order, (std::vector<std::string>{"chat", "nightly"}))
      << "an interactive request goes before a batch one";
}

}  // namespace
}  // namespace gantry::runtime

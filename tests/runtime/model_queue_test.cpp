// ModelQueue (gantry/runtime/model_queue.h), the one way into a loaded model: capacity plus max_queue
// tickets, given back however a request ends (a throw between admission and the answer leaks nothing);
// generations hold theirs until they end; batched tensor requests share the same bound; and BatchRule,
// the batching rule, checked on explicit times.
#include "gantry/runtime/model_queue.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace gantry::runtime {
namespace {

using namespace std::chrono_literals;

// Answers each request with its own input; infer_batch waits until open() (a batch that holds its
// thread as long as the test likes); start_generation refuses, or finishes at once, as told.
class GatedModel final : public backend::Model {
 public:
  explicit GatedModel(bool batchable, int instances = 1) {
    meta_.name = "gated";
    meta_.backend = "fake";
    meta_.batchable = batchable;
    meta_.instances = instances;
  }
  const backend::ModelMetadata& metadata() const override { return meta_; }
  Status init() override { return Status::Ok(); }
  Result<std::vector<NamedTensor>> infer_one(std::span<const NamedTensor> inputs) override {
    wait_open();
    return std::vector<NamedTensor>(inputs.begin(), inputs.end());
  }
  Result<std::vector<std::vector<NamedTensor>>> infer_batch(
      std::span<const std::vector<NamedTensor>> requests) override {
    {
      std::lock_guard lock(mu_);
      ++batches_;
      largest_ = std::max(largest_, requests.size());
    }
    cv_.notify_all();
    wait_open();
    return std::vector<std::vector<NamedTensor>>(requests.begin(), requests.end());
  }
  Result<std::unique_ptr<backend::Generation>> start_generation(backend::GenerationRequest request) override {
    if (refuse_generation) return InvalidArgument("this fake refuses every generation");
    if (request.on_done) request.on_done();
    return std::unique_ptr<backend::Generation>();
  }
  void open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void wait_for_batches(int n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return batches_ >= n; });
  }
  size_t largest_batch() {
    std::lock_guard lock(mu_);
    return largest_;
  }
  bool refuse_generation = false;

 private:
  void wait_open() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }
  backend::ModelMetadata meta_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int batches_ = 0;
  size_t largest_ = 0;
};

QueueOptions queue_options(size_t max_queue, int64_t batch_rows = 32) {
  QueueOptions o;
  o.max_queue = max_queue;
  o.batching.max_batch_size = batch_rows;
  o.batching.max_queue_delay = std::chrono::hours(1);  // only a full batch starts
  return o;
}

std::vector<NamedTensor> one_row(float v) {
  return {{"x", Tensor::from_values<float>(DType::kFloat32, Shape({1, 1}), {v}).value()}};
}

TEST(ModelQueue, TakesCapacityPlusQueueAndRefusesTheNext) {
  GatedModel model(false);
  ModelQueue q("m", model, queue_options(2));
  EXPECT_EQ(q.capacity(), 1u) << "an unbatched tensor model runs one request per instance";
  std::vector<ModelQueue::Ticket> held;
  for (int i = 0; i < 3; ++i) {
    auto t = q.admit();
    ASSERT_TRUE(t.ok()) << i;
    held.push_back(std::move(*t));
  }
  EXPECT_TRUE(q.full());
  auto refused = q.admit();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("model 'm' is at capacity (1 running at once, 2 waiting"),
            std::string::npos)
      << refused.status().message();
  GatedModel other_model(false);
  ModelQueue other("other", other_model, queue_options(2));
  EXPECT_TRUE(other.admit().ok()) << "each model has its own places";
  EXPECT_EQ(q.outstanding(), 3u);
  held.pop_back();
  EXPECT_TRUE(q.admit().ok()) << "a dropped ticket gives its place back";
}

TEST(ModelQueue, AnExceptionAfterAdmissionGivesThePlaceBack) {
  GatedModel model(false);
  ModelQueue q("m", model, queue_options(0));
  for (int i = 0; i < 100; ++i) {
    try {
      auto t = q.admit();
      ASSERT_TRUE(t.ok()) << "round " << i << ": a place leaked";
      throw std::runtime_error("the codec threw");
    } catch (const std::runtime_error&) {
    }
  }
  EXPECT_EQ(q.outstanding(), 0u);
}

TEST(ModelQueue, TicketsMoveReleaseOnceAndMayOutliveTheQueue) {
  GatedModel model(false);
  ModelQueue::Ticket survivor;
  {
    ModelQueue q("m", model, queue_options(0));
    auto t = q.admit();
    ASSERT_TRUE(t.ok());
    ModelQueue::Ticket moved = std::move(*t);
    EXPECT_FALSE(static_cast<bool>(*t));
    EXPECT_TRUE(static_cast<bool>(moved));
    EXPECT_FALSE(q.admit().ok());
    moved.release();
    moved.release();  // idempotent
    EXPECT_EQ(q.outstanding(), 0u);
    auto again = q.admit();
    ASSERT_TRUE(again.ok());
    survivor = std::move(*again);  // the assigned-to ticket held nothing
    EXPECT_EQ(q.outstanding(), 1u);
  }
  survivor.release();  // after its queue is gone: nothing to give back to, nothing touched
  EXPECT_FALSE(static_cast<bool>(survivor));
}

TEST(ModelQueue, AGenerationHoldsItsPlaceUntilItEnds) {
  GatedModel model(false);
  ModelQueue q("m", model, queue_options(0));
  size_t outstanding_in_done = 99;
  backend::GenerationRequest g;
  g.on_done = [&] { outstanding_in_done = q.outstanding(); };
  ASSERT_TRUE(q.generate(std::move(g)).ok());
  EXPECT_EQ(outstanding_in_done, 0u) << "the place goes back before the answer";
  model.refuse_generation = true;
  for (int i = 0; i < 5; ++i) {
    auto refused = q.generate({});
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << "refused by the model, not the queue";
  }
  EXPECT_EQ(q.outstanding(), 0u) << "a generation that cannot start keeps no place";
}

TEST(ModelQueue, BatchedRequestsShareTheOneBoundAndAllComeBack) {
  GatedModel model(true);
  ModelQueue q("m", model, queue_options(2, 2));
  ASSERT_TRUE(q.batched());
  EXPECT_EQ(q.capacity(), 2u) << "two rows run at once on its one instance";
  std::vector<std::promise<Result<std::vector<NamedTensor>>>> answers(5);
  for (int i = 0; i < 5; ++i) {
    q.infer(ModelHandle(), one_row(static_cast<float>(i)), nullptr,
            [&answers, i](Result<std::vector<NamedTensor>> out, const BatchTiming&, ModelHandle) {
              answers[i].set_value(std::move(out));
            });
    if (i == 1) model.wait_for_batches(1);  // the first two run (and wait); the next two queue
  }
  // The fifth was refused at once, on this thread: capacity 2 + 2 waiting.
  auto fifth = answers[4].get_future();
  ASSERT_EQ(fifth.wait_for(0s), std::future_status::ready);
  auto refused = fifth.get();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(q.outstanding(), 4u);
  model.open();
  for (int i = 0; i < 4; ++i) {
    auto out = answers[i].get_future().get();
    ASSERT_TRUE(out.ok()) << i << ": " << out.status().to_string();
    ASSERT_EQ(out->size(), 1u);
    EXPECT_EQ((*out)[0].tensor.values<float>()[0], static_cast<float>(i)) << "each gets its own row back";
  }
  EXPECT_EQ(model.largest_batch(), 2u);
  EXPECT_EQ(q.outstanding(), 0u);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(q.admit().ok()) << "full capacity again after " << i;
}

TEST(BatchRule, AFullBatchStartsAtOnceOtherwiseTheDelayCountsFromTheLaterOfArrivalAndFree) {
  using Clock = BatchRule::Clock;
  BatchRule rule{.start_rows = 4, .max_queue_delay = 1000us};
  const Clock::time_point t0{};
  EXPECT_EQ(rule.start_at(4, t0, t0), Clock::time_point::min());
  EXPECT_EQ(rule.start_at(5, t0 + 10ms, t0 + 20ms), Clock::time_point::min());
  // The batcher was free before the oldest came: its arrival counts.
  EXPECT_EQ(rule.start_at(1, t0 + 5ms, t0 + 2ms), t0 + 5ms + 1000us);
  // It came while the previous batch ran (freed at 9 ms): the delay starts when the thread is free, so
  // the clients that batch answered have the delay to come back and join it.
  EXPECT_EQ(rule.start_at(3, t0 + 5ms, t0 + 9ms), t0 + 9ms + 1000us);
}

}  // namespace
}  // namespace gantry::runtime

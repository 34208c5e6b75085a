#include "gantry/runtime/dynamic_batcher.h"

#include <algorithm>

#include "gantry/core/log.h"

namespace gantry::runtime {
namespace {
using Clock = std::chrono::steady_clock;

int64_t leading_rows(const std::vector<NamedTensor>& inputs) {
  if (inputs.empty() || inputs[0].tensor.shape().rank() == 0) return 1;
  return std::max<int64_t>(1, inputs[0].tensor.shape()[0]);
}
}  // namespace

DynamicBatcher::DynamicBatcher(std::string model_name, backend::Model& model, BatchingConfig config)
    : name_(std::move(model_name)), model_(model), config_(std::move(config)) {
  max_rows_ = std::max<int64_t>(1, config_.max_batch_size);
  if (model_.metadata().max_batch > 0) max_rows_ = std::min(max_rows_, model_.metadata().max_batch);
  start_rows_ = max_rows_;
  if (!config_.preferred_batch_sizes.empty()) {
    start_rows_ = std::min(max_rows_, *std::max_element(config_.preferred_batch_sizes.begin(),
                                                        config_.preferred_batch_sizes.end()));
  }
  const int threads = std::max(1, model_.metadata().instances);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
}

DynamicBatcher::~DynamicBatcher() {
  std::deque<Queued> left;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    left.swap(queue_);
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  for (auto& q : left) {
    q.item.done(Unavailable("model '" + name_ + "': the server is shutting down"), BatchTiming{});
  }
}

Status DynamicBatcher::submit(Item item) {
  Queued q{std::move(item), Clock::now(), 0};
  q.rows = leading_rows(q.item.inputs);
  {
    std::lock_guard lock(mu_);
    if (stop_) return Unavailable("model '" + name_ + "': the server is shutting down");
    if (queue_.size() >= config_.max_queue) {
      return ResourceExhausted("model '" + name_ + "': " + std::to_string(queue_.size()) +
                               " requests are already waiting (--max-queue " +
                               std::to_string(config_.max_queue) + "); retry later");
    }
    queue_.push_back(std::move(q));
  }
  cv_.notify_one();
  return Status();
}

size_t DynamicBatcher::depth() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

// Same dtypes and the same shape after the batch dimension, input by input.
bool DynamicBatcher::compatible(const Queued& a, const Queued& b) const {
  const auto& x = a.item.inputs;
  const auto& y = b.item.inputs;
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    const auto& sx = x[i].tensor.shape();
    const auto& sy = y[i].tensor.shape();
    if (x[i].name != y[i].name || x[i].tensor.dtype() != y[i].tensor.dtype() || sx.rank() != sy.rank())
      return false;
    for (size_t d = 1; d < sx.rank(); ++d) {
      if (sx[d] != sy[d]) return false;
    }
  }
  return true;
}

void DynamicBatcher::loop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    // Gather rows compatible with the oldest request; wait for more until full or its delay is up. Another
    // batch thread (one per instance) may take the queue meanwhile: look at the front afresh each time.
    bool ready = false;
    while (!stop_ && !queue_.empty()) {
      const auto deadline = queue_.front().at + config_.max_queue_delay;
      int64_t rows = 0;
      for (const auto& q : queue_) {
        if (compatible(queue_.front(), q)) rows += q.rows;
        if (rows >= start_rows_) break;
      }
      if (rows >= start_rows_ || Clock::now() >= deadline) {
        ready = true;
        break;
      }
      cv_.wait_until(lock, deadline);
    }
    if (stop_) return;
    if (!ready) continue;  // another thread took what was queued
    std::vector<Queued> batch;
    int64_t rows = 0;
    for (auto it = queue_.begin(); it != queue_.end();) {
      const bool first = batch.empty();
      if (first || (compatible(batch.front(), *it) && rows + it->rows <= max_rows_)) {
        rows += it->rows;
        batch.push_back(std::move(*it));
        it = queue_.erase(it);
        if (rows >= max_rows_) break;
      } else {
        ++it;
      }
    }
    if (!queue_.empty()) cv_.notify_one();  // what is left is another batch thread's
    lock.unlock();
    run(std::move(batch));
    lock.lock();
  }
}

void DynamicBatcher::run(std::vector<Queued> batch) {
  const auto start = Clock::now();
  BatchTiming timing;
  timing.batch_requests = batch.size();
  for (const auto& q : batch) timing.batch_rows += q.rows;
  if (batch.size() == 1) {
    auto out = model_.infer_one(batch[0].item.inputs);
    timing.queued = start - batch[0].at;
    batch[0].item.done(std::move(out), timing);
    return;
  }
  std::vector<std::vector<NamedTensor>> requests;
  requests.reserve(batch.size());
  for (auto& q : batch) requests.push_back(std::move(q.item.inputs));
  auto out = model_.infer_batch(requests);
  if (!out.ok() && out.status().code() == StatusCode::kInvalidArgument) {
    // Some request's inputs are at fault (an empty batch, dims that disagree, what Run refuses): run
    // each alone, so only the culprit gets the error and the others their outputs.
    for (size_t i = 0; i < batch.size(); ++i) {
      timing.queued = start - batch[i].at;
      batch[i].item.done(model_.infer_one(requests[i]), timing);
    }
    return;
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    timing.queued = start - batch[i].at;
    if (out.ok()) {
      batch[i].item.done(std::move((*out)[i]), timing);
    } else {
      batch[i].item.done(out.status(), timing);
    }
  }
}

}  // namespace gantry::runtime

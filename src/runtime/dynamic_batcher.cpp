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
  rule_.start_rows = max_rows_;
  rule_.max_queue_delay = config_.max_queue_delay;
  if (!config_.preferred_batch_sizes.empty()) {
    rule_.start_rows = std::min(max_rows_, *std::max_element(config_.preferred_batch_sizes.begin(),
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
  for (auto& q : left)
    finish(q, Unavailable("model '" + name_ + "': the server is shutting down"), BatchTiming{});
}

Status DynamicBatcher::submit(Item item) {
  Queued q{std::move(item), Clock::now(), 0, {}};
  q.rows = leading_rows(q.item.inputs);
  {
    std::lock_guard lock(mu_);
    if (stop_) return Unavailable("model '" + name_ + "': the server is shutting down");
    q.key = fair_.key_for(q.item.schedule);
    const size_t at = fair_.place(q.key, queue_.size(),
                                  [this](size_t i) -> backend::FairQueue::Key& { return queue_[i].key; });
    queue_.insert(queue_.begin() + static_cast<std::ptrdiff_t>(at), std::move(q));
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

void DynamicBatcher::finish(Queued& q, Result<std::vector<NamedTensor>> out, const BatchTiming& timing) {
  if (!q.item.done) return;  // answered already
  Done done = std::move(q.item.done);
  q.item.done = nullptr;
  q.item.keep_alive.reset();  // the request's ticket: its place goes back before the answer is sent
  try {
    done(std::move(out), timing, std::move(q.item.handle));
  } catch (const std::exception& e) {
    GANTRY_LOG_ERROR("model '{}': a batched request's answer threw: {}", name_, e.what());
  } catch (...) {
    GANTRY_LOG_ERROR("model '{}': a batched request's answer threw", name_);
  }
}

void DynamicBatcher::loop() {
  std::unique_lock lock(mu_);
  Clock::time_point free_since = Clock::now();  // when this thread last finished a batch
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    // Gather rows compatible with the oldest request; wait for more until full or its delay is up. Another
    // batch thread (one per instance) may take the queue meanwhile: look at the front afresh each time.
    bool ready = false;
    while (!stop_ && !queue_.empty()) {
      int64_t rows = 0;
      for (const auto& q : queue_) {
        if (compatible(queue_.front(), q)) rows += q.rows;
        if (rows >= rule_.start_rows) break;
      }
      // The oldest arrival, wherever the fair order put it: no request waits past its delay.
      auto oldest = queue_.front().at;
      for (const auto& q : queue_) oldest = std::min(oldest, q.at);
      const auto deadline = rule_.start_at(rows, oldest, free_since);
      if (Clock::now() >= deadline) {
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
        fair_.started(it->key);
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
    free_since = Clock::now();
    lock.lock();
  }
}

void DynamicBatcher::run(std::vector<Queued> batch) {
  // Nothing the model throws leaves the batch thread: every request not answered yet gets the error.
  std::string what;
  try {
    run_batch(batch);
    return;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception of unknown type";
  }
  GANTRY_LOG_ERROR("model '{}': a batch of {} threw: {}", name_, batch.size(), what);
  for (auto& q : batch) finish(q, Internal("model '" + name_ + "' failed the batch: " + what), BatchTiming{});
}

void DynamicBatcher::run_batch(std::vector<Queued>& batch) {
  const auto start = Clock::now();
  BatchTiming timing;
  timing.batch_requests = batch.size();
  for (const auto& q : batch) timing.batch_rows += q.rows;
  if (batch.size() == 1) {
    auto out = model_.infer_one(batch[0].item.inputs);
    timing.queued = start - batch[0].at;
    finish(batch[0], std::move(out), timing);
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
      finish(batch[i], model_.infer_one(requests[i]), timing);
    }
    return;
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    timing.queued = start - batch[i].at;
    if (out.ok()) {
      finish(batch[i], std::move((*out)[i]), timing);
    } else {
      finish(batch[i], out.status(), timing);
    }
  }
}

}  // namespace gantry::runtime

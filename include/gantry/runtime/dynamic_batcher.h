// DynamicBatcher: Triton-style dynamic batching for one model whose inputs and outputs all have a
// dynamic leading (batch) dimension. Requests its ModelQueue admitted wait here; one thread takes the
// oldest request plus every queued request with the same per-row shapes, up to max_batch_size rows, runs
// them as ONE Model::infer_batch (concatenate, run, split) and hands each its own rows. When a batch
// starts is BatchRule's to say. Results equal unbatched ones: rows never influence each other. When the
// batch fails with InvalidArgument (some request's inputs are at fault), each request runs alone, so a
// bad request cannot fail the good ones it was batched with. A model with several instances
// (ModelMetadata::instances) gets that many batch threads, so that many batches run at once, each on the
// least busy instance. The queue is bounded by the ModelQueue's admission, not here.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gantry/backend/fair_queue.h"
#include "gantry/backend/model.h"
#include "gantry/core/status.h"
#include "gantry/runtime/model_manager.h"
#include "gantry/runtime/queue_options.h"

namespace gantry::runtime {

// When a batch starts: at once when it holds start_rows rows (max_batch_size, or the largest preferred
// size); otherwise once max_queue_delay has passed since the later of its oldest request's arrival and
// the moment its batch thread was last free. Counting from arrival alone (Triton's rule) starts a batch
// the moment the previous one ends whenever requests came while it ran: closed-loop clients answered by
// that batch come back just after it left, miss the next one and keep the batches half full; counting
// from the moment the thread is free again gives them the delay to join it.
struct BatchRule {
  int64_t start_rows = 32;
  std::chrono::microseconds max_queue_delay{1000};
  using Clock = std::chrono::steady_clock;
  // Clock::time_point::min() when a batch of `rows` rows starts at once.
  Clock::time_point start_at(int64_t rows, Clock::time_point oldest_arrival,
                             Clock::time_point free_since) const {
    if (rows >= start_rows) return Clock::time_point::min();
    return std::max(oldest_arrival, free_since) + max_queue_delay;
  }
};

struct BatchTiming {
  std::chrono::steady_clock::duration queued{};  // submit -> batch start
  size_t batch_requests = 0;                     // requests in the batch this one ran in
  int64_t batch_rows = 0;
};

class DynamicBatcher {
 public:
  // Called once, on the batcher's thread: keep it short. It gets the item's handle back, to drop on
  // another thread: the last handle of a failed model destroys the model, and its batcher with it.
  using Done = std::function<void(Result<std::vector<NamedTensor>> outputs, const BatchTiming& timing,
                                  ModelHandle handle)>;
  struct Item {
    std::vector<NamedTensor> inputs;  // validated against the model; batch dim first
    Done done;
    ModelHandle handle;                      // keeps the model loaded while the request waits
    std::shared_ptr<const void> keep_alive;  // whatever the inputs borrow from (a request body), its ticket
    // Its place in the line (backend::FairQueue: class, then weighted fair shares by tenant); the
    // default: one flow, first come first served.
    backend::Schedule schedule;
  };

  DynamicBatcher(std::string model_name, backend::Model& model, BatchingConfig config);
  ~DynamicBatcher();  // fails queued requests with Unavailable and joins the thread
  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  // Unavailable once the batcher is stopping (nothing was queued; `item.done` is not called).
  Status submit(Item item);
  size_t depth() const;
  const backend::Model* model() const { return &model_; }
  const BatchingConfig& config() const { return config_; }

 private:
  struct Queued {
    Item item;
    std::chrono::steady_clock::time_point at;
    int64_t rows = 0;
    backend::FairQueue::Key key;
  };
  void loop();
  void finish(Queued& q, Result<std::vector<NamedTensor>> out, const BatchTiming& timing);
  bool compatible(const Queued& a, const Queued& b) const;
  void run(std::vector<Queued> batch);
  void run_batch(std::vector<Queued>& batch);

  std::string name_;
  backend::Model& model_;
  BatchingConfig config_;
  int64_t max_rows_ = 32;
  BatchRule rule_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;  // in fair_'s order
  backend::FairQueue fair_;   // guarded by mu_
  bool stop_ = false;
  std::vector<std::thread> threads_;  // one per instance of the model
};

}  // namespace gantry::runtime

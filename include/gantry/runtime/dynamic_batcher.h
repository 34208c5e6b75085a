// DynamicBatcher: Triton-style dynamic batching for one model whose inputs and outputs all have a
// dynamic leading (batch) dimension. Concurrent requests wait in a bounded queue; one thread takes
// the oldest request plus every queued request with the same per-row shapes, up to max_batch_size
// rows, runs them as ONE Model::infer_batch (concatenate, run, split) and hands each its own rows.
// A batch starts when it is full (or reaches the largest preferred size), or when its oldest request
// has waited max_queue_delay. Results equal unbatched ones: rows never influence each other. When the
// batch fails with InvalidArgument (some request's inputs are at fault), each request runs alone, so a
// bad request cannot fail the good ones it was batched with. A model with several instances
// (ModelMetadata::instances) gets that many batch threads, so that many batches run at once, each on the
// least busy instance.
#pragma once

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

#include "gantry/backend/model.h"
#include "gantry/core/status.h"
#include "gantry/runtime/model_manager.h"

namespace gantry::runtime {

// Triton's knobs (model config `dynamic_batching`); a package's gantry.json may set them.
struct BatchingConfig {
  int64_t max_batch_size = 32;                 // rows per batch (capped by the model's own max_batch)
  std::vector<int64_t> preferred_batch_sizes;  // a batch this large starts without waiting
  std::chrono::microseconds max_queue_delay{1000};
  size_t max_queue = 64;  // requests waiting; beyond it submit() refuses (the server answers 429)
};

struct BatchTiming {
  std::chrono::steady_clock::duration queued{};  // submit -> batch start
  size_t batch_requests = 0;                     // requests in the batch this one ran in
  int64_t batch_rows = 0;
};

class DynamicBatcher {
 public:
  using Done = std::function<void(Result<std::vector<NamedTensor>> outputs, const BatchTiming& timing)>;
  struct Item {
    std::vector<NamedTensor> inputs;         // validated against the model; batch dim first
    Done done;                               // called once, on the batcher's thread: keep it short
    ModelHandle handle;                      // keeps the model loaded while the request waits
    std::shared_ptr<const void> keep_alive;  // whatever the inputs borrow from (a request body)
  };

  DynamicBatcher(std::string model_name, backend::Model& model, BatchingConfig config);
  ~DynamicBatcher();  // fails queued requests with Unavailable and joins the thread
  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  // ResourceExhausted when the queue is full (nothing was queued; `item.done` is not called).
  Status submit(Item item);
  size_t depth() const;
  const backend::Model* model() const { return &model_; }
  const BatchingConfig& config() const { return config_; }

 private:
  struct Queued {
    Item item;
    std::chrono::steady_clock::time_point at;
    int64_t rows = 0;
  };
  void loop();
  bool compatible(const Queued& a, const Queued& b) const;
  void run(std::vector<Queued> batch);

  std::string name_;
  backend::Model& model_;
  BatchingConfig config_;
  int64_t max_rows_ = 32;
  int64_t start_rows_ = 32;  // rows that start a batch without waiting
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;  // one per instance of the model
};

}  // namespace gantry::runtime

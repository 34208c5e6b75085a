// ModelQueue: the one way into a loaded model. Every request on a model — a generation, embeddings, a
// rerank, a tensor inference — enters through its queue, which admits it, batches it where the model
// allows and runs it. Front ends only translate their protocol to these calls and back
// (docs/architecture.md, "The request path").
//
//   runtime::ModelHandle h = ...;                       // keeps the model loaded
//   h.queue().infer(std::move(h), inputs, body, done);  // admitted, batched, answered once
//   auto gen = h.queue().generate(std::move(request));  // admitted; the place goes back when it ends
//
// - Capacity: a model runs capacity() requests at once — a text model's parallel sequences, a batched
//   tensor model's batch rows on each of its instances, otherwise its instances — and lets max_queue() more
//   wait. One more is refused at once with ResourceExhausted, whose message says both numbers and which
//   flags set them; every front end answers it 429 with Retry-After kRetryAfterSeconds.
// - An admitted request holds a Ticket (move-only): destroying it gives the place back however the
//   request ends — answered, abandoned, or an exception anywhere on the way.
// - Thread-safe. The ModelManager makes one when it publishes a model (a reload gets a new one) and
//   destroys it before the model; handles share it. A Ticket may outlive the queue.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/backend/generation.h"
#include "gantry/backend/model.h"
#include "gantry/backend/text_model.h"
#include "gantry/core/status.h"
#include "gantry/model/manifest.h"
#include "gantry/runtime/dynamic_batcher.h"

namespace gantry::runtime {

class ModelHandle;

// Seconds a client is told to wait (Retry-After) when a model is at capacity or not ready.
inline constexpr int kRetryAfterSeconds = 1;

class ModelQueue {
 public:
  // The right to run one request on the model.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& o) noexcept = default;
    Ticket& operator=(Ticket&& o) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() { release(); }
    explicit operator bool() const { return held_ != nullptr; }
    void release();  // gives the place back now (idempotent)

   private:
    friend class ModelQueue;
    std::shared_ptr<std::atomic<size_t>> held_;
  };

  // `model` outlives the queue; `options.batching` is the model's own (see batching_for).
  ModelQueue(std::string name, backend::Model& model, QueueOptions options);
  ~ModelQueue();  // fails what waits in its batcher with Unavailable
  ModelQueue(const ModelQueue&) = delete;
  ModelQueue& operator=(const ModelQueue&) = delete;

  const std::string& name() const { return name_; }
  size_t capacity() const { return capacity_; }
  size_t max_queue() const { return options_.max_queue; }
  bool batched() const { return batched_; }
  size_t outstanding() const { return held_->load(std::memory_order_relaxed); }  // tickets held now
  bool full() const { return outstanding() >= capacity_ + options_.max_queue; }  // admit() would refuse

  // A ticket, or ResourceExhausted when capacity() + max_queue() requests hold one already.
  Result<Ticket> admit();

  // Runs validated `inputs` (each with the batch dimension first): admitted, then batched through the
  // model's DynamicBatcher (done on the batcher's thread) or run alone on this thread. Refused — the
  // model at capacity, the queue closing — `done` is called at once, on this thread, with the error.
  // `done` is called exactly once and gets `handle` back: whatever the callback does with it decides
  // where the model's use ends (a batcher thread must not be the one that drops it: post it away).
  // `keep_alive` holds what the inputs borrow (a request body) until then.
  // A request run alone is cancelled midway (Cancelled) when `cancelled` says so (its client went away, the
  // server stops; called from another thread while the run is in flight, until infer returns) or when it
  // runs longer than QueueOptions::max_run_time — where the backend can stop a run (ONNX Runtime's
  // terminate flag; see backend::Model::infer_cancellable). A batched request is not: its batch serves other
  // requests too.
  using InferDone = std::function<void(Result<std::vector<NamedTensor>> outputs, const BatchTiming& timing,
                                       ModelHandle handle)>;
  void infer(ModelHandle handle, std::vector<NamedTensor> inputs, std::shared_ptr<const void> keep_alive,
             InferDone done, const backend::CancelCheck& cancelled = {});

  // Starts a generation (see backend::Model::start_generation): admitted first (ResourceExhausted when
  // full); its place goes back as soon as it ends, before request.on_done runs, or when starting fails.
  Result<std::unique_ptr<backend::Generation>> generate(backend::GenerationRequest request);

  // Embeddings and rerank, admitted and run on this thread (see backend::Model::embed and
  // backend::TextModel::rerank).
  Result<std::vector<std::vector<float>>> embed(std::span<const std::string> texts, bool normalize,
                                                const backend::CancelCheck& cancelled = {});
  Result<backend::RerankResult> rerank(std::string_view query, std::span<const std::string> documents,
                                       const backend::CancelCheck& cancelled = {});

 private:
  std::shared_ptr<DynamicBatcher> batcher();

  std::string name_;
  backend::Model& model_;
  QueueOptions options_;
  bool batched_ = false;
  size_t capacity_ = 1;
  std::shared_ptr<std::atomic<size_t>> held_ = std::make_shared<std::atomic<size_t>>(0);
  std::mutex mu_;                            // guards batcher_
  std::shared_ptr<DynamicBatcher> batcher_;  // made on the first batched request
};

// The batching knobs of a model: `defaults`, with its package manifest's dynamic_batching over them.
BatchingConfig batching_for(const BatchingConfig& defaults, const std::optional<model::DynamicBatching>& own);

}  // namespace gantry::runtime

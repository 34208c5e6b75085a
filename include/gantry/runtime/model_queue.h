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
// - Tenants (runtime::Admission, gantry/runtime/tenant.h): every entry point takes whose the request
//   is. admit() is the one place a tenant's limits are checked (Tenant::admit: its rate windows, its
//   requests at once, its models) and where the waiting line is shared among tenants: once capacity()
//   places are taken, a tenant holds at most its weighted share of the places (capacity() + max_queue(),
//   times its weight over the weights of the tenants holding places and its own), and a batch tenant
//   never takes the last max_queue()/4 places (kept for interactive ones). A refusal writes its
//   Retry-After to Admission::retry_after: when the tenant's window frees enough, else
//   kRetryAfterSeconds.
// - Deadlines: a request whose Admission has a deadline is refused at once (ResourceExhausted,
//   "deadline") when the queue predicts it cannot end in time (QueueForecast: what is ahead of it, its
//   prompt and max_tokens, at the speeds measured on this model so far); a generation still running at
//   its deadline is cancelled at its next token (its KV freed as for any cancel).
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
#include "gantry/runtime/queue_forecast.h"
#include "gantry/runtime/tenant.h"

namespace gantry::runtime {

class ModelHandle;

// Seconds a client is told to wait (Retry-After) when a model is at capacity or not ready.
inline constexpr int kRetryAfterSeconds = 1;

class ModelQueue {
 public:
  // Places taken on the model, in all and by tenant (what admit() shares out).
  struct Places;

  // The right to run one request on the model (and the tenant's hold, when it has one).
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& o) noexcept = default;
    Ticket& operator=(Ticket&& o) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() { release(); }
    explicit operator bool() const { return places_ != nullptr; }
    void release();  // gives the place back now (idempotent)

   private:
    friend class ModelQueue;
    std::shared_ptr<Places> places_;
    std::string tenant_;  // the name its place is counted under ("" without a tenant)
    Tenant::Hold hold_;
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
  size_t outstanding() const;                                                    // tickets held now
  bool full() const { return outstanding() >= capacity_ + options_.max_queue; }  // admit() would refuse
  // Tickets held now by the tenant `name` ("" for requests without one).
  size_t outstanding(std::string_view tenant) const;

  // A ticket, or: ResourceExhausted when capacity() + max_queue() requests hold one already, when the
  // tenant is over a limit or its share, or when its deadline cannot be kept; NotFound for a model
  // the tenant may not use. `max_tokens` (a generation's) is lowered to the tenant's limit; `prompt_tokens`
  // (known or estimated) and it feed the deadline's forecast.
  Result<Ticket> admit(const Admission& who = {}, int* max_tokens = nullptr, int64_t prompt_tokens = 0);

  // What the deadline forecast has measured (QueueForecast).
  QueueForecast::Figures forecast() const { return forecast_->figures(); }

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
             InferDone done, const Admission& who = {}, const backend::CancelCheck& cancelled = {});

  // Starts a generation (see backend::Model::start_generation): admitted first (ResourceExhausted when
  // full); its place goes back as soon as it ends, before request.on_done runs, or when starting fails.
  // Its tokens (prompt + generated) count in the tenant's tokens/min once its result is read (wait()).
  Result<std::unique_ptr<backend::Generation>> generate(backend::GenerationRequest request,
                                                        const Admission& who = {});

  // Embeddings and rerank, admitted and run on this thread (see backend::Model::embed and
  // backend::TextModel::rerank).
  Result<std::vector<std::vector<float>>> embed(std::span<const std::string> texts, bool normalize,
                                                const backend::CancelCheck& cancelled = {},
                                                const Admission& who = {});
  Result<backend::RerankResult> rerank(std::string_view query, std::span<const std::string> documents,
                                       const backend::CancelCheck& cancelled = {}, const Admission& who = {});

 private:
  std::shared_ptr<DynamicBatcher> batcher();

  std::string name_;
  backend::Model& model_;
  QueueOptions options_;
  bool batched_ = false;
  size_t capacity_ = 1;
  std::shared_ptr<Places> places_;
  std::shared_ptr<QueueForecast> forecast_ = std::make_shared<QueueForecast>();
  std::mutex mu_;                            // guards batcher_
  std::shared_ptr<DynamicBatcher> batcher_;  // made on the first batched request
};

// The batching knobs of a model: `defaults`, with its package manifest's dynamic_batching over them.
BatchingConfig batching_for(const BatchingConfig& defaults, const std::optional<model::DynamicBatching>& own);

}  // namespace gantry::runtime

#include "gantry/runtime/model_queue.h"

#include <fmt/format.h>

#include <algorithm>

#include "gantry/runtime/model_manager.h"

namespace gantry::runtime {

ModelQueue::Ticket& ModelQueue::Ticket::operator=(Ticket&& o) noexcept {
  if (this != &o) {
    release();
    held_ = std::move(o.held_);
  }
  return *this;
}

void ModelQueue::Ticket::release() {
  if (!held_) return;
  held_->fetch_sub(1, std::memory_order_acq_rel);
  held_.reset();
}

BatchingConfig batching_for(const BatchingConfig& defaults,
                            const std::optional<model::DynamicBatching>& own) {
  BatchingConfig config = defaults;
  if (!own) return config;
  if (own->max_batch_size) config.max_batch_size = *own->max_batch_size;
  if (!own->preferred_batch_size.empty()) config.preferred_batch_sizes = own->preferred_batch_size;
  if (own->max_queue_delay_microseconds)
    config.max_queue_delay = std::chrono::microseconds(*own->max_queue_delay_microseconds);
  return config;
}

ModelQueue::ModelQueue(std::string name, backend::Model& model, QueueOptions options)
    : name_(std::move(name)), model_(model), options_(std::move(options)) {
  const backend::ModelMetadata& md = model_.metadata();
  const auto instances = static_cast<size_t>(std::max(1, md.instances));
  batched_ = options_.dynamic_batching && md.batchable;
  if (const backend::TextModel* text = model_.text()) {
    capacity_ = static_cast<size_t>(std::max(1, text->text_info().sequences));
  } else if (batched_) {
    int64_t rows = std::max<int64_t>(1, options_.batching.max_batch_size);
    if (md.max_batch > 0) rows = std::min(rows, md.max_batch);
    capacity_ = static_cast<size_t>(rows) * instances;
  } else {
    capacity_ = instances;
  }
}

ModelQueue::~ModelQueue() = default;

Result<ModelQueue::Ticket> ModelQueue::admit() {
  const size_t limit = capacity_ + options_.max_queue;
  size_t held = held_->load(std::memory_order_relaxed);
  do {
    if (held >= limit) {
      return ResourceExhausted(
          fmt::format("model '{}' is at capacity ({} running at once, {} waiting; --parallel / --instances / "
                      "--max-queue); retry later",
                      name_, capacity_, options_.max_queue));
    }
  } while (!held_->compare_exchange_weak(held, held + 1, std::memory_order_acq_rel));
  Ticket t;
  t.held_ = held_;
  return t;
}

std::shared_ptr<DynamicBatcher> ModelQueue::batcher() {
  std::lock_guard lock(mu_);
  if (!batcher_) batcher_ = std::make_shared<DynamicBatcher>(name_, model_, options_.batching);
  return batcher_;
}

namespace {
// What a batched request keeps until its answer: the inputs' storage and its place in the queue.
struct Held {
  std::shared_ptr<const void> keep_alive;
  ModelQueue::Ticket ticket;
};
}  // namespace

void ModelQueue::infer(ModelHandle handle, std::vector<NamedTensor> inputs,
                       std::shared_ptr<const void> keep_alive, InferDone done,
                       const backend::CancelCheck& cancelled) {
  auto ticket = admit();
  if (!ticket.ok()) return done(ticket.status(), BatchTiming{}, std::move(handle));
  if (!batched_) {
    // Runs at once (it waited only for its admission), stopped by the caller's check or the deadline.
    backend::CancelCheck check = cancelled;
    if (options_.max_run_time.count() > 0) {
      const auto deadline = std::chrono::steady_clock::now() + options_.max_run_time;
      check = [&cancelled, deadline] {
        return (cancelled && cancelled()) || std::chrono::steady_clock::now() >= deadline;
      };
    }
    auto out = check ? model_.infer_cancellable(inputs, check) : model_.infer_one(inputs);
    ticket->release();
    return done(std::move(out), BatchTiming{}, std::move(handle));
  }
  auto shared_done = std::make_shared<InferDone>(std::move(done));
  DynamicBatcher::Item item;
  item.inputs = std::move(inputs);  // tensors share their bytes
  item.handle = std::move(handle);
  item.keep_alive = std::make_shared<Held>(Held{std::move(keep_alive), std::move(*ticket)});
  item.done = [shared_done](Result<std::vector<NamedTensor>> out, const BatchTiming& timing, ModelHandle h) {
    (*shared_done)(std::move(out), timing, std::move(h));
  };
  // Refused only while the batcher stops: nothing was queued, the item (its handle and ticket) is gone
  // and its done never runs.
  Status st = batcher()->submit(std::move(item));
  if (!st.ok()) (*shared_done)(st, BatchTiming{}, ModelHandle());
}

Result<std::unique_ptr<backend::Generation>> ModelQueue::generate(backend::GenerationRequest request) {
  GANTRY_ASSIGN_OR_RETURN(Ticket ticket, admit());
  auto place = std::make_shared<Ticket>(std::move(ticket));
  request.on_done = [place, done = std::move(request.on_done)]() mutable {
    place->release();  // before the answer: the next request may start as this one is answered
    if (done) done();
  };
  return model_.start_generation(std::move(request));  // refused: the request, and its place, are gone
}

Result<std::vector<std::vector<float>>> ModelQueue::embed(std::span<const std::string> texts, bool normalize,
                                                          const backend::CancelCheck& cancelled) {
  GANTRY_ASSIGN_OR_RETURN(Ticket ticket, admit());
  return model_.embed(texts, normalize, cancelled);
}

Result<backend::RerankResult> ModelQueue::rerank(std::string_view query,
                                                 std::span<const std::string> documents,
                                                 const backend::CancelCheck& cancelled) {
  backend::TextModel* text = model_.text();
  if (text == nullptr) return Unsupported("model '" + name_ + "' is not a text model: it ranks no documents");
  GANTRY_ASSIGN_OR_RETURN(Ticket ticket, admit());
  return text->rerank(query, documents, cancelled);
}

}  // namespace gantry::runtime

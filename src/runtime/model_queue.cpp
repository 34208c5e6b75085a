#include "gantry/runtime/model_queue.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "gantry/runtime/model_manager.h"

namespace gantry::runtime {

namespace {
// A request is refused for its deadline only when even kForecastSlack of its forecast does not fit: the
// forecast is an average, and on a loaded CPU one request's time varies around it (0.46 to 0.87 of the
// forecast in bench/serve_goodput.sh's deadline phase). One admitted that then runs late is cancelled at
// its deadline, as any other; a refusal it did not need cannot be undone.
constexpr double kForecastSlack = 0.75;
}  // namespace

struct ModelQueue::Places {
  struct Share {
    size_t held = 0;
    double weight = 1;
    Priority priority = Priority::kInteractive;
  };
  mutable std::mutex mu;
  size_t held = 0;
  std::map<std::string, Share, std::less<>> by_tenant;  // only tenants holding a place

  void release(const std::string& tenant) {
    std::lock_guard lock(mu);
    if (held > 0) --held;
    auto it = by_tenant.find(tenant);
    if (it != by_tenant.end() && --it->second.held == 0) by_tenant.erase(it);
  }
};

ModelQueue::Ticket& ModelQueue::Ticket::operator=(Ticket&& o) noexcept {
  if (this != &o) {
    release();
    places_ = std::move(o.places_);
    tenant_ = std::move(o.tenant_);
    hold_ = std::move(o.hold_);
  }
  return *this;
}

void ModelQueue::Ticket::release() {
  if (places_) places_->release(tenant_);
  places_.reset();
  hold_.release();
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
    : name_(std::move(name)),
      model_(model),
      options_(std::move(options)),
      places_(std::make_shared<Places>()) {
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

size_t ModelQueue::outstanding() const {
  std::lock_guard lock(places_->mu);
  return places_->held;
}

size_t ModelQueue::outstanding(std::string_view tenant) const {
  std::lock_guard lock(places_->mu);
  auto it = places_->by_tenant.find(tenant);
  return it == places_->by_tenant.end() ? 0 : it->second.held;
}

Result<ModelQueue::Ticket> ModelQueue::admit(const Admission& who, int* max_tokens, int64_t prompt_tokens) {
  auto set_retry = [&who](int s) {
    if (who.retry_after) *who.retry_after = s;
  };
  Ticket t;
  Priority priority = Priority::kInteractive;
  double weight = 1;
  if (who.tenant) {
    int retry = kRetryAfterSeconds;
    auto hold = who.tenant->admit(name_, max_tokens, &retry);
    if (!hold.ok()) {
      set_retry(retry);
      return hold.status();
    }
    t.hold_ = std::move(*hold);
    t.tenant_ = who.tenant->name();
    const TenantLimits l = who.tenant->limits();
    priority = l.priority;
    weight = l.weight > 0 ? l.weight : 1;
  }
  const size_t limit = capacity_ + options_.max_queue;
  std::unique_lock lock(places_->mu);
  const size_t held = places_->held;
  auto refuse = [&](std::string why) -> Status {
    set_retry(kRetryAfterSeconds);
    t.hold_.refund();
    if (who.tenant) who.tenant->note_refused_queue();
    return ResourceExhausted(std::move(why));
  };
  if (held >= limit) {
    return refuse(
        fmt::format("model '{}' is at capacity ({} running at once, {} waiting; --parallel / --instances / "
                    "--max-queue); retry later",
                    name_, capacity_, options_.max_queue));
  }
  if (held >= capacity_) {  // it would wait: the waiting line is shared
    const size_t reserve = options_.max_queue >= 2 ? std::max<size_t>(1, options_.max_queue / 4) : 0;
    if (priority == Priority::kBatch && held + reserve >= limit) {
      return refuse(
          fmt::format("model '{}' keeps its last {} waiting places for interactive requests (this is a "
                      "batch tenant's); retry later",
                      name_, reserve));
    }
    double weights = weight;
    size_t mine = 0;
    for (const auto& [name, share] : places_->by_tenant) {
      if (name == t.tenant_)
        mine = share.held;
      else
        weights += share.weight;
    }
    const auto share =
        std::max<size_t>(1, static_cast<size_t>(std::floor(static_cast<double>(limit) * weight / weights)));
    if (mine >= share) {
      return refuse(
          fmt::format("model '{}' is busy and this tenant holds {} of its {} places, its share; retry "
                      "later",
                      name_, mine, limit));
    }
  }
  if (who.deadline) {
    const auto now = who.tenant ? who.tenant->now() : std::chrono::steady_clock::now();
    const int tokens = max_tokens && *max_tokens > 0 ? *max_tokens : 1;
    // Who waits ahead of it: the schedulers take a freed place for a higher class first, so a batch
    // tenant's waiting requests are not ahead of an interactive one. At most the places held by its
    // class and the classes above (running ones among them: an upper bound), never more than wait.
    size_t ahead_held = held;
    if (held >= capacity_) {
      size_t same_or_higher = 0;
      for (const auto& [name, share] : places_->by_tenant)
        if (share.priority <= priority) same_or_higher += share.held;
      ahead_held = capacity_ + std::min(held - capacity_, same_or_higher);
    }
    if (auto ms = forecast_->predict_ms(ahead_held, capacity_, prompt_tokens, tokens,
                                        priority == Priority::kBatch ? 1 : 0)) {
      const double left_ms = std::chrono::duration<double, std::milli>(*who.deadline - now).count();
      if (*ms * kForecastSlack > left_ms) {
        // Back when what waits ahead of it now has been served (a request's time per round of places).
        const double over_s = (*ms - std::max(0.0, left_ms)) / 1000.0;
        set_retry(std::max(1, static_cast<int>(std::ceil(over_s))));
        t.hold_.refund();
        if (who.tenant) who.tenant->note_refused_deadline();
        return ResourceExhausted(
            fmt::format("model '{}' cannot finish this request within its deadline ({:.0f} ms "
                        "left, {:.0f} ms predicted from what this model measured); retry later "
                        "or allow more time",
                        name_, std::max(0.0, left_ms), *ms));
      }
    }
  }
  ++places_->held;
  auto& share = places_->by_tenant[t.tenant_];
  ++share.held;
  share.weight = weight;
  share.priority = priority;
  t.places_ = places_;
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
                       std::shared_ptr<const void> keep_alive, InferDone done, const Admission& who,
                       const backend::CancelCheck& cancelled) {
  auto ticket = admit(who);
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
  if (who.tenant) {
    const TenantLimits l = who.tenant->limits();
    item.schedule = backend::Schedule{l.priority == Priority::kBatch ? 1 : 0, who.tenant->name(), l.weight};
  }
  item.keep_alive = std::make_shared<Held>(Held{std::move(keep_alive), std::move(*ticket)});
  item.done = [shared_done](Result<std::vector<NamedTensor>> out, const BatchTiming& timing, ModelHandle h) {
    (*shared_done)(std::move(out), timing, std::move(h));
  };
  // Refused only while the batcher stops: nothing was queued, the item (its handle and ticket) is gone
  // and its done never runs.
  Status st = batcher()->submit(std::move(item));
  if (!st.ok()) (*shared_done)(st, BatchTiming{}, ModelHandle());
}

namespace {
using Clock = std::chrono::steady_clock;

// What a generation admitted here shares with its callbacks: its tenant (tokens counted once), the
// forecast it feeds, and its deadline.
struct Watch {
  std::shared_ptr<Tenant> tenant;
  std::shared_ptr<QueueForecast> forecast;
  bool waited = false;     // admitted with every running place taken
  int priority_class = 0;  // backend::Schedule::priority: the forecast keeps each class's figures
  std::optional<Clock::time_point> deadline;
  std::atomic<bool> past_deadline{false};
  std::atomic<bool> counted{false};

  // False once the deadline has passed (the generation stops at this token).
  bool in_time() {
    if (!deadline || Clock::now() < *deadline) return true;
    if (!past_deadline.exchange(true) && tenant) tenant->note_cancelled_deadline();
    return false;
  }
  void count(const backend::GenerationResult& r) {
    if (counted.exchange(true)) return;
    const int generated = backend::completion_tokens(r);
    if (tenant) tenant->add_tokens(static_cast<uint64_t>(std::max(0, r.n_prompt_tokens + generated)));
    if (r.finish != backend::FinishReason::kCancelled)
      forecast->observe(r.n_prompt_tokens, r.prompt_ms, generated, r.generation_ms, waited, priority_class);
  }
};

// The backend's generation, whose result (once read) is counted for the tenant and the forecast.
class WatchedGeneration final : public backend::Generation {
 public:
  WatchedGeneration(std::unique_ptr<backend::Generation> inner, std::shared_ptr<Watch> watch)
      : inner_(std::move(inner)), watch_(std::move(watch)) {}
  uint64_t id() const override { return inner_->id(); }
  void cancel() override { inner_->cancel(); }
  bool done() const override { return inner_->done(); }
  Result<backend::GenerationResult> wait() override {
    auto r = inner_->wait();
    // Cancelled by the front end's deadline timer before a token came (waiting, or its prompt): also
    // a deadline's end.
    if (r.ok() && r->finish == backend::FinishReason::kCancelled && watch_->deadline &&
        Clock::now() >= *watch_->deadline)
      (void)watch_->in_time();
    if (r.ok()) watch_->count(*r);
    if (r.ok() && watch_->past_deadline.load()) {
      return Unavailable("the request ran past its deadline and was cancelled after " +
                         std::to_string(backend::completion_tokens(*r)) + " tokens");
    }
    return r;
  }

 private:
  std::unique_ptr<backend::Generation> inner_;
  std::shared_ptr<Watch> watch_;
};
}  // namespace

Result<std::unique_ptr<backend::Generation>> ModelQueue::generate(backend::GenerationRequest request,
                                                                  const Admission& who) {
  int64_t prompt_tokens = static_cast<int64_t>(request.tokens.size());
  if (who.deadline && request.tokens.empty()) {
    auto n = model_.token_count(request.prompt);
    prompt_tokens = n.ok() ? *n : static_cast<int64_t>(request.prompt.size() / 4);
  }
  const size_t held_before = outstanding();
  GANTRY_ASSIGN_OR_RETURN(Ticket ticket, admit(who, &request.max_tokens, prompt_tokens));
  if (who.tenant) {
    const TenantLimits l = who.tenant->limits();
    request.schedule.priority = l.priority == Priority::kBatch ? 1 : 0;
    request.schedule.flow = who.tenant->name();
    request.schedule.weight = l.weight;
  }
  auto watch = std::make_shared<Watch>();
  watch->tenant = who.tenant;
  watch->forecast = forecast_;
  watch->waited = held_before >= capacity_;
  watch->priority_class = request.schedule.priority;
  watch->deadline = who.deadline;
  if (who.deadline) {
    if (request.on_piece) {
      request.on_piece = [watch, f = std::move(request.on_piece)](const backend::TextPiece& p) {
        return watch->in_time() && f(p);
      };
    } else {
      request.on_text = [watch, f = std::move(request.on_text)](std::string_view t) {
        return watch->in_time() && (!f || f(t));
      };
    }
  }
  auto place = std::make_shared<Ticket>(std::move(ticket));
  request.on_done = [place, done = std::move(request.on_done)]() mutable {
    place->release();  // before the answer: the next request may start as this one is answered
    if (done) done();
  };
  // Refused: the request, and its place, are gone.
  GANTRY_ASSIGN_OR_RETURN(auto gen, model_.start_generation(std::move(request)));
  if (!gen) return gen;
  return std::unique_ptr<backend::Generation>(std::make_unique<WatchedGeneration>(std::move(gen), watch));
}

namespace {
// `cancelled`, and true once `deadline` has passed.
backend::CancelCheck with_deadline(const backend::CancelCheck& cancelled, const Admission& who) {
  if (!who.deadline) return cancelled;
  return [cancelled, deadline = *who.deadline] {
    return Clock::now() >= deadline || (cancelled && cancelled());
  };
}
}  // namespace

Result<std::vector<std::vector<float>>> ModelQueue::embed(std::span<const std::string> texts, bool normalize,
                                                          const backend::CancelCheck& cancelled,
                                                          const Admission& who) {
  GANTRY_ASSIGN_OR_RETURN(Ticket ticket, admit(who));
  return model_.embed(texts, normalize, with_deadline(cancelled, who));
}

Result<backend::RerankResult> ModelQueue::rerank(std::string_view query,
                                                 std::span<const std::string> documents,
                                                 const backend::CancelCheck& cancelled,
                                                 const Admission& who) {
  backend::TextModel* text = model_.text();
  if (text == nullptr) return Unsupported("model '" + name_ + "' is not a text model: it ranks no documents");
  GANTRY_ASSIGN_OR_RETURN(Ticket ticket, admit(who));
  return text->rerank(query, documents, with_deadline(cancelled, who));
}

}  // namespace gantry::runtime

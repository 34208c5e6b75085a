#include "gantry/runtime/model_manager.h"

#include <fmt/format.h>

#include <algorithm>

#include "gantry/core/enum_names.h"
#include "gantry/core/log.h"
#include "gantry/backend/text_model.h"
#include "gantry/runtime/model_queue.h"

namespace gantry::runtime {

namespace {
constexpr auto kModelStates = enum_names<ModelState>("model state", {{ModelState::kLoading, "loading"},
                                                                     {ModelState::kReady, "ready"},
                                                                     {ModelState::kDraining, "draining"},
                                                                     {ModelState::kUnloaded, "unloaded"},
                                                                     {ModelState::kFailed, "failed"},
                                                                     {ModelState::kEvicted, "evicted"}});
}  // namespace

std::string_view model_state_name(ModelState s) { return kModelStates.name_of(s, "?"); }

struct ModelManager::Entry {
  std::string name;
  std::string source;
  ModelState state = ModelState::kLoading;
  std::string reason;
  Status failure;  // the status of the last failed load (or of the model's health, see check_health)
  bool load_failed = false;  // failure came from a load (not from a ready model that broke)
  std::string backend;
  std::string provider;
  std::shared_ptr<backend::Model> model;
  std::shared_ptr<ModelQueue> queue;  // made with the model, destroyed before it
  QueueOptions queue_options;
  std::map<std::string, uint64_t> reserved;
  std::string basis;
  bool pinned = false;
  std::chrono::milliseconds keep_alive = kDefaultKeepAlive;
  int handles = 0;
  Clock::time_point last_used{};
  // Threads reading the model's stats outside the lock (list(), info()): retire() releases the
  // memory only once none of them holds the model any more.
  int readers = 0;
};

// ---- ModelHandle ----------------------------------------------------------------------------------

ModelHandle::ModelHandle(ModelHandle&& o) noexcept
    : manager_(o.manager_),
      name_(std::move(o.name_)),
      model_(std::move(o.model_)),
      queue_(std::move(o.queue_)) {
  o.manager_ = nullptr;
}

ModelHandle& ModelHandle::operator=(ModelHandle&& o) noexcept {
  if (this != &o) {
    release();
    manager_ = o.manager_;
    name_ = std::move(o.name_);
    model_ = std::move(o.model_);
    queue_ = std::move(o.queue_);
    o.manager_ = nullptr;
  }
  return *this;
}

ModelHandle::~ModelHandle() { release(); }

void ModelHandle::release() {
  if (manager_ == nullptr) return;
  queue_.reset();
  model_.reset();
  manager_->on_handle_released(name_);
  manager_ = nullptr;
}

// ---- Admission ------------------------------------------------------------------------------------

ModelManager::Admission::Admission(Admission&& o) noexcept
    : manager_(o.manager_), name_(std::move(o.name_)), done_(o.done_) {
  o.done_ = true;
}

ModelManager::Admission::~Admission() {
  if (!done_) fail(Internal("the load of '" + name_ + "' was abandoned"));
}

Status ModelManager::Admission::reserve(const backend::MemoryEstimate& estimate) {
  std::unique_lock lock(manager_->mu_);
  Entry& e = *manager_->entries_.at(name_);
  manager_->release_memory_locked(e);
  GANTRY_RETURN_IF_ERROR(manager_->reserve_locked(lock, e, estimate));
  e.basis = estimate.basis;
  return Status::Ok();
}

void ModelManager::Admission::release_reservation() {
  std::lock_guard lock(manager_->mu_);
  manager_->release_memory_locked(*manager_->entries_.at(name_));
}

Result<ModelHandle> ModelManager::Admission::finish(std::unique_ptr<backend::Model> model,
                                                    std::string backend_name, std::string provider,
                                                    std::shared_ptr<const void> resources) {
  if (!model) return Internal("finish() of '" + name_ + "' without a model");
  std::lock_guard lock(manager_->mu_);
  Entry& e = *manager_->entries_.at(name_);
  // The model goes first, then what it used (a package's extracted files).
  e.model = std::shared_ptr<backend::Model>(model.release(), [resources](backend::Model* m) { delete m; });
  e.queue = std::make_shared<ModelQueue>(e.name, *e.model, e.queue_options);
  e.backend = std::move(backend_name);
  e.provider = std::move(provider);
  e.state = ModelState::kReady;
  e.reason.clear();
  e.last_used = Clock::now();
  done_ = true;
  manager_->cv_.notify_all();
  GANTRY_LOG_DEBUG("model '{}' ready ({} on {})", e.name, e.backend, e.provider);
  return manager_->make_handle_locked(e);
}

void ModelManager::Admission::fail(const Status& why) {
  if (done_) return;
  std::lock_guard lock(manager_->mu_);
  Entry& e = *manager_->entries_.at(name_);
  manager_->release_memory_locked(e);
  e.state = ModelState::kFailed;
  e.reason = why.message();
  e.failure = why;
  e.load_failed = true;
  done_ = true;
  manager_->cv_.notify_all();
}

// ---- ModelManager ---------------------------------------------------------------------------------

ModelManager::ModelManager(Budgets& budgets) : budgets_(budgets) {}

ModelManager::~ModelManager() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (timer_.joinable()) timer_.join();
  std::vector<std::string> names;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, e] : entries_)
      if (e->state == ModelState::kReady) names.push_back(name);
  }
  // Handles must not outlive the manager: wait for them (there is no timeout that would be safe).
  for (const auto& name : names) {
    while (true) {
      Status s = unload(name, std::chrono::seconds(5), "runtime shut down");
      if (s.ok() || s.code() != StatusCode::kFailedPrecondition) break;
      GANTRY_LOG_WARN("shutting down: {}", s.message());
    }
  }
}

ModelHandle ModelManager::make_handle_locked(Entry& e) {
  ModelHandle h;
  h.manager_ = this;
  h.name_ = e.name;
  h.model_ = e.model;
  h.queue_ = e.queue;
  ++e.handles;
  e.last_used = Clock::now();
  return h;
}

void ModelManager::on_handle_released(const std::string& name) {
  std::unique_lock lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return;
  Entry& e = *it->second;
  if (e.handles > 0) --e.handles;
  e.last_used = Clock::now();
  check_health(e);
  if (e.state == ModelState::kFailed && e.model && e.handles == 0) {
    retire(lock, e, ModelState::kFailed, e.reason);
    return;
  }
  cv_.notify_all();
}

bool ModelManager::check_health(Entry& e) const {
  if (e.state != ModelState::kReady || !e.model) return false;
  Status h = e.model->health();
  if (h.ok()) return false;
  GANTRY_LOG_WARN("model '{}' failed: {}", e.name, h.message());
  e.state = ModelState::kFailed;
  e.reason = h.message();
  e.failure = h;
  e.load_failed = false;
  cv_.notify_all();  // the keep-alive timer retires it once idle
  return true;
}

Result<ModelManager::Begin> ModelManager::begin_load(const std::string& name,
                                                     const ManagedLoadOptions& options) {
  if (name.empty()) return InvalidArgument("a model needs a name");
  std::unique_lock lock(mu_);
  bool waited = false;
  while (true) {
    auto it = entries_.find(name);
    if (it == entries_.end()) {
      it = entries_.emplace(name, std::make_unique<Entry>()).first;
      it->second->name = name;
      it->second->state = ModelState::kUnloaded;  // never loaded: ours to load
    }
    Entry& e = *it->second;
    if (e.state == ModelState::kReady) {
      // Loaded again with other queue options (a server started on a model loaded before it): new
      // requests go through a queue made with them; those in the old one finish there.
      if (!(options.queue == e.queue_options)) {
        e.queue_options = options.queue;
        e.queue = std::make_shared<ModelQueue>(e.name, *e.model, e.queue_options);
      }
      return Begin(make_handle_locked(e));
    }
    check_health(e);
    // A model that broke while ready is still alive until its last call ends: wait for that too.
    if (e.state == ModelState::kLoading || e.state == ModelState::kDraining ||
        (e.state == ModelState::kFailed && e.model)) {
      waited = true;
      cv_.wait(lock);
      continue;
    }
    if (waited && e.state == ModelState::kFailed && e.load_failed) {
      return e.failure.with_context("loading '" + name + "' (by another caller)");
    }
    e.state = ModelState::kLoading;
    e.source = options.source.empty() ? name : options.source;
    e.reason.clear();
    e.failure = Status::Ok();
    e.load_failed = false;
    e.pinned = options.pinned;
    e.keep_alive = options.keep_alive;
    e.queue_options = options.queue;
    e.reserved.clear();
    e.basis.clear();
    return Begin(Admission(this, name));
  }
}

Result<ModelHandle> ModelManager::acquire(std::string_view name) {
  std::unique_lock lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return NotFound("no model named '" + std::string(name) + "' is loaded");
  Entry& e = *it->second;
  check_health(e);
  if (e.state == ModelState::kFailed && e.model && e.handles == 0)
    retire(lock, e, ModelState::kFailed, e.reason);
  if (e.state != ModelState::kReady) {
    std::string msg = "model '" + e.name + "' is " + std::string(model_state_name(e.state));
    if (!e.reason.empty()) msg += " (" + e.reason + ")";
    return Unavailable(msg);
  }
  return make_handle_locked(e);
}

void ModelManager::release_memory_locked(Entry& e) {
  for (auto& [device, budget] : budgets_) budget->release(e.name);
  e.reserved.clear();
}

Status ModelManager::reserve_locked(std::unique_lock<std::mutex>& lock, Entry& e,
                                    const backend::MemoryEstimate& estimate) {
  for (const auto& [device, bytes] : estimate.bytes) {
    auto b = budgets_.find(device);
    if (b == budgets_.end() || bytes == 0) continue;  // a device without a budget is not accounted
    memory::Budget& budget = *b->second;
    while (true) {
      Status s = budget.reserve(e.name, bytes);
      if (s.ok()) {
        e.reserved[device] += bytes;
        break;
      }
      // Least recently used idle, unpinned, ready model holding memory on this device.
      Entry* victim = nullptr;
      int blocked = 0;
      for (auto& [name, other] : entries_) {
        if (other.get() == &e || other->state != ModelState::kReady) continue;
        auto usage = budget.usage(name);
        if (!usage || usage->footprint() == 0) continue;
        if (other->pinned || other->handles > 0) {
          ++blocked;
          continue;
        }
        if (!victim || other->last_used < victim->last_used) victim = other.get();
      }
      if (!victim) {
        const std::string shortfall = budget.shortfall_message(bytes);
        release_memory_locked(e);
        std::string msg = "model '" + e.name + "' does not fit: " + shortfall;
        if (blocked > 0)
          msg += fmt::format("; {} model(s) there are in use or pinned and cannot be evicted", blocked);
        msg += " (" + estimate.basis + ")";
        return ResourceExhausted(msg);
      }
      GANTRY_LOG_INFO("evicting idle model '{}' to make room for '{}' on {}", victim->name, e.name, device);
      retire(lock, *victim, ModelState::kEvicted,
             "evicted to make room for '" + e.name + "' on " + device + " (least recently used idle model)");
    }
  }
  return Status::Ok();
}

void ModelManager::retire(std::unique_lock<std::mutex>& lock, Entry& e, ModelState final_state,
                          std::string reason) {
  e.state = ModelState::kDraining;
  std::shared_ptr<ModelQueue> queue = std::move(e.queue);
  std::shared_ptr<backend::Model> model = std::move(e.model);
  lock.unlock();
  queue.reset();  // its batcher's threads use the model: they go first
  if (model) {
    (void)model->drain();
    model.reset();  // the last reference: frees the model's memory before the budget forgets it
  }
  lock.lock();
  // A reader's copy of the model (add_stats) may have been the last: wait until it is gone.
  cv_.wait(lock, [&] { return e.readers == 0; });
  release_memory_locked(e);
  e.state = final_state;
  e.reason = std::move(reason);
  cv_.notify_all();
  if (final_state == ModelState::kEvicted) evictions_.fetch_add(1, std::memory_order_relaxed);
  if (final_state == ModelState::kEvicted)
    GANTRY_LOG_INFO("model '{}' evicted ({})", e.name, e.reason);
  else
    GANTRY_LOG_DEBUG("model '{}' {} ({})", e.name, model_state_name(final_state), e.reason);
}

Status ModelManager::unload(std::string_view name, std::chrono::milliseconds timeout, std::string reason) {
  std::unique_lock lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end() || it->second->state != ModelState::kReady) {
    std::string msg = "no model named '" + std::string(name) + "' is loaded";
    if (it != entries_.end())
      msg = "model '" + std::string(name) + "' is " + std::string(model_state_name(it->second->state));
    return NotFound(msg);
  }
  Entry& e = *it->second;
  e.state = ModelState::kDraining;  // no new handles from here on
  cv_.notify_all();
  if (!cv_.wait_for(lock, timeout, [&] { return e.handles == 0; })) {
    e.state = ModelState::kReady;
    cv_.notify_all();
    return FailedPrecondition(
        fmt::format("model '{}' is still in use by {} caller(s) after {} ms; not unloaded", e.name, e.handles,
                    timeout.count()));
  }
  retire(lock, e, ModelState::kUnloaded, std::move(reason));
  return Status::Ok();
}

Status ModelManager::set_pinned(std::string_view name, bool pinned) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return NotFound("no model named '" + std::string(name) + "'");
  it->second->pinned = pinned;
  cv_.notify_all();
  return Status::Ok();
}

Status ModelManager::set_keep_alive(std::string_view name, std::chrono::milliseconds keep_alive) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return NotFound("no model named '" + std::string(name) + "'");
  it->second->keep_alive = keep_alive;
  cv_.notify_all();
  return Status::Ok();
}

namespace {
bool expirable(const ModelInfo& i) {
  return i.state == ModelState::kReady && !i.pinned && i.handles == 0 && i.keep_alive.count() >= 0;
}
}  // namespace

int ModelManager::sweep(Clock::time_point now) {
  std::unique_lock lock(mu_);
  std::vector<std::string> due, broken;
  for (const auto& [name, e] : entries_) {
    check_health(*e);
    if (e->state == ModelState::kFailed && e->model && e->handles == 0) broken.push_back(name);
  }
  for (const auto& name : broken) {
    Entry& e = *entries_.at(name);
    if (e.state == ModelState::kFailed && e.model && e.handles == 0)
      retire(lock, e, ModelState::kFailed, e.reason);
  }
  for (const auto& [name, e] : entries_) {
    const ModelInfo i = snapshot_locked(*e);
    if (expirable(i) && i.last_used + i.keep_alive <= now) due.push_back(name);
  }
  int n = 0;
  for (const auto& name : due) {
    Entry& e = *entries_.at(name);
    if (!(e.state == ModelState::kReady && !e.pinned && e.handles == 0)) continue;  // changed meanwhile
    retire(lock, e, ModelState::kUnloaded,
           fmt::format("idle for longer than its keep_alive of {} ms", e.keep_alive.count()));
    ++n;
  }
  return n;
}

std::optional<Clock::time_point> ModelManager::next_expiry() const {
  std::lock_guard lock(mu_);
  std::optional<Clock::time_point> next;
  for (const auto& [name, e] : entries_) {
    const ModelInfo i = snapshot_locked(*e);
    if (!expirable(i)) continue;
    const auto t = i.last_used + i.keep_alive;
    if (!next || t < *next) next = t;
  }
  return next;
}

void ModelManager::start_keep_alive_timer() {
  std::lock_guard lock(mu_);
  if (timer_.joinable()) return;
  timer_ = std::thread([this] { timer_loop(); });
}

void ModelManager::timer_loop() {
  while (true) {
    const auto next = next_expiry();
    {
      std::unique_lock lock(mu_);
      if (stopping_) return;
      // Wake at the next expiry, or when anything changes (a handle released, a new keep_alive).
      if (next)
        cv_.wait_until(lock, *next);
      else
        cv_.wait_for(lock, std::chrono::seconds(1));
      if (stopping_) return;
    }
    sweep();
  }
}

ModelInfo ModelManager::snapshot_locked(const Entry& e) const {
  ModelInfo i;
  i.name = e.name;
  i.source = e.source;
  i.state = e.state;
  i.reason = e.reason;
  i.backend = e.backend;
  if (e.model) i.format = e.model->metadata().format;
  if (e.model) i.instances = e.model->metadata().instances;
  if (e.model && e.model->text()) i.context_length = e.model->text()->text_info().context_length;
  i.provider = e.provider;
  i.reserved_bytes = e.reserved;
  i.memory_basis = e.basis;
  i.pinned = e.pinned;
  i.keep_alive = e.keep_alive;
  i.handles = e.handles;
  i.requests = e.queue ? e.queue->outstanding() : 0;
  i.last_used = e.last_used;
  return i;
}

void ModelManager::add_stats(std::unique_lock<std::mutex>& lock, std::vector<Entry*> entries,
                             std::vector<ModelInfo*> infos) const {
  // A model's stats() takes the model's own locks (a text model's engine): never under mu_, whose
  // holders (the keep-alive timer) would otherwise wait for an engine whose thread, dropping a
  // finished request's model handle, waits for mu_ (docs/architecture.md, lock order).
  std::vector<std::shared_ptr<backend::Model>> models;
  for (Entry* e : entries) {
    models.push_back(e->model);
    ++e->readers;
  }
  lock.unlock();
  for (size_t i = 0; i < models.size(); ++i) {
    if (models[i]) infos[i]->stats = models[i]->stats();
    models[i].reset();  // before the lock: retire() waits for readers to let go
  }
  lock.lock();
  for (Entry* e : entries) --e->readers;
  cv_.notify_all();
}

std::vector<ModelInfo> ModelManager::list() const {
  std::unique_lock lock(mu_);
  std::vector<ModelInfo> out;
  out.reserve(entries_.size());  // the pointers below stay valid
  std::vector<Entry*> loaded;
  std::vector<ModelInfo*> infos;
  for (const auto& [name, e] : entries_) {
    check_health(*e);
    out.push_back(snapshot_locked(*e));
    if (!e->model) continue;
    loaded.push_back(e.get());
    infos.push_back(&out.back());
  }
  add_stats(lock, std::move(loaded), std::move(infos));
  return out;
}

std::optional<ModelInfo> ModelManager::info(std::string_view name) const {
  std::unique_lock lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  check_health(*it->second);
  ModelInfo out = snapshot_locked(*it->second);
  if (it->second->model) add_stats(lock, {it->second.get()}, {&out});
  return out;
}

bool ModelManager::wait_for_state(std::string_view name, ModelState state,
                                  std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] {
    auto it = entries_.find(name);
    return it != entries_.end() && it->second->state == state;
  });
}

}  // namespace gantry::runtime

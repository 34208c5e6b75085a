// ModelManager: the loaded models of one Runtime, by name, and the memory they hold.
//
// - A model is loaded under a unique name. Loading it again while it is ready returns the same model;
//   while it is loading, the second caller waits for the first.
// - Callers use a model through a ModelHandle (refcounted). A model with live handles is "in use":
//   it is never evicted; unload() refuses new handles at once and waits for the live ones to go.
// - Memory: before a model is created, its estimate is reserved in the Budget of every device it will
//   use. When a reservation does not fit, idle (no handles), unpinned ready models that hold memory on
//   that device are evicted, least recently used first, until it fits; if even that cannot make room,
//   the load fails with the numbers. Before any of that, the Budget itself takes back what caches hold
//   (a text model's host prompt cache registers as a memory::Budget reclaimer), so caches go before
//   models. Eviction happens here, between loads — never from inside an allocation; so the facts that order
//   it (pinned, last used) are kept here and nowhere else (the Budget counts bytes only). Reservations are
//   atomic per device, so loads racing for the last bytes never overcommit.
// - keep_alive per model: how long it stays loaded after its last handle went (default 5 min; 0 =
//   unload as soon as it is idle; negative = never). sweep() applies it; the Runtime calls it on a timer.
// - States: loading, ready, draining, unloaded, failed (with reason), evicted (with reason). Models that
//   left stay listed with their last state until loaded again. A ready model whose backend reports it
//   unhealthy (an RPC server holding part of it was lost) turns failed at once and is destroyed when its
//   last handle goes; it can be loaded again.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "gantry/backend/backend.h"
#include "gantry/backend/model.h"
#include "gantry/core/status.h"
#include "gantry/memory/budget.h"
#include "gantry/runtime/queue_options.h"

namespace gantry::runtime {

enum class ModelState { kLoading, kReady, kDraining, kUnloaded, kFailed, kEvicted };
std::string_view model_state_name(
    ModelState s);  // "loading", "ready", "draining", "unloaded", "failed", "evicted"

using Clock = std::chrono::steady_clock;
inline constexpr std::chrono::milliseconds kDefaultKeepAlive = std::chrono::minutes(5);

// One model as the manager sees it (plain data, a snapshot).
struct ModelInfo {
  std::string name;
  std::string source;  // what it was loaded from
  ModelState state = ModelState::kLoading;
  std::string reason;  // why it failed / was evicted / was unloaded
  std::string backend;
  std::string provider;
  std::string format;  // "onnx" | "gguf" once loaded (ModelMetadata::format)
  int instances = 0;   // copies running requests at once once loaded (ModelMetadata::instances)
  int64_t context_length = 0;  // a text model's tokens per sequence once loaded (TextModelInfo); else 0
  std::map<std::string, uint64_t> reserved_bytes;  // device id -> bytes reserved for it
  std::string memory_basis;                        // how the reservation was computed
  bool pinned = false;
  std::chrono::milliseconds keep_alive = kDefaultKeepAlive;
  int handles = 0;      // live ModelHandles
  size_t requests = 0;  // requests admitted by its ModelQueue now (running and waiting)
  Clock::time_point last_used{};
  backend::ModelStats stats;
};

class ModelManager;
class ModelQueue;

// A counted reference to a loaded model. Requests go in through queue() (the one way in: admission,
// batching; gantry/runtime/model_queue.h); model() is for what is not a request (metadata, the text
// facet's template and token counts). The model stays alive while any handle does. Moving is cheap;
// destroying releases the use.
class ModelHandle {
 public:
  ModelHandle() = default;
  ModelHandle(ModelHandle&&) noexcept;
  ModelHandle& operator=(ModelHandle&&) noexcept;
  ModelHandle(const ModelHandle&) = delete;
  ModelHandle& operator=(const ModelHandle&) = delete;
  ~ModelHandle();

  explicit operator bool() const { return model_ != nullptr; }
  backend::Model& model() const { return *model_; }
  backend::Model* operator->() const { return model_.get(); }
  ModelQueue& queue() const { return *queue_; }
  const std::string& name() const { return name_; }

 private:
  friend class ModelManager;
  void release();
  ModelManager* manager_ = nullptr;
  std::string name_;
  std::shared_ptr<backend::Model> model_;
  std::shared_ptr<ModelQueue> queue_;
};

struct ManagedLoadOptions {
  std::chrono::milliseconds keep_alive = kDefaultKeepAlive;
  bool pinned = false;
  std::string source;
  QueueOptions queue;  // the model's ModelQueue, made when it is published
};

// The devices' budgets, by device id ("cpu", "cuda:0"). Devices without a budget are not accounted.
using Budgets = std::map<std::string, std::unique_ptr<memory::Budget>, std::less<>>;

// Lock order (docs/architecture.md): a model's locks (a text model's decoding step, which may drop a
// handle) come before the manager's; under its own lock the manager calls only Model::metadata() and
// Model::health(), which take nothing but leaf locks; stats(), drain() and destroying a model run
// with it released. A handle may be dropped on any thread that holds no manager lock, but not on a
// model's own decoding thread (the last one of a failed model destroys it there).
class ModelManager {
 public:
  explicit ModelManager(Budgets& budgets);
  ~ModelManager();  // unloads everything (waits for live handles)
  ModelManager(const ModelManager&) = delete;
  ModelManager& operator=(const ModelManager&) = delete;

  // An admission: the right to create model `name`, with its memory reserved through reserve().
  // finish() publishes the model; dropping an unfinished admission fails the load with `fail()`'s
  // reason (or "abandoned") and releases its reservation.
  class Admission {
   public:
    Admission(Admission&&) noexcept;
    Admission& operator=(Admission&&) = delete;
    ~Admission();
    // Reserves `estimate` (evicting idle models when needed). Replaces an earlier reservation of this
    // admission. ResourceExhausted with the numbers when even eviction cannot make room.
    Status reserve(const backend::MemoryEstimate& estimate);
    void release_reservation();
    // Publishes the loaded model. `resources` (e.g. the package holding a tar's extracted files) are
    // kept until the model is destroyed.
    Result<ModelHandle> finish(std::unique_ptr<backend::Model> model, std::string backend_name,
                               std::string provider, std::shared_ptr<const void> resources = {});
    void fail(const Status& why);
    const std::string& name() const { return name_; }

   private:
    friend class ModelManager;
    Admission(ModelManager* m, std::string name) : manager_(m), name_(std::move(name)) {}
    ModelManager* manager_;
    std::string name_;
    bool done_ = false;
  };

  // Starts loading `name`. When it is already ready, returns a handle to it instead (second variant),
  // its queue made anew when options.queue differs from the one it was made with; when another caller
  // is loading it, waits for that load and returns its outcome.
  using Begin = std::variant<Admission, ModelHandle>;
  Result<Begin> begin_load(const std::string& name, const ManagedLoadOptions& options);

  // A handle to a ready model; NotFound (unknown) or Unavailable (not ready: says its state and why).
  Result<ModelHandle> acquire(std::string_view name);

  // Refuses new handles, waits for live ones to be released (at most `timeout`), drains and destroys the
  // model and releases its memory. NotFound when no such model is loaded.
  Status unload(std::string_view name, std::chrono::milliseconds timeout = std::chrono::minutes(1),
                std::string reason = "unloaded on request");

  Status set_pinned(std::string_view name, bool pinned);
  Status set_keep_alive(std::string_view name, std::chrono::milliseconds keep_alive);

  // Unloads ready, idle, unpinned models whose keep_alive has run out at `now`. Returns how many.
  int sweep(Clock::time_point now = Clock::now());
  // When the next sweep could unload something (nullopt: nothing can expire).
  std::optional<Clock::time_point> next_expiry() const;

  // A background thread that calls sweep() whenever a keep_alive runs out (stopped by the destructor).
  void start_keep_alive_timer();

  std::vector<ModelInfo> list() const;
  std::optional<ModelInfo> info(std::string_view name) const;
  // Waits until model `name` is in `state` (true) or `timeout` has passed (false): how a caller sees a
  // change made by another thread (the keep-alive timer's unload, an unload waiting for handles).
  bool wait_for_state(std::string_view name, ModelState state, std::chrono::milliseconds timeout);
  // Models evicted to make room since the manager was created.
  uint64_t evictions() const { return evictions_.load(std::memory_order_relaxed); }
  const Budgets& budgets() const { return budgets_; }

 private:
  struct Entry;
  friend class ModelHandle;
  friend class Admission;

  Status reserve_locked(std::unique_lock<std::mutex>& lock, Entry& e,
                        const backend::MemoryEstimate& estimate);
  void release_memory_locked(Entry& e);
  // A ready model whose backend reports it unhealthy (backend::Model::health) becomes failed: no new handles;
  // it is retired (destroyed, memory released) once its last handle goes. True when it changed now.
  bool check_health(Entry& e) const;
  // Drains and destroys an entry's model outside the lock; `lock` is re-acquired on return.
  void retire(std::unique_lock<std::mutex>& lock, Entry& e, ModelState final_state, std::string reason);
  void on_handle_released(const std::string& name);
  ModelHandle make_handle_locked(Entry& e);
  ModelInfo snapshot_locked(const Entry& e) const;  // without stats: they are read outside the lock
  // Fills infos[i]->stats from entries[i]'s model (each holds one) with `lock` released meanwhile.
  void add_stats(std::unique_lock<std::mutex>& lock, std::vector<Entry*> entries,
                 std::vector<ModelInfo*> infos) const;
  void timer_loop();

  Budgets& budgets_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;  // state changes, handle releases, shutdown
  // Entries are never erased (a model that left keeps its last state), so references stay valid.
  std::map<std::string, std::unique_ptr<Entry>, std::less<>> entries_;
  std::atomic<uint64_t> evictions_{0};
  bool stopping_ = false;
  std::thread timer_;
};

}  // namespace gantry::runtime

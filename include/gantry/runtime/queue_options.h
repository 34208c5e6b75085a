// How a loaded model's requests are queued and batched: plain data, set per load
// (runtime::LoadOptions::queue) and acted on by its ModelQueue (gantry/runtime/model_queue.h).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gantry::runtime {

// Triton's knobs (model config `dynamic_batching`); a package's gantry.json may set them.
struct BatchingConfig {
  int64_t max_batch_size = 32;                 // rows per batch (capped by the model's own max_batch)
  std::vector<int64_t> preferred_batch_sizes;  // a batch this large starts without waiting
  std::chrono::microseconds max_queue_delay{1000};
  bool operator==(const BatchingConfig&) const = default;
};

// How a model's requests are queued (set per load: runtime::LoadOptions::queue).
struct QueueOptions {
  size_t max_queue = 64;  // requests waiting beyond capacity (--max-queue)
  // Tensor models whose inputs and outputs all have a dynamic batch dimension (ModelMetadata::batchable)
  // are batched with these knobs; the package manifest's dynamic_batching overrides them per field.
  bool dynamic_batching = true;
  BatchingConfig batching;
  // How long one tensor inference that runs alone (not in a dynamic batch) may run: past it the run is
  // cancelled (Cancelled) where the backend can stop it midway (ONNX Runtime). 0: no limit. `gantry serve`
  // sets it from --max-generation-time.
  std::chrono::milliseconds max_run_time{0};
  bool operator==(const QueueOptions&) const = default;
};

}  // namespace gantry::runtime

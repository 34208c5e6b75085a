// What a GGUF model takes in memory under given settings, from llama.cpp itself: per device and per
// kind, the bytes of its weights, KV cache, compute and output buffers.
//
// - measure_memory loads the model for real and creates its context (`gantry plan --measure` checks
//   the planner's predictions against it); it also reports how much the process's resident memory grew.
// - dry_run_memory asks llama.cpp's dry run (no_alloc: metadata only, allocations simulated) for the
//   same numbers without reading or allocating the weights, so a memory budget can be consulted
//   before a model is loaded (LlamaBackend::estimate_memory).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gantry/backend/llama/settings.h"
#include "gantry/core/status.h"

namespace gantry::llama {

class LlamaContext;

// Bytes on one device.
struct DeviceBytes {
  std::string device;          // Gantry's device id: "cpu" (all host memory), "cuda:0", ...
  uint64_t model_bytes = 0;    // weights (mmapped CPU weights included)
  uint64_t kv_bytes = 0;       // KV cache (llama_memory)
  uint64_t compute_bytes = 0;  // scheduler compute buffers
  uint64_t output_bytes = 0;   // logits/embeddings output buffer (always host memory)
  uint64_t total_bytes = 0;
  std::vector<std::string> buffer_types;  // e.g. "CPU_Mapped", "CPU", "CUDA0"
};

struct MemoryMeasurement {
  std::vector<DeviceBytes> devices;  // sorted by id
  uint64_t model_bytes = 0;
  uint64_t kv_bytes = 0;
  uint64_t compute_bytes = 0;
  uint64_t output_bytes = 0;
  uint64_t total_bytes = 0;
  uint64_t model_tensor_bytes = 0;  // llama_model_size: all tensors, wherever they live
  uint32_t n_ctx = 0;               // cells actually allocated (n_ctx padded to 256)
  uint64_t rss_before_bytes = 0;    // measure_memory only
  uint64_t rss_after_bytes = 0;
  int64_t rss_growth_bytes = 0;  // after - before (load + context + warm-up)
};

// Loads `path` with `settings`, creates the context, reads llama.cpp's buffer sizes, frees both.
// With `warm_up` one token is decoded first so that mmapped weights are paged in for the RSS reading.
Result<MemoryMeasurement> measure_memory(const std::string& path, const LlamaSettings& settings,
                                         bool warm_up = true);

// The same sizes from llama.cpp's dry run; nothing but metadata is read. The weights' bytes are what
// llama.cpp would allocate without mmap; see LlamaBackend::estimate_memory for how they relate to a
// mmapped load.
Result<MemoryMeasurement> dry_run_memory(const std::string& path, const LlamaSettings& settings);

// The sizes of a live (or dry-run) context, as above (rss fields 0).
MemoryMeasurement context_memory(const LlamaContext& context);

// Resident set size of this process, from /proc/self/statm (0 where unavailable).
uint64_t resident_bytes();

}  // namespace gantry::llama

// Measured memory of a GGUF model loaded the way the planner would place it: the bytes llama.cpp
// actually allocated, per device and per kind, plus how much the process's resident memory grew.
// Used by `gantry plan --measure` to check the planner's predictions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gantry/backend/llama/options.h"
#include "gantry/core/status.h"

namespace gantry::llama {

struct MeasureOptions {
  std::string path;
  LlamaPlacement placement;  // n_gpu_layers, tensor_split
  uint32_t n_ctx = 2048;     // llama.cpp pads it to a multiple of 256 (see MemoryMeasurement::n_ctx)
  uint32_t n_seq = 1;        // parallel sequences
  uint32_t n_batch = 512;
  uint32_t n_ubatch = 512;
  KvType kv_type = KvType::kF16;  // K and V
  FlashAttn flash_attn = FlashAttn::kAuto;
  bool kv_unified = true;
  int n_threads = 0;
  bool warm_up = true;  // decode one token so mmapped weights are paged in before the RSS reading
};

// Bytes on one device (ggml device name: "CPU", "CUDA0", ...).
struct DeviceBytes {
  std::string device;
  uint64_t model_bytes = 0;    // weights (mmapped CPU weights included)
  uint64_t kv_bytes = 0;       // KV cache (llama_memory)
  uint64_t compute_bytes = 0;  // scheduler compute buffers
  uint64_t output_bytes = 0;   // logits/embeddings output buffer (host memory of the output device)
  uint64_t total_bytes = 0;
  std::vector<std::string> buffer_types;  // e.g. "CPU_Mapped", "CPU", "CUDA0"
};

struct MemoryMeasurement {
  std::vector<DeviceBytes> devices;
  uint64_t model_bytes = 0;
  uint64_t kv_bytes = 0;
  uint64_t compute_bytes = 0;
  uint64_t output_bytes = 0;
  uint64_t total_bytes = 0;
  uint64_t model_tensor_bytes = 0;  // llama_model_size: all tensors, wherever they live
  uint32_t n_ctx = 0;               // cells actually allocated
  uint64_t rss_before_bytes = 0;
  uint64_t rss_after_bytes = 0;
  int64_t rss_growth_bytes = 0;  // after - before (load + context + warm-up)
};

// Loads the model, creates a context with these settings, reads llama.cpp's buffer sizes, frees both.
Result<MemoryMeasurement> measure_memory(const MeasureOptions& options);

// Resident set size of this process, from /proc/self/statm (0 where unavailable).
uint64_t resident_bytes();

}  // namespace gantry::llama

// Memory planner for GGUF models run by llama.cpp (commit de3ff815): how many bytes the weights, KV cache,
// compute and output buffers take at a given context, and how layers split over devices.
//
// The rules mirror what llama.cpp allocates (llama-context.cpp, llama-kv-cache.cpp, llama-model.cpp):
// - n_ctx is padded to 256; without a unified KV cache every sequence gets its own stream of
//   n_ctx_seq = pad256(n_ctx / n_parallel) cells; SWA layers keep pad256(min(n_ctx_seq, n_swa + n_ubatch))
//   cells unless swa_full; V is stored transposed without flash attention, padded to the widest layer.
// - the compute buffer is the peak of the worst-case prompt graph (n_ubatch tokens, all of them outputs): the
// larger
//   of the attention phase (KQ scores n_kv x tokens x heads in f32 without flash attention, plus the mask),
//   the feed-forward phase and the output phase (logits n_vocab x outputs in f32).
// - the output buffer holds n_vocab logits (and n_embd embeddings when enabled) for one output per sequence.
// - layers go to GPUs in proportion to their free memory (llama.cpp's default tensor_split); the input layer
// stays
//   on the CPU; the output layer follows the last offloaded layer when n_gpu_layers > n_layer.
// - remote devices (another host's, through RPC: hw::DeviceKind::kRemote) are offload devices like GPUs, in
//   the order of the device list (Gantry lists them before local GPUs, as llama-server does); see
//   PlanOptions::cpu_takes_share for a CPU host.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/kv_type.h"
#include "gantry/core/status.h"
#include "gantry/hw/registry.h"
#include "gantry/plan/model_profile.h"

namespace gantry::plan {

struct PlanOptions {
  uint32_t n_ctx = 0;  // 0: the model's training context
  uint32_t n_parallel = 1;
  uint32_t n_batch = 2048;
  uint32_t n_ubatch = 512;
  KvType kv_type = KvType::kF16;
  bool flash_attn = true;  // llama.cpp's "auto" resolves to on for CPU and recent GPUs
  int n_gpu_layers = -1;   // -1: all layers and the output layer
  bool swa_full = true;    // llama_context_default_params().swa_full
  bool kv_unified = false;
  bool embeddings = false;  // also reserve n_embd floats per output
  bool cpu_repack =
      true;  // llama_model_params.use_extra_bufts: CPU layers get repacked copies of some weights
  std::vector<float> tensor_split;  // explicit GPU proportions; empty: by free memory
  // One model over several hosts' memory (no local GPU, remote devices): with n_gpu_layers -1 the CPU takes
  // the first layers in proportion to its free memory, as one more device before the others; the other
  // devices split the rest by free memory (or tensor_split), the output layer with the last of them
  // (llama.cpp offloads from the end). The offloaded count is what llama.cpp is given as n_gpu_layers.
  bool cpu_takes_share = false;
};

// Whether a GGUF plan over `devices` sets PlanOptions::cpu_takes_share: there are remote devices and no local
// GPU (this CPU then holds its share of the layers next to them).
bool cpu_should_take_share(const std::vector<hw::Device>& devices);

// The planner places layers on hw::Device (the one device identity) and reads only its memory: in bytes,
// 0 when unknown; free memory is the total when only that is known. A device's id in a plan is
// hw::memory_device_id ("cpu", "cuda:0").
using Device = hw::Device;
uint64_t device_total_bytes(const Device& d);
uint64_t device_free_bytes(const Device& d);
bool is_gpu(const Device& d);
// A device known only by its memory (what-if targets, an engine's own device list, tests). `id` is
// "cpu" or "<family>:<index>"; a GPU's family is the part before ':'.
Device memory_target(std::string_view id, std::string name, bool gpu, uint64_t free_bytes,
                     uint64_t total_bytes);

struct MemoryBytes {
  uint64_t weights = 0;
  uint64_t kv_cache = 0;
  uint64_t compute = 0;
  uint64_t output = 0;
  uint64_t total() const;  // saturates at UINT64_MAX (never wraps to a small number)
  MemoryBytes& operator+=(const MemoryBytes& o);
};

struct DevicePlan {
  Device device;
  std::vector<uint32_t> layers;  // repeating layers placed here
  bool has_output_layer = false;
  MemoryBytes predicted;
  bool fits = false;
};

struct Plan {
  bool estimate = false;  // true for the generic (non-GGUF) estimate: less exact
  std::string model;
  PlanOptions options;
  // Effective llama.cpp context parameters.
  uint32_t n_ctx = 0;
  uint32_t n_ctx_seq = 0;
  uint32_t n_stream = 1;
  uint32_t kv_cells = 0;      // per stream, full-attention layers
  uint32_t kv_cells_swa = 0;  // per stream, SWA layers (0: none)
  uint32_t n_batch = 0;
  uint32_t n_ubatch = 0;
  std::vector<DevicePlan> devices;
  MemoryBytes totals;
  bool fits = false;
  std::string suggestion;  // when it does not fit: what would
  // Plans the suggestion search made, counting each candidate's own (bounded: see plan_gguf).
  uint32_t candidates_planned = 0;
  std::vector<std::string> notes;
};

// The largest context the planner (and llama.cpp's 32-bit n_ctx, padded to 256) accepts.
inline constexpr uint32_t kMaxContext = 1u << 28;

// Plans a GGUF model over `devices` (at least one; the CPU device must be present and is where non-offloaded
// layers go). Fails on impossible options (zero or over-large context, quantised V cache without flash
// attention, ...) and on a model whose memory does not fit in 64 bits. When it does not fit, `suggestion`
// comes from a bounded search (a few dozen plans at most, none of them searching again).
Result<Plan> plan_gguf(const ModelProfile& model, const PlanOptions& options,
                       const std::vector<Device>& devices);

// The largest context (a multiple of 256, at most `limit`) at which `model` fits on `devices` with `options`
// (whose n_ctx is ignored); 0 when not even 256 tokens fit. A binary search over plan_gguf's sizes (which
// grow with the context), so about log2(limit / 256) plans.
Result<uint32_t> max_context(const ModelProfile& model, PlanOptions options,
                             const std::vector<Device>& devices, uint32_t limit);

// A rough estimate for models llama.cpp does not run (e.g. ONNX): weights = file size, plus activations as a
// fraction of it. Labelled as an estimate.
Plan estimate_generic(std::string_view model_name, uint64_t file_bytes, const std::vector<Device>& devices);

// The n_gpu_layers that gives the CPU (weight `cpu_weight`) its proportional share of the `n_layers`
// repeating layers ahead of devices weighing `weights` (PlanOptions::cpu_takes_share): the layers whose
// position il / n_layers falls in the CPU's share stay on it; the rest and the output layer are offloaded
// (n_layers + 1 - those).
int cpu_share_gpu_layers(uint32_t n_layers, double cpu_weight, const std::vector<double>& weights);

// How many of `n_layers` (plus the output layer, index n_layers) go to each of `weights.size()` GPUs,
// following llama.cpp: cumulative proportions, upper_bound on (il - first) / count. Returns the GPU index per
// layer
// (-1: CPU) for layers 0..n_layers (the last entry is the output layer).
std::vector<int> assign_layers(uint32_t n_layers, int n_gpu_layers, const std::vector<double>& weights);

}  // namespace gantry::plan

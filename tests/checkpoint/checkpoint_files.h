// The generated checkpoints and their GGUF conversions (scripts/models/hf_checkpoints.py), and the one
// llama.cpp configuration the checkpoint tests plan and measure with (CPU, ctx N, batch/ubatch 512, flash
// attention, one unified KV stream: plan_error_bench's settings).
#pragma once

#include <string>
#include <vector>

#include "gantry/backend/llama/measure.h"
#include "gantry/backend/llama/settings.h"
#include "gantry/plan/checkpoint.h"
#include "gantry/plan/checkpoint_source.h"
#include "gantry/plan/planner.h"
#include "gantry/weights/loader.h"
#include "gantry/weights/source.h"

namespace gantry::plan::testing {

inline const std::string kHfDir = GANTRY_DEPS_DIR "/models/hf/";
inline constexpr const char* kArchitectures[] = {"llama", "mistral", "qwen2",   "qwen3",
                                                 "gemma", "gemma2",  "mixtral", "qwen2moe"};
inline constexpr const char* kQuantisations[] = {"bf16",   "f16",    "q8_0", "q6_k",   "q5_k_m", "q5_1",
                                                 "q4_k_m", "q4_k_s", "q4_0", "q3_k_m", "q2_k"};

inline std::string gguf_path(const std::string& arch, const std::string& q) {
  return kHfDir + arch + "-" + q + ".gguf";
}

struct Checkpoint {
  std::string config_json;
  std::vector<CheckpointTensor> tensors;
};

// config.json and the safetensors headers of a checkpoint directory or URL, through the weight loader.
inline Result<Checkpoint> read_checkpoint_at(const std::string& spec) {
  GANTRY_ASSIGN_OR_RETURN(auto src, weights::WeightSource::open(spec));
  GANTRY_ASSIGN_OR_RETURN(auto meta, weights::metadata(src));
  Checkpoint c;
  c.config_json = meta.config_json;
  c.tensors = checkpoint_tensors(meta);
  return c;
}
inline Result<Checkpoint> read_checkpoint(const std::string& arch) {
  return read_checkpoint_at(kHfDir + arch);
}

inline PlanOptions cpu_plan_options(uint32_t ctx, bool flash_attn = true, KvType kv = KvType::kF16) {
  PlanOptions o;
  o.n_ctx = ctx;
  o.kv_type = kv;
  o.n_batch = 512;
  o.n_ubatch = 512;
  o.kv_unified = true;
  o.flash_attn = flash_attn;
  o.n_gpu_layers = 0;
  return o;
}

inline Device big_cpu() { return memory_target("cpu", "CPU", false, 1ull << 40, 1ull << 40); }

// llama.cpp's allocations for the quantised GGUF under cpu_plan_options(ctx, flash_attn, kv).
inline Result<llama::MemoryMeasurement> measure(const std::string& arch, const std::string& q, uint32_t ctx,
                                                bool flash_attn = true, KvType kv = KvType::kF16) {
  const std::string path = gguf_path(arch, q);
  backend::Placement placement;
  placement.provider = "cpu";
  placement.intra_op_threads = 1;
  placement.llama.n_ctx = static_cast<int>(ctx);
  placement.llama.parallel = 1;
  placement.llama.kv_type = kv;
  placement.llama.flash_attn = flash_attn;
  placement.llama.n_batch = 512;
  placement.llama.n_ubatch = 512;
  GANTRY_ASSIGN_OR_RETURN(auto settings, llama::llama_settings(placement, path));
  settings.context.kv_unified = true;
  return llama::measure_memory(path, settings, /*warm_up=*/false);
}

}  // namespace gantry::plan::testing

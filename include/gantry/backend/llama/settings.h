// The one translation from a Placement (its typed llama.cpp options, model::LlamaOptions, from a manifest's
// "llama" object, CLI flags or the runtime's choice) to llama.cpp's load and context options. Every caller
// that loads a GGUF model goes through it, so the defaults exist once:
//
//   key            default                                     meaning
//   n_ctx          2048, or the model's training context       KV cells in all (0 = training context)
//                  when that is smaller
//   parallel       1                                           sequences decoded together (slots)
//   n_batch        512 (at least `parallel`)                   most tokens in one decode
//   n_ubatch       n_batch                                     physical micro-batch
//   n_gpu_layers   provider cpu: 0 (anything else is refused); layers offloaded (-1 = all, with the
//                  provider cuda: as many as the planner says   output layer)
//                  fit in the GPUs' free memory
//   tensor_split   llama.cpp's (by free memory)                share of offloaded layers per GPU ("3,1")
//   rpc            none                                        RPC servers ("host:port,..."): their devices
//                                                              take layers too (first, then local GPUs). With
//                                                              provider cpu and no n_gpu_layers the planner
//                                                              splits the layers over this CPU and the
//                                                              servers' devices by free memory
//                                                              (PlanOptions::cpu_takes_share) and gives
//                                                              llama.cpp that exact split
//   kv_type        f16                                         K and V cache type (gantry/core/kv_type.h)
//   flash_attn     auto                                        auto | on | off
//   mmap           on                                          off: read the weights into memory
//   max_tokens     128                                         tokens infer_one generates
//   chat_template_file  the GGUF's own                         a Jinja chat template file instead
//   reasoning_format    auto                                   auto (= deepseek) | none
//   draft_model    none                                        a GGUF draft model (speculative decoding)
//   draft_max      3 (llama-server's)                          most tokens drafted per step
//   draft_min      0                                           shorter drafts are not used
//   draft_p_min    0                                           least probability of a drafted token
//   spec_type      none                                        draft-free types: ngram-simple, ...
//   spec_ngram_size_n / _m  12 / 48                            n-gram looked up / most tokens copied
//
// The draft model runs where the target does: on the CPU for provider cpu; for provider cuda every
// draft layer goes to the GPUs when the planner says it fits there (its weights, KV cache of the
// target's size and compute buffers), and the target's layers are planned in what it leaves.
//   kv_unified     off (kKvUnifiedDefault)                     one KV pool for all sequences, or a
//                                                              stream of n_ctx / parallel cells each
//   cache_prompt   on                                          the slot prompt cache
//   cache_ram      (the loader's: a share of the CPU budget)   host prompt cache, MiB; 0 off, -1 only
//                                                              the budget limits it
//   prefill_chunk  n_ubatch                                    prompt tokens per decode step
//
// Placement::intra_op_threads becomes the decode thread count (0: every core); device_ids' first entry
// the main GPU. Ranges and spellings are checked where the options are read (model/backend_options.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gantry/backend/chat.h"
#include "gantry/backend/llama/options.h"
#include "gantry/backend/llama/speculative.h"
#include "gantry/backend/placement.h"
#include "gantry/core/status.h"
#include "gantry/plan/model_profile.h"
#include "gantry/plan/planner.h"

namespace gantry::llama {

// kv_unified's default. Off: each sequence attends over its own stream only, which the serve
// benchmark measured faster (bench/serve_gguf_vs_llama_server.sh, 8 slots, quiet 2-core machine:
// 131.5 vs 116.9 tok/s distinct prompts, 86.3 vs 80.7 with a shared system prompt);
// llama-server's default when the slot count is given. (The loader turns it on when the slot count is
// only a command's default: backend/loader.h.)
inline constexpr bool kKvUnifiedDefault = false;

struct LlamaSettings {
  LoadOptions load;
  ContextOptions context;
  // engine.cache_ram_bytes is the loader's to set (LlamaBackend: the cache_ram option, else a share
  // of its CPU budget), as are engine.budget and budget_owner.
  EngineOptions engine;
  std::optional<uint64_t> cache_ram_bytes;  // the cache_ram option in bytes (kUnlimited for -1)
  int max_tokens = 128;                     // infer_one's generation length
  std::string chat_template_file;           // "" = the GGUF's own template
  backend::ReasoningFormat reasoning_format = backend::ReasoningFormat::kAuto;
  Pooling pooling = Pooling::kModel;
  bool thinking = true;  // false: a template that knows thinking never thinks (the reasoning option off)  //
                         // the embeddings' (the pooling option); kModel: the GGUF's
  std::string reason;    // how n_gpu_layers was chosen, for messages and logs
  // Speculative decoding: the draft model ("" = none), how it loads, and the options (whose `draft`
  // stays unset: the backend loads it) and draft_context (the target's context, threadpool off).
  std::string draft_path;
  LoadOptions draft_load;
  SpeculativeOptions speculative;
};

// Settings for `model` under `placement`. `devices` (CPU first, then GPUs with their free memory, as
// plan::Device) are used only to choose n_gpu_layers for provider cuda when the placement does not
// give it. Errors: InvalidArgument for contradicting options (n_gpu_layers with provider cpu, ...).
Result<LlamaSettings> llama_settings(const backend::Placement& placement, const plan::ModelProfile& model,
                                     const std::vector<plan::Device>& devices);

// The same for a GGUF file, planning over the devices ggml sees here (llama_plan_devices()).
Result<LlamaSettings> llama_settings(const backend::Placement& placement, const std::string& gguf_path);

// The planner's devices as ggml sees them now: "cpu" (host memory) and "cuda:N" (free VRAM).
std::vector<plan::Device> llama_plan_devices();
// The same with the devices of these RPC servers ("host:port"), "rpc:N" with the memory each server reports,
// between the CPU and the local GPUs (the order llama.cpp is given them in). Errors name the server.
Result<std::vector<plan::Device>> llama_plan_devices(const std::vector<std::string>& rpc_servers);

// The inverse for the planner's own output: the placement that loads a model the way `plan` placed
// it (provider cuda when any layer went to a local GPU, the RPC servers of its remote devices,
// n_gpu_layers and tensor_split from its devices, and its context options).
backend::Placement placement_from_plan(const plan::Plan& plan);

}  // namespace gantry::llama

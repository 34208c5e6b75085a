// The llama.cpp flags of every command (`plan`, `run`, `serve`, `bench`): one definition of each flag's
// names, type, range and help, in Gantry's spelling with llama.cpp's (llama-server's, llama-bench's) as
// aliases. A command declares the subset it acts on (`which`) and turns the values into LlamaOptions with
// apply(); `plan` reads the fields directly (its planner takes contexts beyond what a load accepts).
//
//   --ctx, --ctx-size, -c N                            context size in tokens
//   --parallel, -np N                                  sequences decoded together (1..256)
//   --batch-size, --batch, -b N                        logical batch (llama.cpp n_batch; 1..2^20)
//   --ubatch-size, --ubatch, -ub N                     physical batch (llama.cpp n_ubatch; 1..2^20)
//   --n-gpu-layers, --gpu-layers, --ngl, -ngl N        layers offloaded to GPUs; -1 = all
//   --kv-type T                                        K and V cache type (f16, q8_0, ...)
//   --flash-attn, -fa on|off|auto                      flash attention
//   --threads, -t N                                    CPU threads; 0 = the command's default
//   --no-mmap                                          read the weights instead of mapping the file
//   --chat-template-file FILE, --reasoning-format F    chat formatting
//   --cache-ram, -cram SIZE; --no-prompt-cache, --no-cache-prompt; --kv-unified, -kvu; --no-kv-unified;
//   --prefill-chunk N                                  serving caches and scheduling
//   --rpc HOST:PORT,...                                RPC servers whose devices take layers too
//   --draft-model, -md, --draft-max, ...               speculative decoding (cli/speculative_flags.h)
// CLI11 declares one-letter short names only: llama.cpp's multi-letter ones (-ub, -ngl, -np, -fa, -cram,
// -kvu, -md) are rewritten to their long names before parsing (llama_cpp_alias).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/speculative_flags.h"
#include "gantry/core/status.h"
#include "gantry/model/backend_options.h"

namespace gantry::cli {

// One bit per flag (or group of flags that go together).
enum LlamaFlag : uint32_t {
  kLlamaCtx = 1u << 0,
  kLlamaParallel = 1u << 1,
  kLlamaBatch = 1u << 2,
  kLlamaUbatch = 1u << 3,
  kLlamaGpuLayers = 1u << 4,
  kLlamaKvType = 1u << 5,
  kLlamaFlashAttn = 1u << 6,
  kLlamaThreads = 1u << 7,
  kLlamaMmap = 1u << 8,
  kLlamaChatTemplate = 1u << 9,
  kLlamaReasoningFormat = 1u << 10,
  kLlamaSpeculative = 1u << 11,
  kLlamaPromptCache = 1u << 12,  // --cache-ram, --no-prompt-cache
  kLlamaKvUnified = 1u << 13,    // --kv-unified, --no-kv-unified
  kLlamaPrefillChunk = 1u << 14,
  kLlamaRpc = 1u << 15,
  kAllLlamaFlags = (1u << 16) - 1,
};

// What each command acts on.
inline constexpr uint32_t kPlanLlamaFlags = kLlamaCtx | kLlamaParallel | kLlamaBatch | kLlamaUbatch |
                                            kLlamaGpuLayers | kLlamaKvType | kLlamaFlashAttn | kLlamaThreads |
                                            kLlamaRpc;
inline constexpr uint32_t kRunLlamaFlags = kLlamaCtx | kLlamaBatch | kLlamaUbatch | kLlamaGpuLayers |
                                           kLlamaKvType | kLlamaFlashAttn | kLlamaThreads | kLlamaMmap |
                                           kLlamaChatTemplate | kLlamaSpeculative | kLlamaRpc;
inline constexpr uint32_t kServeLlamaFlags = kAllLlamaFlags;
inline constexpr uint32_t kBenchLlamaFlags =
    kLlamaBatch | kLlamaUbatch | kLlamaGpuLayers | kLlamaKvType | kLlamaThreads | kLlamaMmap | kLlamaRpc;

// The values given; unset (or empty) = the command's default.
struct LlamaFlags {
  std::optional<uint32_t> ctx;
  std::optional<uint32_t> parallel;
  std::optional<uint32_t> batch;
  std::optional<uint32_t> ubatch;
  std::optional<int> gpu_layers;
  std::string kv_type;
  std::string flash_attn;  // on|off|auto
  int threads = 0;
  bool no_mmap = false;
  std::string chat_template_file;
  std::string reasoning_format;
  std::string cache_ram;  // a size, a bare number of MiB (llama-server's unit), 0 or -1
  bool no_prompt_cache = false;
  std::optional<bool> kv_unified;
  std::optional<int> prefill_chunk;
  std::vector<std::string> rpc;
  SpeculativeFlags speculative;

  bool operator==(const LlamaFlags&) const = default;
};

// Declares the flags in `which` on `cmd`, bound to `flags`. Their help names llama.cpp's spellings.
void add_llama_flags(CLI::App& cmd, LlamaFlags& flags, uint32_t which);

// Appends " (default: TEXT)" to the help of `cmd`'s option `name` (a command's own default).
void note_default(CLI::App& cmd, const std::string& name, const std::string& text);

// Sets the LlamaOptions the given flags in `which` stand for (not --threads: the factory's
// intra_op_threads), then validate_llama_options. InvalidArgument names the flag.
Status apply(const LlamaFlags& flags, model::LlamaOptions& options, uint32_t which = kAllLlamaFlags);

// --cache-ram's value in MiB: "-1", "0", a bare number of MiB or a size with a unit.
Result<int> parse_cache_ram_mib(const std::string& text);

// llama.cpp's multi-letter short flags (-ub, -ngl, -np, -fa, -cram, -kvu, -md), which CLI11 cannot
// declare: returns `arg` with such a flag as its long name, any other argument unchanged.
const char* llama_cpp_alias(const char* arg);

}  // namespace gantry::cli

#include "gantry/backend/llama/measure.h"

#include <ggml-backend.h>
#include <llama.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <map>

#include "gantry/backend/llama/context.h"
#include "gantry/backend/llama/weights.h"
#include "gantry/hw/registry.h"

// llama.cpp exports its per-buffer-type memory breakdown from a staging header (src/llama-ext.h) that
// it does not install. These declarations mirror that header at the pinned commit (de3ff815).
struct llama_memory_breakdown_data {
  size_t model = 0;
  size_t context = 0;
  size_t compute = 0;
};
using llama_memory_breakdown = std::map<ggml_backend_buffer_type_t, llama_memory_breakdown_data>;
LLAMA_API llama_memory_breakdown llama_get_memory_breakdown(const struct llama_context* ctx);

namespace gantry::llama {
namespace {

// Host buffers (CPU, CPU_Mapped, CPU_REPACK, CUDA_Host pinned memory) are the host's memory: "cpu".
// Device buffers are named by their ggml device: "CUDA1" -> "cuda:1"; an RPC server's device by the id the
// model's remote devices give it ("rpc:0").
std::string device_of(ggml_backend_buffer_type_t buft, const RemoteDevices& remote) {
  if (ggml_backend_buft_is_host(buft)) return "cpu";
  ggml_backend_dev_t dev = ggml_backend_buft_get_device(buft);
  if (std::string id = remote.id_of(dev); !id.empty()) return id;
  const std::string name = dev ? ggml_backend_dev_name(dev) : ggml_backend_buft_name(buft);
  if (name.rfind("CUDA", 0) == 0 && name.size() > 4 && std::isdigit(static_cast<unsigned char>(name[4]))) {
    return hw::memory_device_id(hw::kFamilyCuda, std::stoi(name.substr(4)));
  }
  std::string id;
  for (char ch : name) id += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return id;
}

}  // namespace

uint64_t resident_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return static_cast<uint64_t>(resident) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

MemoryMeasurement context_memory(const LlamaContext& ctx) {
  MemoryMeasurement m;
  const LlamaWeights& weights = ctx.weights();
  m.n_ctx = ctx.n_ctx();
  m.model_tensor_bytes = weights.size_bytes();
  std::map<std::string, DeviceBytes> by_dev;
  for (const auto& [buft, mb] : llama_get_memory_breakdown(ctx.raw())) {
    auto& d = by_dev[device_of(buft, weights.remote())];
    d.model_bytes += mb.model;
    d.kv_bytes += mb.context;
    d.compute_bytes += mb.compute;
    d.buffer_types.push_back(ggml_backend_buft_name(buft));
  }
  // The output buffer is not in the breakdown. llama.cpp (llama_context::output_reserve) sizes it at
  // context creation for one output per sequence: n_vocab logits, plus n_embd_out floats with
  // embeddings, in host memory (the output device's pinned host buffer or plain CPU memory).
  uint64_t floats = static_cast<uint64_t>(weights.n_vocab());
  if (ctx.options().embeddings) floats += static_cast<uint64_t>(llama_model_n_embd_out(weights.raw()));
  by_dev["cpu"].output_bytes += floats * ctx.n_seq_max() * sizeof(float);

  for (auto& [id, d] : by_dev) {
    d.device = id;
    d.total_bytes = d.model_bytes + d.kv_bytes + d.compute_bytes + d.output_bytes;
    m.model_bytes += d.model_bytes;
    m.kv_bytes += d.kv_bytes;
    m.compute_bytes += d.compute_bytes;
    m.output_bytes += d.output_bytes;
    m.devices.push_back(d);
  }
  m.total_bytes = m.model_bytes + m.kv_bytes + m.compute_bytes + m.output_bytes;
  return m;
}

Result<MemoryMeasurement> measure_memory(const std::string& path, const LlamaSettings& settings,
                                         bool warm_up) {
  const uint64_t rss_before = resident_bytes();
  GANTRY_ASSIGN_OR_RETURN(auto weights, LlamaWeights::load(path, settings.load));
  GANTRY_ASSIGN_OR_RETURN(auto ctx, LlamaContext::create(weights, settings.context));
  MemoryMeasurement m = context_memory(*ctx);
  if (warm_up) {
    llama_token bos = llama_vocab_bos(weights->vocab());
    if (bos < 0) bos = 0;
    llama_batch b = llama_batch_get_one(&bos, 1);
    GANTRY_RETURN_IF_ERROR(ctx->decode(b).with_context("warm-up decode while measuring '" + path + "'"));
    ctx->clear();
  }
  m.rss_before_bytes = rss_before;
  m.rss_after_bytes = resident_bytes();
  m.rss_growth_bytes = static_cast<int64_t>(m.rss_after_bytes) - static_cast<int64_t>(m.rss_before_bytes);
  return m;
}

Result<MemoryMeasurement> dry_run_memory(const std::string& path, const LlamaSettings& settings) {
  LoadOptions lo = settings.load;
  lo.dry_run = true;
  GANTRY_ASSIGN_OR_RETURN(auto weights, LlamaWeights::load(path, lo));
  GANTRY_ASSIGN_OR_RETURN(auto ctx, LlamaContext::create(weights, settings.context));
  return context_memory(*ctx);
}

}  // namespace gantry::llama

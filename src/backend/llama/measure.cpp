#include "gantry/backend/llama/measure.h"

#include <ggml-backend.h>
#include <llama.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <regex>

#include "backend/llama/log_bridge.h"
#include "gantry/backend/llama/context.h"
#include "gantry/backend/llama/weights.h"

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

std::string device_of(ggml_backend_buffer_type_t buft) {
  ggml_backend_dev_t dev = ggml_backend_buft_get_device(buft);
  if (dev) return ggml_backend_dev_name(dev);
  return ggml_backend_buft_is_host(buft) ? "CPU" : ggml_backend_buft_name(buft);
}

// "llama_context:        CPU  output buffer size =     0.12 MiB" -> (buffer name, bytes rounded to 0.01 MiB)
bool parse_output_line(const std::string& line, std::string* name, double* mib) {
  static const std::regex re(R"((\S+)\s+output buffer size\s*=\s*([0-9.]+) MiB)");
  std::smatch m;
  if (!std::regex_search(line, m, re)) return false;
  *name = m[1];
  *mib = std::stod(m[2]);
  return true;
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

Result<MemoryMeasurement> measure_memory(const MeasureOptions& o) {
  MemoryMeasurement m;
  m.rss_before_bytes = resident_bytes();
  LoadOptions lo;
  lo.placement = o.placement;
  GANTRY_ASSIGN_OR_RETURN(auto weights, LlamaWeights::load(o.path, lo));
  ContextOptions co;
  co.n_ctx = o.n_ctx;
  co.n_seq_max = o.n_seq;
  co.n_batch = o.n_batch;
  co.n_ubatch = o.n_ubatch;
  co.type_k = co.type_v = o.kv_type;
  co.flash_attn = o.flash_attn;
  co.kv_unified = o.kv_unified;
  co.n_threads = o.n_threads;
  LogCapture capture;
  GANTRY_ASSIGN_OR_RETURN(auto ctx, LlamaContext::create(weights, co));
  m.n_ctx = ctx->n_ctx();
  m.model_tensor_bytes = weights->size_bytes();

  std::map<std::string, DeviceBytes> by_dev;
  for (const auto& [buft, mb] : llama_get_memory_breakdown(ctx->raw())) {
    auto& d = by_dev[device_of(buft)];
    d.model_bytes += mb.model;
    d.kv_bytes += mb.context;
    d.compute_bytes += mb.compute;
    d.buffer_types.push_back(ggml_backend_buft_name(buft));
  }
  // The output buffer is not in the breakdown. llama.cpp sizes it at context creation as
  // (n_vocab [+ n_embd when embeddings]) * n_seq_max floats and logs it; take the exact formula and
  // check it against the logged size (printed to 0.01 MiB).
  const uint64_t formula = static_cast<uint64_t>(weights->n_vocab()) * ctx->n_seq_max() * sizeof(float);
  std::string out_name = "CPU";
  double out_mib = -1;
  for (const auto& line : capture.lines()) {
    if (parse_output_line(line, &out_name, &out_mib)) break;
  }
  uint64_t output = formula;
  if (out_mib >= 0 && std::abs(out_mib - formula / 1048576.0) > 0.0051) {
    output = static_cast<uint64_t>(out_mib * 1048576.0);  // llama.cpp changed its formula: trust its log
  }
  std::string out_dev = "CPU";
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    ggml_backend_dev_t dev = ggml_backend_dev_get(i);
    if (out_name.rfind(ggml_backend_dev_name(dev), 0) == 0) out_dev = ggml_backend_dev_name(dev);
  }
  by_dev[out_dev].output_bytes += output;

  if (o.warm_up) {
    llama_token bos = llama_vocab_bos(weights->vocab());
    if (bos < 0) bos = 0;
    llama_batch b = llama_batch_get_one(&bos, 1);
    GANTRY_RETURN_IF_ERROR(ctx->decode(b).with_context("warm-up decode while measuring '" + o.path + "'"));
    ctx->clear();
  }
  m.rss_after_bytes = resident_bytes();
  m.rss_growth_bytes = static_cast<int64_t>(m.rss_after_bytes) - static_cast<int64_t>(m.rss_before_bytes);

  for (auto& [name, d] : by_dev) {
    d.device = name;
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

}  // namespace gantry::llama

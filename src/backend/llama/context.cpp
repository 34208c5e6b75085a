#include "gantry/backend/llama/context.h"

#include <fmt/format.h>
#include <ggml-backend.h>
#include <llama.h>

#include <thread>

#include "backend/llama/log_bridge.h"
#include "backend/llama/runtime_init.h"
#include "gantry/backend/llama/settings.h"
#include "gantry/backend/threads.h"
#include "gantry/core/checked_math.h"
#include "gantry/core/log.h"
#include "gantry/plan/plan_json.h"
#include "gantry/plan/planner.h"

namespace gantry::llama {
namespace {

ggml_type to_ggml(KvType t) {
  switch (t) {
    case KvType::kF32:
      return GGML_TYPE_F32;
    case KvType::kF16:
      return GGML_TYPE_F16;
    case KvType::kBF16:
      return GGML_TYPE_BF16;
    case KvType::kQ8_0:
      return GGML_TYPE_Q8_0;
    case KvType::kQ4_0:
      return GGML_TYPE_Q4_0;
    case KvType::kQ4_1:
      return GGML_TYPE_Q4_1;
    case KvType::kQ5_0:
      return GGML_TYPE_Q5_0;
    case KvType::kQ5_1:
      return GGML_TYPE_Q5_1;
    case KvType::kIQ4_NL:
      return GGML_TYPE_IQ4_NL;
  }
  return GGML_TYPE_F16;
}

llama_flash_attn_type to_llama(FlashAttn f) {
  switch (f) {
    case FlashAttn::kOn:
      return LLAMA_FLASH_ATTN_TYPE_ENABLED;
    case FlashAttn::kOff:
      return LLAMA_FLASH_ATTN_TYPE_DISABLED;
    case FlashAttn::kAuto:
      break;
  }
  return LLAMA_FLASH_ATTN_TYPE_AUTO;
}

enum llama_pooling_type to_llama(Pooling p) {
  switch (p) {
    case Pooling::kNone:
      return LLAMA_POOLING_TYPE_NONE;
    case Pooling::kMean:
      return LLAMA_POOLING_TYPE_MEAN;
    case Pooling::kCls:
      return LLAMA_POOLING_TYPE_CLS;
    case Pooling::kLast:
      return LLAMA_POOLING_TYPE_LAST;
    case Pooling::kRank:
      return LLAMA_POOLING_TYPE_RANK;
    case Pooling::kModel:
      break;
  }
  return LLAMA_POOLING_TYPE_UNSPECIFIED;
}

using ThreadpoolNew = ggml_threadpool_t (*)(ggml_threadpool_params*);
using ThreadpoolFree = void (*)(ggml_threadpool_t);

// The CPU backend's threadpool functions, found through its registry (works with GGML_BACKEND_DL).
template <typename Fn>
Fn cpu_proc(const char* name) {
  ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  if (!cpu) return nullptr;
  return reinterpret_cast<Fn>(ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(cpu), name));
}

ggml_threadpool_t make_threadpool(int n_threads, int poll) {
  auto fn = cpu_proc<ThreadpoolNew>("ggml_threadpool_new");
  if (!fn) return nullptr;
  ggml_threadpool_params p = ggml_threadpool_params_default(n_threads);
  p.poll = static_cast<uint32_t>(poll);
  return fn(&p);
}

}  // namespace

namespace {
// The KV cache llama.cpp is about to allocate for `o` (every layer's K and V rows for n_ctx cells), against
// what the devices have free: a context of 2^31 tokens (`bench -n 2147483647`) is refused here, before
// llama.cpp tries to allocate gigabytes and fails (or is killed) half-way.
Status check_kv_fits(const LlamaWeights& w, const ContextOptions& o) {
  if (o.n_ctx > plan::kMaxContext) {
    return InvalidArgument(fmt::format(
        "a context of {} tokens is more than the {} Gantry accepts (llama.cpp counts cells in 32 bits)",
        o.n_ctx, plan::kMaxContext));
  }
  const llama_model* m = w.raw();
  const int n_head = llama_model_n_head(m), n_head_kv = llama_model_n_head_kv(m);
  if (n_head <= 0 || n_head_kv <= 0) return Status::Ok();  // no attention cache (recurrent models)
  const uint64_t width = static_cast<uint64_t>(llama_model_n_embd(m) / n_head) * n_head_kv;
  auto k = kv_row_bytes(o.type_k, width);
  auto v = kv_row_bytes(o.type_v, width);
  if (!k.ok() || !v.ok()) return Status::Ok();  // llama.cpp explains an unusable type itself
  const uint64_t need =
      saturating_product(saturating_add(*k, *v), static_cast<uint64_t>(llama_model_n_layer(m)), o.n_ctx);
  uint64_t free = 0;
  for (const auto& d : llama_plan_devices()) free = saturating_add(free, plan::device_free_bytes(d));
  if (free > 0 && need > free) {
    return ResourceExhausted(fmt::format(
        "a context of {} tokens needs {} of KV cache for '{}', but this machine has {} free; use a smaller "
        "context (--ctx, or -p/-n for bench)",
        o.n_ctx, plan::human_bytes(need), w.path(), plan::human_bytes(free)));
  }
  return Status::Ok();
}
}  // namespace

Result<std::unique_ptr<LlamaContext>> LlamaContext::create(std::shared_ptr<const LlamaWeights> weights,
                                                           const ContextOptions& options) {
  if (!weights) return InvalidArgument("LlamaContext::create: no model");
  ensure_llama_runtime();
  ContextOptions o = options;
  if (o.n_threads < 0 || o.n_threads_batch < 0)
    return InvalidArgument("thread counts must be >= 0 (0 = default)");
  o.n_threads = o.n_threads == 0 ? backend::hardware_threads() : backend::cap_threads(o.n_threads, "threads");
  o.n_threads_batch =
      o.n_threads_batch == 0 ? o.n_threads : backend::cap_threads(o.n_threads_batch, "batch threads");
  if (o.n_batch == 0 || o.n_ubatch == 0) return InvalidArgument("n_batch and n_ubatch must be >= 1");
  if (o.n_ubatch > o.n_batch) o.n_ubatch = o.n_batch;
  if (o.n_seq_max == 0 || o.n_seq_max > llama_max_parallel_sequences()) {
    return InvalidArgument("parallel sequences must be in 1.." +
                           std::to_string(llama_max_parallel_sequences()) + ", got " +
                           std::to_string(o.n_seq_max));
  }
  if (o.n_ctx == 0) o.n_ctx = static_cast<uint32_t>(std::max(1, weights->n_ctx_train()));
  if (o.n_ctx < o.n_seq_max) {
    return InvalidArgument("context of " + std::to_string(o.n_ctx) + " cells cannot hold " +
                           std::to_string(o.n_seq_max) + " sequences");
  }

  GANTRY_RETURN_IF_ERROR(check_kv_fits(*weights, o));

  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = o.n_ctx;
  cp.n_batch = o.n_batch;
  cp.n_ubatch = o.n_ubatch;
  cp.n_seq_max = o.n_seq_max;
  cp.n_threads = o.n_threads;
  cp.n_threads_batch = o.n_threads_batch;
  cp.type_k = to_ggml(o.type_k);
  cp.type_v = to_ggml(o.type_v);
  cp.flash_attn_type = to_llama(o.flash_attn);
  cp.kv_unified = o.kv_unified;
  cp.embeddings = o.embeddings;
  cp.pooling_type = to_llama(o.pooling);
  cp.no_perf = true;

  std::unique_ptr<LlamaContext> c(new LlamaContext());
  c->weights_ = std::move(weights);
  c->options_ = o;

  LogCapture capture(/*quiet=*/true);
  c->ctx_ = llama_init_from_model(c->weights_->raw(), cp);
  if (Status lost = c->weights_->remote_health(); !lost.ok()) {
    return lost.with_context("creating a context for '" + c->weights_->path() + "'");  // ~c frees it
  }
  if (!c->ctx_) {
    const std::string why = capture.problems();
    const bool memory = why.find("alloc") != std::string::npos || why.find("memory") != std::string::npos;
    return Status(memory ? StatusCode::kResourceExhausted : StatusCode::kInvalidArgument,
                  "llama.cpp could not create a context for '" + c->weights_->path() + "' (n_ctx " +
                      std::to_string(o.n_ctx) + ", " + std::to_string(o.n_seq_max) + " sequences, KV " +
                      std::string(kv_type_name(o.type_k)) + ")" + (why.empty() ? "" : ": " + why));
  }
  c->options_.n_ctx = llama_n_ctx(c->ctx_);
  if (o.threadpool) {
    if (o.threadpool_poll < 0 || o.threadpool_poll > 100)
      return InvalidArgument("threadpool_poll must be in 0..100");
    c->threadpool_ = make_threadpool(o.n_threads, o.threadpool_poll);
    if (o.n_threads_batch != o.n_threads)
      c->threadpool_batch_ = make_threadpool(o.n_threads_batch, o.threadpool_poll);
    if (c->threadpool_) {
      llama_attach_threadpool(c->ctx_, static_cast<ggml_threadpool_t>(c->threadpool_),
                              static_cast<ggml_threadpool_t>(c->threadpool_batch_));
    }
  }
  return c;
}

LlamaContext::~LlamaContext() {
  if (ctx_) llama_free(ctx_);
  auto free_fn = cpu_proc<ThreadpoolFree>("ggml_threadpool_free");
  if (free_fn) {
    if (threadpool_) free_fn(static_cast<ggml_threadpool_t>(threadpool_));
    if (threadpool_batch_) free_fn(static_cast<ggml_threadpool_t>(threadpool_batch_));
  }
}

bool LlamaContext::abort_trampoline(void* self) {
  auto* c = static_cast<LlamaContext*>(self);
  return c->abort_check_ && c->abort_check_();
}

void LlamaContext::set_abort_check(std::function<bool()> check) {
  const bool had = static_cast<bool>(abort_check_);
  abort_check_ = std::move(check);
  if (abort_check_ && !had) llama_set_abort_callback(ctx_, &LlamaContext::abort_trampoline, this);
  if (!abort_check_ && had) llama_set_abort_callback(ctx_, nullptr, nullptr);
}

uint32_t LlamaContext::n_ctx() const { return llama_n_ctx(ctx_); }
uint32_t LlamaContext::n_ctx_seq() const { return llama_n_ctx_seq(ctx_); }
uint32_t LlamaContext::n_batch() const { return llama_n_batch(ctx_); }
uint32_t LlamaContext::n_seq_max() const { return llama_n_seq_max(ctx_); }

Status LlamaContext::decode(const llama_batch& batch) {
  const int32_t rc = llama_decode(ctx_, batch);
  // A lost RPC server: whatever came back from it is made up (backend/llama/rpc_link.h).
  GANTRY_RETURN_IF_ERROR(weights_->remote_health());
  switch (rc) {
    case 0:
      return Status::Ok();
    case 1:
      return ResourceExhausted("out of KV cache space: no free slot for " + std::to_string(batch.n_tokens) +
                               " tokens in a context of " + std::to_string(n_ctx()) +
                               " cells (use a larger context or fewer parallel sequences)");
    case 2:
      return Cancelled("decode aborted");
    case -1:
      return InvalidArgument("llama_decode rejected the batch as invalid (see the log)");
    default:
      return Internal("llama_decode failed with code " + std::to_string(rc));
  }
}

void LlamaContext::share_threads(const LlamaContext& owner) {
  if (!owner.threadpool_) return;
  llama_attach_threadpool(ctx_, static_cast<ggml_threadpool_t>(owner.threadpool_),
                          static_cast<ggml_threadpool_t>(owner.threadpool_batch_));
}

void LlamaContext::remove_sequence(int32_t seq) { llama_memory_seq_rm(llama_get_memory(ctx_), seq, -1, -1); }

void LlamaContext::copy_sequence(int32_t src, int32_t dst) {
  llama_memory_seq_cp(llama_get_memory(ctx_), src, dst, -1, -1);
}

int32_t LlamaContext::sequence_pos_max(int32_t seq) const {
  return llama_memory_seq_pos_max(llama_get_memory(ctx_), seq);
}

void LlamaContext::clear() { llama_memory_clear(llama_get_memory(ctx_), true); }

}  // namespace gantry::llama

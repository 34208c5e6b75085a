#include "gantry/backend/llama/speed.h"

#include <llama.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "gantry/backend/llama/context.h"

namespace gantry::llama {
namespace {

// llama-bench's token choice: BOS first when the vocabulary adds one, then std::rand().
llama_token first_token(const LlamaWeights& w) {
  return llama_vocab_get_add_bos(w.vocab()) ? llama_vocab_bos(w.vocab()) : std::rand() % w.n_vocab();
}

Status run_prompt(LlamaContext& ctx, int n_prompt, int n_batch, llama_batch& batch) {
  const auto& w = ctx.weights();
  int done = 0;
  while (done < n_prompt) {
    const int n = std::min(n_prompt - done, n_batch);
    batch.n_tokens = n;
    for (int i = 0; i < n; ++i) {
      batch.token[i] = (done == 0 && i == 0) ? first_token(w) : std::rand() % w.n_vocab();
      batch.pos[i] = done + i;
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = 0;
      batch.logits[i] = i == n - 1;
    }
    GANTRY_RETURN_IF_ERROR(ctx.decode(batch));
    done += n;
  }
  llama_synchronize(ctx.raw());
  return Status::Ok();
}

Status run_gen(LlamaContext& ctx, int n_gen, llama_batch& batch) {
  const auto& w = ctx.weights();
  llama_token tok = first_token(w);
  const llama_pos start = ctx.sequence_pos_max(0) + 1;
  for (int i = 0; i < n_gen; ++i) {
    batch.n_tokens = 1;
    batch.token[0] = tok;
    batch.pos[0] = start + i;
    batch.n_seq_id[0] = 1;
    batch.seq_id[0][0] = 0;
    batch.logits[0] = true;
    GANTRY_RETURN_IF_ERROR(ctx.decode(batch));
    tok = std::rand() % w.n_vocab();
  }
  llama_synchronize(ctx.raw());
  return Status::Ok();
}

}  // namespace

Result<std::vector<SpeedResult>> measure_speed(std::shared_ptr<const LlamaWeights> weights,
                                               const SpeedOptions& o) {
  if (o.n_prompt < 0 || o.n_gen < 0 || (o.n_prompt == 0 && o.n_gen == 0)) {
    return InvalidArgument("need n_prompt > 0 or n_gen > 0 (and neither negative)");
  }
  if (o.reps < 1) return InvalidArgument("reps must be >= 1");
  std::vector<SpeedResult> out;
  for (int kind = 0; kind < 2; ++kind) {
    const int n_prompt = kind == 0 ? o.n_prompt : 0;
    const int n_gen = kind == 1 ? o.n_gen : 0;
    if (n_prompt + n_gen == 0) continue;
    ContextOptions co;
    co.n_ctx = static_cast<uint32_t>(n_prompt + n_gen);
    co.n_batch = o.n_batch;
    co.n_ubatch = o.n_ubatch;
    co.n_threads = o.threads;
    co.type_k = co.type_v = o.kv_type;
    co.flash_attn = o.flash_attn;
    co.threadpool = o.threadpool;
    GANTRY_ASSIGN_OR_RETURN(auto ctx, LlamaContext::create(weights, co));
    llama_batch batch = llama_batch_init(static_cast<int32_t>(std::max<uint32_t>(o.n_batch, 1)), 0, 1);
    auto run = [&](int np, int ng) -> Status {
      if (np > 0) GANTRY_RETURN_IF_ERROR(run_prompt(*ctx, np, static_cast<int>(o.n_batch), batch));
      if (ng > 0) GANTRY_RETURN_IF_ERROR(run_gen(*ctx, ng, batch));
      return Status::Ok();
    };
    SpeedResult r;
    r.n_prompt = n_prompt;
    r.n_gen = n_gen;
    r.test = n_prompt > 0 ? "pp" + std::to_string(n_prompt) : "tg" + std::to_string(n_gen);
    ctx->clear();
    Status st = run(n_prompt, n_gen > 0 ? 1 : 0);  // warm-up (llama-bench: whole prompt, one gen token)
    for (int i = 0; i < o.reps && st.ok(); ++i) {
      llama_memory_clear(llama_get_memory(ctx->raw()), false);
      const auto t0 = std::chrono::steady_clock::now();
      st = run(n_prompt, n_gen);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      r.samples_ts.push_back((n_prompt + n_gen) / s);
    }
    llama_batch_free(batch);
    if (!st.ok()) return st.with_context("benchmark " + r.test + " on '" + weights->path() + "'");
    const double n = static_cast<double>(r.samples_ts.size());
    r.avg_ts = std::accumulate(r.samples_ts.begin(), r.samples_ts.end(), 0.0) / n;
    if (r.samples_ts.size() > 1) {
      double ss = 0;
      for (double x : r.samples_ts) ss += (x - r.avg_ts) * (x - r.avg_ts);
      r.stddev_ts = std::sqrt(ss / (n - 1));
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace gantry::llama

// Speculative decoding in the BatchEngine: greedy generation on spec-target-f32.gguf with and without its
// draft spec-draft-q8_0.gguf (scripts/models/gguf_speculative.py: an F32 12-layer target, memory-bound on a
// CPU as large models are, whose deeper layers write little into the residual stream; the draft is its
// first two layers with its embeddings and output head, Q8_0), one sequence at a time, one thread, rounds
// interleaved (plain, speculative, speculative, plain, ...). Every round generates the same prompts; each
// side must give the same tokens every round, and the two sides the same tokens up to where the target's
// two best logits lie within 0.01 of each other (llama.cpp computes a row in a batch and a row alone with
// different rounding, which can tip such a near-tie either way; anything else exits 1). Prints per round
// tok/s of both, the draft's acceptance rate, and
//   BENCH speculative-speedup ratio=<median speculative tok/s / median plain tok/s>   (goal > 1)
// Env: ROUNDS (4), TOKENS (96 per prompt), DRAFT_MAX (8), THREADS (1).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gantry/backend/llama/batch_engine.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace gantry;
using namespace gantry::llama;

int env_int(const char* name, int def) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : def;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

const std::vector<std::string> kPrompts = {
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain how a refrigerator works to a ten year old child.",
    "List the steps to bake a loaf of sourdough bread at home.",
    "Summarise the plot of a detective novel set in a small mountain village.",
};

struct Run {
  double tok_per_s = 0;
  std::vector<std::vector<int32_t>> tokens;
};

backend::GenerationRequest request(const std::string& prompt, int n) {
  backend::GenerationRequest q;
  q.prompt = prompt;
  q.max_tokens = n;
  q.sampling.temperature = 0;
  q.cache_prompt = false;  // every round evaluates its prompts alike
  return q;
}

// Where the two engines' texts first differ, the smaller gap between the two best logits either saw
// there (from a rerun that records them); -1 when they do not differ.
Result<double> tie_gap(BatchEngine& plain, BatchEngine& spec, const std::string& prompt, int n) {
  auto q = request(prompt, n);
  q.n_top_logits = 2;
  GANTRY_ASSIGN_OR_RETURN(auto a, plain.generate(q));
  GANTRY_ASSIGN_OR_RETURN(auto b, spec.generate(q));
  size_t i = 0;
  while (i < a.tokens.size() && i < b.tokens.size() && a.tokens[i] == b.tokens[i]) ++i;
  if (i == a.tokens.size() && i == b.tokens.size()) return -1.0;
  double gap = 1e9;
  for (const auto* r : {&a, &b}) {
    if (i < r->top_logits.size() && r->top_logits[i].size() == 2)
      gap = std::min(gap, static_cast<double>(r->top_logits[i][0].second - r->top_logits[i][1].second));
  }
  return gap;
}

Result<Run> generate(BatchEngine& e, int n) {
  Run r;
  size_t total = 0;
  const auto t0 = Clock::now();
  for (const auto& p : kPrompts) {
    const auto q = request(p, n);
    GANTRY_ASSIGN_OR_RETURN(auto g, e.generate(q));
    total += g.tokens.size();
    r.tokens.push_back(g.tokens);
  }
  r.tok_per_s = static_cast<double>(total) / std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

}  // namespace

int main() {
  const std::string dir = std::string(GANTRY_DEPS_DIR) + "/models/";
  const std::string target_path = dir + "spec-target-f32.gguf", draft_path = dir + "spec-draft-q8_0.gguf";
  for (const auto& f : {target_path, draft_path}) {
    if (!std::filesystem::exists(f)) {
      std::fprintf(stderr, "speculative_bench: %s is missing (run make setup)\n", f.c_str());
      return 1;
    }
  }
  const int rounds = env_int("ROUNDS", 4), tokens = env_int("TOKENS", 96), threads = env_int("THREADS", 1);
  auto target = LlamaWeights::load(target_path);
  auto draft = LlamaWeights::load(draft_path);
  if (!target.ok() || !draft.ok()) {
    std::fprintf(stderr, "speculative_bench: %s\n",
                 (target.ok() ? draft.status() : target.status()).to_string().c_str());
    return 1;
  }
  ContextOptions c;
  c.n_ctx = 1024;
  c.n_seq_max = 1;
  c.n_threads = threads;
  SpeculativeOptions s;
  s.draft = *draft;
  s.draft_context = c;
  s.draft_context.threadpool = false;
  s.draft_max = env_int("DRAFT_MAX", 8);
  auto plain = BatchEngine::create(*target, c);
  auto spec = BatchEngine::create(*target, c, {}, s);
  if (!plain.ok() || !spec.ok()) {
    std::fprintf(stderr, "speculative_bench: %s\n",
                 (plain.ok() ? spec.status() : plain.status()).to_string().c_str());
    return 1;
  }
  // Warm-up: page the weights in, grow the buffers.
  if (!generate(**plain, 8).ok() || !generate(**spec, 8).ok()) return 1;
  std::vector<double> with, without;
  std::vector<std::vector<int32_t>> reference[2];  // per side: plain, speculative
  for (int r = 0; r < rounds; ++r) {
    for (int side = 0; side < 2; ++side) {
      const bool speculative = (r + side) % 2 == 1;
      const EngineStats before = (*spec)->stats();
      auto run = generate(speculative ? **spec : **plain, tokens);
      if (!run.ok()) {
        std::fprintf(stderr, "speculative_bench: %s\n", run.status().to_string().c_str());
        return 1;
      }
      auto& ref = reference[speculative ? 1 : 0];
      if (ref.empty()) ref = run->tokens;
      if (run->tokens != ref) {
        std::fprintf(stderr, "speculative_bench: round %d (%s) generated other tokens than its first round\n",
                     r + 1, speculative ? "speculative" : "plain");
        return 1;
      }
      (speculative ? with : without).push_back(run->tok_per_s);
      if (speculative) {
        const EngineStats after = (*spec)->stats();
        const auto drafted = after.draft_tokens - before.draft_tokens;
        const auto accepted = after.draft_accepted - before.draft_accepted;
        std::printf("speculative round %d: %.2f tok/s, %llu of %llu drafted tokens accepted (%.1f%%)\n",
                    r + 1, run->tok_per_s, static_cast<unsigned long long>(accepted),
                    static_cast<unsigned long long>(drafted), drafted ? 100.0 * accepted / drafted : 0.0);
      } else {
        std::printf("plain round %d: %.2f tok/s\n", r + 1, run->tok_per_s);
      }
    }
  }
  size_t same = 0;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    if (reference[0][i] == reference[1][i]) {
      ++same;
      continue;
    }
    auto gap = tie_gap(**plain, **spec, kPrompts[i], tokens);
    if (!gap.ok() || *gap < 0 || *gap > 0.01) {
      std::fprintf(
          stderr, "speculative_bench: prompt %zu: the draft changed the greedy text (%s)\n", i + 1,
          gap.ok() ? ("logit gap " + std::to_string(*gap)).c_str() : gap.status().to_string().c_str());
      return 1;
    }
    std::printf("prompt %zu: the texts part at a near-tie (the two best logits %.4f apart)\n", i + 1, *gap);
  }
  std::printf("%zu of %zu greedy texts identical with and without the draft\n", same, kPrompts.size());
  const EngineStats st = (*spec)->stats();
  std::printf(
      "speculative decoding: target spec-target-f32 (12 layers, F32), draft spec-draft-q8_0 (its first 2 "
      "layers), "
      "draft_max %d, %d thread(s), %zu prompts x %d tokens; acceptance %.1f%% overall; median %.2f vs %.2f "
      "tok/s\n",
      s.draft_max, threads, kPrompts.size(), tokens,
      st.draft_tokens ? 100.0 * static_cast<double>(st.draft_accepted) / static_cast<double>(st.draft_tokens)
                      : 0.0,
      median(with), median(without));
  std::printf("BENCH speculative-speedup ratio=%.3f\n", median(with) / median(without));
  return 0;
}

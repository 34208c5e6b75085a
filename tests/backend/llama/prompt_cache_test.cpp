// The BatchEngine's prompt cache on the generated tiny model: a request reuses the longest common
// prefix an idle slot holds and evaluates only the rest (counted by EngineStats), and its greedy
// output is token for token what a fresh engine gives.
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/llama/llama_test_util.h"
#include "gantry/backend/llama/batch_engine.h"

namespace gantry::llama {
namespace {

using backend::GenerationRequest;
using backend::GenerationResult;

ContextOptions ctx_opts(uint32_t n_ctx, uint32_t n_seq) {
  ContextOptions o;
  o.n_ctx = n_ctx;
  o.n_seq_max = n_seq;
  o.n_threads = 1;
  o.threadpool = false;
  return o;
}

GenerationRequest greedy_tokens(std::vector<int32_t> tokens, int n) {
  GenerationRequest r;
  r.tokens = std::move(tokens);
  r.max_tokens = n;
  r.sampling.temperature = 0;
  return r;
}

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class PromptCache : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = testing::tiny_model();
    ASSERT_TRUE(weights_) << "cannot load " << testing::tiny_model_path();
    auto sys = weights_->tokenize(
        "You are a helpful assistant. Answer briefly and precisely, cite nothing, and keep the tone "
        "friendly. The user is asking about the weather, gardens, trains and small programs.",
        true, true);
    ASSERT_TRUE(sys.ok());
    system_ = *sys;
    auto a = weights_->tokenize(" User: tell me about apples and pears.", false, true);
    auto b = weights_->tokenize(" Question: which trains leave at noon?", false, true);
    ASSERT_TRUE(a.ok() && b.ok());
    suffix_a_ = *a;
    suffix_b_ = *b;
    // Tokens both suffixes start with (a word-boundary marker) belong to the shared part.
    while (!suffix_a_.empty() && !suffix_b_.empty() && suffix_a_.front() == suffix_b_.front()) {
      system_.push_back(suffix_a_.front());
      suffix_a_.erase(suffix_a_.begin());
      suffix_b_.erase(suffix_b_.begin());
    }
    ASSERT_FALSE(suffix_a_.empty() || suffix_b_.empty());
    ASSERT_NE(suffix_a_.front(), suffix_b_.front()) << "the suffixes must diverge at their first token";
  }

  std::unique_ptr<BatchEngine> engine(uint32_t n_ctx = 1024, uint32_t n_seq = 1) {
    auto e = BatchEngine::create(weights_, ctx_opts(n_ctx, n_seq));
    EXPECT_TRUE(e.ok()) << e.status().to_string();
    return e.ok() ? std::move(*e) : nullptr;
  }

  // The greedy output of `tokens` on an engine that has never seen anything.
  GenerationResult fresh(const std::vector<int32_t>& tokens, int n) {
    auto e = engine();
    auto r = e->generate(greedy_tokens(tokens, n));
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->n_cached_tokens, 0);
    EXPECT_EQ(e->stats().prompt_tokens_decoded, tokens.size());
    return *r;
  }

  // Runs `tokens` on `e`; checks the prompt tokens it evaluated match the result's cached count.
  GenerationResult run(BatchEngine& e, const std::vector<int32_t>& tokens, int n) {
    const uint64_t before = e.stats().prompt_tokens_decoded;
    auto r = e.generate(greedy_tokens(tokens, n));
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(e.stats().prompt_tokens_decoded - before,
              tokens.size() - static_cast<size_t>(r->n_cached_tokens));
    return *r;
  }

  std::shared_ptr<LlamaWeights> weights_;
  std::vector<int32_t> system_, suffix_a_, suffix_b_;
};

TEST_F(PromptCache, SamePromptTwiceEvaluatesOneTokenAndGivesTheSameText) {
  const auto prompt = cat(system_, suffix_a_);
  auto e = engine();
  auto first = run(*e, prompt, 24);
  EXPECT_EQ(first.n_cached_tokens, 0);
  auto second = run(*e, prompt, 24);
  EXPECT_EQ(second.n_cached_tokens, static_cast<int>(prompt.size()) - 1);  // the last is evaluated again
  EXPECT_EQ(second.tokens, first.tokens);
  EXPECT_EQ(second.text, first.text);
  EXPECT_EQ(e->stats().prompt_tokens_cached, prompt.size() - 1);
}

TEST_F(PromptCache, SharedPrefixEvaluatesOnlyTheSuffix) {
  const auto a = cat(system_, suffix_a_);
  const auto b = cat(system_, suffix_b_);
  const auto want = fresh(b, 24);
  auto e = engine();
  run(*e, a, 24);
  auto got = run(*e, b, 24);
  EXPECT_EQ(got.n_cached_tokens, static_cast<int>(system_.size()));
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.text, want.text);
}

TEST_F(PromptCache, SharedPrefixWithAKvStreamPerSequence) {
  // kv_unified off: each slot has its own stream of cells; the cache works within it the same way.
  const auto a = cat(system_, suffix_a_);
  const auto b = cat(system_, suffix_b_);
  const auto want = fresh(b, 16);
  ContextOptions o = ctx_opts(1024, 2);
  o.kv_unified = false;
  auto e = BatchEngine::create(weights_, o);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  run(**e, a, 16);
  auto got = run(**e, b, 16);
  EXPECT_EQ(got.n_cached_tokens, static_cast<int>(system_.size()));
  EXPECT_EQ(got.tokens, want.tokens);
}

TEST_F(PromptCache, ShorterPromptDropsOnlyWhatNoLongerMatches) {
  const auto longer = cat(system_, suffix_a_);
  const std::vector<int32_t> shorter(system_.begin(), system_.end() - 3);
  const auto want_short = fresh(shorter, 16);
  const auto want_long = fresh(longer, 16);
  auto e = engine();
  run(*e, longer, 16);
  auto s = run(*e, shorter, 16);
  EXPECT_EQ(s.n_cached_tokens, static_cast<int>(shorter.size()) - 1);
  EXPECT_EQ(s.tokens, want_short.tokens);
  // Back to the longer prompt: the slot holds `shorter` (and what it generated); at least that much
  // is reused and the rest evaluated.
  auto l = run(*e, longer, 16);
  EXPECT_GE(l.n_cached_tokens, static_cast<int>(shorter.size()));
  EXPECT_LT(l.n_cached_tokens, static_cast<int>(longer.size()));
  EXPECT_EQ(l.tokens, want_long.tokens);
}

TEST_F(PromptCache, ContinuingAConversationReusesTheGeneratedTokens) {
  const auto turn1 = cat(system_, suffix_a_);
  auto e = engine();
  auto r1 = run(*e, turn1, 12);
  ASSERT_GE(r1.tokens.size(), 2u);
  // The next turn: the first turn, its reply, a new question. Every decoded reply token is cached
  // (the last sampled one was never decoded).
  const auto turn2 = cat(cat(turn1, r1.tokens), suffix_b_);
  const auto want = fresh(turn2, 12);
  auto r2 = run(*e, turn2, 12);
  EXPECT_GE(r2.n_cached_tokens, static_cast<int>(turn1.size() + r1.tokens.size()) - 1);
  EXPECT_EQ(r2.tokens, want.tokens);
}

TEST_F(PromptCache, InterleavedRequestsTakeTheSlotWithTheLongestPrefix) {
  auto other = weights_->tokenize(
      "Translate the following sentences into French, keeping names and numbers exactly as they "
      "are written, and answer with the translation only.",
      true, true);
  ASSERT_TRUE(other.ok());
  const auto x = cat(system_, suffix_a_);
  const auto y = cat(*other, suffix_a_);
  auto e = engine(2048, 2);
  run(*e, x, 8);
  auto ry = run(*e, y, 8);
  EXPECT_EQ(ry.n_cached_tokens, 0) << "y shares only the BOS token with x: it takes the empty slot";
  // Both continue, submitted together: each takes its own slot back.
  const auto x2 = cat(system_, suffix_b_);
  const auto y2 = cat(*other, suffix_b_);
  const auto want_x2 = fresh(x2, 8);
  const auto want_y2 = fresh(y2, 8);
  const uint64_t before = e->stats().prompt_tokens_decoded;
  auto hy = e->submit(greedy_tokens(y2, 8));
  auto hx = e->submit(greedy_tokens(x2, 8));
  ASSERT_TRUE(hx.ok() && hy.ok());
  auto rx = e->wait(*hx);
  auto ry2 = e->wait(*hy);
  ASSERT_TRUE(rx.ok() && ry2.ok());
  EXPECT_EQ(rx->n_cached_tokens, static_cast<int>(system_.size()));
  EXPECT_EQ(ry2->n_cached_tokens, static_cast<int>(other->size()));
  EXPECT_EQ(e->stats().prompt_tokens_decoded - before, 2 * suffix_b_.size());
  EXPECT_EQ(rx->tokens, want_x2.tokens);
  EXPECT_EQ(ry2->tokens, want_y2.tokens);
}

TEST_F(PromptCache, SmallContextEvictsIdleSlotsAndServesEveryRequest) {
  // 256 cells, 3 slots; each request reserves its prompt + 90 cells, so one running request and
  // the idle slots' caches cannot all fit next to a new one: the caches must give way.
  const std::vector<std::vector<int32_t>> prompts = {cat(system_, suffix_a_), cat(system_, suffix_b_),
                                                     suffix_a_, suffix_b_};
  std::vector<GenerationResult> want;
  for (const auto& p : prompts) want.push_back(fresh(p, 90));
  auto e = engine(256, 3);
  ASSERT_EQ(e->context().n_ctx(), 256u);
  for (int round = 0; round < 2; ++round) {
    std::vector<SequenceHandle> handles;
    for (const auto& p : prompts) {
      auto h = e->submit(greedy_tokens(p, 90));
      ASSERT_TRUE(h.ok()) << h.status().to_string();
      handles.push_back(*h);
    }
    for (size_t i = 0; i < handles.size(); ++i) {
      auto r = e->wait(handles[i]);
      ASSERT_TRUE(r.ok()) << "round " << round << " request " << i << ": " << r.status().to_string();
      EXPECT_EQ(r->tokens, want[i].tokens) << "round " << round << " request " << i;
    }
  }
  EXPECT_GT(e->stats().cache_evictions, 0u);
  EXPECT_EQ(e->stats().completed, 2 * prompts.size());
}

TEST_F(PromptCache, ChoicesShareTheCachedPrompt) {
  const auto prompt = cat(system_, suffix_a_);
  auto e = engine(2048, 3);
  auto first = run(*e, prompt, 16);
  auto req = greedy_tokens(prompt, 16);
  req.n_choices = 2;
  const uint64_t before = e->stats().prompt_tokens_decoded;
  auto r = e->generate(req);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(e->stats().prompt_tokens_decoded - before, 1u);
  EXPECT_EQ(r->n_cached_tokens, static_cast<int>(prompt.size()) - 1);
  ASSERT_EQ(r->choices.size(), 2u);
  for (const auto& c : r->choices) EXPECT_EQ(c.tokens, first.tokens);
  // And a single request again after the choices left their slots.
  auto again = run(*e, prompt, 16);
  EXPECT_EQ(again.n_cached_tokens, static_cast<int>(prompt.size()) - 1);
  EXPECT_EQ(again.tokens, first.tokens);
}

TEST_F(PromptCache, CancelledRequestLeavesAUsableCache) {
  const auto prompt = cat(system_, suffix_a_);
  const auto want = fresh(prompt, 24);
  auto e = engine();
  auto req = greedy_tokens(prompt, 24);
  int pieces = 0;
  req.on_text = [&](std::string_view) { return ++pieces < 3; };
  auto cancelled = e->generate(req);
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->finish, backend::FinishReason::kCancelled);
  auto r = run(*e, prompt, 24);
  EXPECT_EQ(r.n_cached_tokens, static_cast<int>(prompt.size()) - 1);
  EXPECT_EQ(r.tokens, want.tokens);
}

TEST_F(PromptCache, CachePromptFalseAndClearCacheEvaluateEverything) {
  const auto prompt = cat(system_, suffix_a_);
  auto e = engine();
  auto first = run(*e, prompt, 8);
  auto req = greedy_tokens(prompt, 8);
  req.cache_prompt = false;
  auto off = e->generate(req);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->n_cached_tokens, 0);
  EXPECT_EQ(off->tokens, first.tokens);
  EXPECT_GE(e->context().sequence_pos_max(0), 0) << "the idle slot keeps its cells";
  e->clear_cache();
  EXPECT_EQ(e->context().sequence_pos_max(0), -1);
  auto after = run(*e, prompt, 8);
  EXPECT_EQ(after.n_cached_tokens, 0);
  EXPECT_EQ(after.tokens, first.tokens);
}

}  // namespace
}  // namespace gantry::llama

// The BatchEngine's host-memory prompt cache on the generated tiny model: a slot's state is parked in
// host memory before it is lost and restored for a later prompt that shares more with it than with
// any slot; greedy output is token for token what a fresh engine gives (same prompt, extended,
// diverging, restored into another slot, with a KV stream per slot or one pool); its bytes are
// charged to a Budget and given back when another owner needs them.
#include <gtest/gtest.h>

#include "backend/llama/llama_test_util.h"
#include "gantry/backend/llama/batch_engine.h"
#include "gantry/memory/budget.h"

namespace gantry::llama {
namespace {

using backend::GenerationRequest;
using backend::GenerationResult;

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

class HostPromptCacheTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    weights_ = testing::tiny_model();
    ASSERT_TRUE(weights_) << "cannot load " << testing::tiny_model_path();
    auto tok = [&](const char* text, bool bos) {
      auto t = weights_->tokenize(text, bos, true);
      EXPECT_TRUE(t.ok());
      return t.ok() ? *t : std::vector<int32_t>{};
    };
    system_ =
        tok("You are a helpful assistant. Answer briefly and precisely, cite nothing, and keep the tone "
            "friendly. The user is asking about the weather, gardens, trains and small programs.",
            true);
    suffix_a_ = tok(" User: tell me about apples and pears.", false);
    suffix_b_ = tok(" Question: which trains leave at noon?", false);
    while (!suffix_a_.empty() && !suffix_b_.empty() && suffix_a_.front() == suffix_b_.front()) {
      system_.push_back(suffix_a_.front());
      suffix_a_.erase(suffix_a_.begin());
      suffix_b_.erase(suffix_b_.begin());
    }
    ASSERT_FALSE(suffix_a_.empty() || suffix_b_.empty());
    other_ =
        tok("Translate the following sentences into French, keeping names and numbers exactly as they "
            "are written, and answer with the translation only.",
            true);
    third_ = tok("List three prime numbers larger than one hundred and explain why each is prime.", true);
  }

  ContextOptions ctx_opts(uint32_t n_seq, bool unified) const {
    ContextOptions o;
    o.n_ctx = 1024 * n_seq;
    o.n_seq_max = n_seq;
    o.n_threads = 1;
    o.threadpool = false;
    o.kv_unified = unified;
    return o;
  }

  std::unique_ptr<BatchEngine> engine(uint32_t n_seq, EngineOptions eo = host_cache(64u << 20)) {
    auto e = BatchEngine::create(weights_, ctx_opts(n_seq, GetParam()), eo);
    EXPECT_TRUE(e.ok()) << e.status().to_string();
    return e.ok() ? std::move(*e) : nullptr;
  }

  static EngineOptions host_cache(uint64_t bytes) {
    EngineOptions eo;
    eo.cache_ram_bytes = bytes;
    return eo;
  }

  // The greedy output of `tokens` on an engine that has never seen anything (no caches at all).
  GenerationResult fresh(const std::vector<int32_t>& tokens, int n) {
    EngineOptions off;
    off.cache_prompt = false;
    auto e = engine(1, off);
    auto r = e->generate(greedy_tokens(tokens, n));
    EXPECT_TRUE(r.ok()) << r.status().to_string();
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
  std::vector<int32_t> system_, suffix_a_, suffix_b_, other_, third_;
};

TEST_P(HostPromptCacheTest, SamePromptAfterAHostRoundTrip) {
  const auto a = cat(system_, suffix_a_);
  const auto want = fresh(a, 24);
  auto e = engine(1);
  run(*e, a, 24);
  EXPECT_EQ(e->stats().host_cache_saves, 0u);
  // Another conversation takes the only slot: a's state goes to host memory first.
  run(*e, other_, 8);
  EXPECT_EQ(e->stats().host_cache_saves, 1u);
  EXPECT_GT(e->stats().host_cache_bytes, 0u);
  EXPECT_GE(e->stats().host_cache_tokens, a.size());
  // a again: restored from host memory (other's state parked in turn), only its last token evaluated.
  auto r = run(*e, a, 24);
  EXPECT_EQ(e->stats().host_cache_restores, 1u);
  EXPECT_EQ(r.n_cached_tokens, static_cast<int>(a.size()) - 1);
  EXPECT_EQ(r.tokens, want.tokens);
  EXPECT_EQ(r.text, want.text);
  EXPECT_EQ(e->stats().host_cache_saves, 2u);
}

TEST_P(HostPromptCacheTest, ExtendedAndDivergingPromptsAfterAHostRoundTrip) {
  const auto a = cat(system_, suffix_a_);
  const auto b = cat(system_, suffix_b_);
  auto e = engine(1);
  auto ra = run(*e, a, 12);
  ASSERT_GE(ra.tokens.size(), 2u);
  run(*e, other_, 8);  // parks a
  // Diverging: shares the system prompt only. The host state is restored, its tail dropped.
  const auto want_b = fresh(b, 16);
  auto rb = run(*e, b, 16);
  EXPECT_EQ(e->stats().host_cache_restores, 1u);
  EXPECT_EQ(rb.n_cached_tokens, static_cast<int>(system_.size()));
  EXPECT_EQ(rb.tokens, want_b.tokens);
  // Extended: a's conversation goes on (a, its reply, a new question); a's state went back to host
  // memory when b took its slot? No: b kept most of it. Park b with another prompt, then extend b.
  run(*e, third_, 8);
  const auto b2 = cat(cat(b, rb.tokens), suffix_a_);
  const auto want_b2 = fresh(b2, 16);
  auto rb2 = run(*e, b2, 16);
  EXPECT_EQ(e->stats().host_cache_restores, 2u);
  EXPECT_GE(rb2.n_cached_tokens, static_cast<int>(b.size() + rb.tokens.size()) - 1);
  EXPECT_EQ(rb2.tokens, want_b2.tokens);
}

TEST_P(HostPromptCacheTest, RestoredIntoAnotherSlot) {
  const auto a = cat(system_, suffix_a_);
  const auto want = fresh(a, 16);
  auto e = engine(2);
  run(*e, a, 16);      // slot 0
  run(*e, other_, 8);  // slot 1 (empty slots are used first)
  run(*e, third_, 8);  // slot 0 again (least recently used): a is parked
  EXPECT_EQ(e->stats().host_cache_saves, 1u);
  EXPECT_LT(e->context().sequence_pos_max(0), static_cast<int32_t>(a.size()) - 1)
      << "slot 0 holds third_ now";
  // a comes back into the least recently used slot, 1 (other_ is parked on the way).
  auto r = run(*e, a, 16);
  EXPECT_EQ(e->stats().host_cache_restores, 1u);
  EXPECT_EQ(r.n_cached_tokens, static_cast<int>(a.size()) - 1);
  EXPECT_EQ(r.tokens, want.tokens);
  EXPECT_GE(e->context().sequence_pos_max(1), static_cast<int32_t>(a.size()) - 1);
}

TEST_P(HostPromptCacheTest, ALimitKeepsTheNewestStates) {
  // Room for about one state: parking a second drops the first.
  auto probe = engine(1);
  run(*probe, other_, 8);
  run(*probe, third_, 8);
  const uint64_t one = probe->stats().host_cache_bytes;
  ASSERT_GT(one, 0u);
  auto e = engine(1, host_cache(one + one / 2));
  run(*e, other_, 8);
  run(*e, third_, 8);   // parks other_
  run(*e, system_, 8);  // parks third_, dropping other_
  EXPECT_EQ(e->stats().host_cache_saves, 2u);
  EXPECT_LE(e->stats().host_cache_bytes, one + one / 2);
  auto r = run(*e, other_, 8);
  // other_'s state was dropped for the newer one: only the BOS token the slot (holding system_) shares
  // with it is kept, as llama-server keeps the common prefix of the slot it takes.
  EXPECT_EQ(r.n_cached_tokens, 1);
  EXPECT_EQ(e->stats().host_cache_restores, 0u);
}

TEST_P(HostPromptCacheTest, ClearCacheAndCachePromptOff) {
  const auto a = cat(system_, suffix_a_);
  auto e = engine(1);
  run(*e, a, 8);
  run(*e, other_, 8);
  ASSERT_GT(e->stats().host_cache_bytes, 0u);
  e->clear_cache();
  EXPECT_EQ(e->stats().host_cache_bytes, 0u);
  EXPECT_EQ(run(*e, a, 8).n_cached_tokens, 0);
  // cache_prompt off for the engine: neither slots nor host memory keep anything for later.
  EngineOptions off = host_cache(64u << 20);
  off.cache_prompt = false;
  auto o = engine(1, off);
  run(*o, a, 8);
  run(*o, other_, 8);
  EXPECT_EQ(run(*o, a, 8).n_cached_tokens, 0);
  EXPECT_EQ(o->stats().host_cache_saves, 0u);
}

TEST_P(HostPromptCacheTest, ChargedToTheBudgetAndGivenBackUnderPressure) {
  const auto a = cat(system_, suffix_a_);
  const auto want = fresh(a, 16);
  memory::Budget budget("cpu", 64u << 20);
  EngineOptions eo = host_cache(EngineOptions::kUnlimited);
  eo.budget = &budget;
  eo.budget_owner = "tiny";
  {
    auto e = engine(1, eo);
    run(*e, a, 16);
    run(*e, other_, 8);  // parks a
    const uint64_t held = e->stats().host_cache_bytes;
    ASSERT_GT(held, 0u);
    EXPECT_EQ(budget.usage("tiny")->reserved, held);
    // Another owner needs all but a few bytes of the budget: the cache gives its bytes back instead
    // of the reservation failing.
    ASSERT_TRUE(budget.reserve("other", budget.capacity() - held / 2).ok());
    EXPECT_EQ(e->stats().host_cache_bytes, 0u);
    EXPECT_EQ(budget.usage("tiny")->reserved, 0u);
    EXPECT_EQ(budget.reclaimed(), held);
    // Now a save does not fit (the cache may not take another owner's bytes): skipped, output right.
    auto r = run(*e, a, 16);
    EXPECT_EQ(r.n_cached_tokens, 1);  // only the BOS token the slot (holding other_) shares with a
    EXPECT_EQ(r.tokens, want.tokens);
    EXPECT_EQ(e->stats().host_cache_bytes, 0u);
    budget.release("other");
    run(*e, other_, 8);  // parks a again
    EXPECT_GT(budget.usage("tiny")->reserved, 0u);
  }
  EXPECT_EQ(budget.usage("tiny")->reserved, 0u) << "the engine gives every byte back when it goes";
}

INSTANTIATE_TEST_SUITE_P(KvLayouts, HostPromptCacheTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Unified" : "StreamPerSlot"; });

}  // namespace
}  // namespace gantry::llama

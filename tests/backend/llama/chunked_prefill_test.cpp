// Chunked prefill in the BatchEngine, driven one step() at a time on the tiny model: a long prompt is
// evaluated at most prefill_chunk tokens per step while a running sequence gets a token every step;
// prompts are served first come, first served, an interactive tenant's before a batch tenant's; n choices
// still evaluate their prompt once; a request cancelled in the middle of its prefill ends at once and leaves
// what it evaluated as a prompt cache. Outputs are token for token the unchunked ones (greedy).
#include <gtest/gtest.h>

#include "backend/llama/llama_test_util.h"
#include "gantry/backend/llama/batch_engine.h"

namespace gantry::llama {
namespace {

using backend::GenerationRequest;
using backend::GenerationResult;

constexpr uint32_t kChunk = 16;

GenerationRequest greedy_tokens(std::vector<int32_t> tokens, int n) {
  GenerationRequest r;
  r.tokens = std::move(tokens);
  r.max_tokens = n;
  r.sampling.temperature = 0;
  return r;
}

class ChunkedPrefill : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = testing::tiny_model();
    ASSERT_TRUE(weights_) << "cannot load " << testing::tiny_model_path();
    std::string text;
    for (int i = 0; i < 40; ++i) text += "The quick brown fox number " + std::to_string(i) + " jumps. ";
    auto t = weights_->tokenize(text, true, true);
    ASSERT_TRUE(t.ok());
    long_ = *t;
    ASSERT_GT(long_.size(), 10 * kChunk);
    ASSERT_LT(long_.size(), 70 * kChunk);  // a reused prefix of 8 chunks is more than a tenth of it
    auto s = weights_->tokenize("Once upon a time", true, true);
    ASSERT_TRUE(s.ok());
    short_ = *s;
    ASSERT_LT(short_.size(), kChunk);
  }

  std::unique_ptr<BatchEngine> engine(uint32_t n_seq, uint32_t chunk = kChunk,
                                      bool one_prompt_per_step = false,
                                      double mixed_step_ms = EngineOptions{}.mixed_step_ms) {
    ContextOptions o;
    o.n_ctx = 2048;
    o.n_seq_max = n_seq;
    o.n_threads = 1;
    o.threadpool = false;
    EngineOptions eo;
    eo.prefill_chunk = chunk;
    eo.one_prompt_per_step = one_prompt_per_step;
    eo.mixed_step_ms = mixed_step_ms;
    auto e = BatchEngine::create(weights_, o, eo);
    EXPECT_TRUE(e.ok()) << e.status().to_string();
    return e.ok() ? std::move(*e) : nullptr;
  }

  // Greedy output without chunking (the whole prompt in one step).
  GenerationResult whole(const std::vector<int32_t>& tokens, int n) {
    auto e = engine(1, 2048);
    auto r = e->generate(greedy_tokens(tokens, n));
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return *r;
  }

  std::shared_ptr<LlamaWeights> weights_;
  std::vector<int32_t> long_, short_;
};

TEST_F(ChunkedPrefill, ALongPromptInterleavesWithARunningSequence) {
  const int n_short = 200;
  const auto want_short = whole(short_, n_short);
  const auto want_long = whole(long_, 8);
  ASSERT_EQ(want_short.tokens.size(), static_cast<size_t>(n_short))
      << "needs a sequence that runs throughout";
  auto e = engine(2);
  auto hs = e->submit(greedy_tokens(short_, n_short));
  ASSERT_TRUE(hs.ok());
  // The short request's prompt fits one step; from the next step on it generates.
  ASSERT_TRUE(e->step().value());
  ASSERT_EQ(e->stats().prompt_tokens_pending, 0u);
  auto hl = e->submit(greedy_tokens(long_, 8));
  ASSERT_TRUE(hl.ok());
  const uint64_t decoded0 = e->stats().tokens_decoded;
  int steps = 0;
  uint64_t pending = long_.size();
  while (true) {
    const auto before = e->stats();
    ASSERT_TRUE(e->step().value());
    const auto after = e->stats();
    ++steps;
    // Each step: the running sequence's token and at most kChunk prompt tokens.
    EXPECT_LE(after.tokens_decoded - before.tokens_decoded, kChunk + 1);
    EXPECT_EQ(after.mixed_steps, before.mixed_steps + 1) << "step " << steps;
    if (after.prompt_tokens_pending == 0) break;
    EXPECT_EQ(after.prompt_tokens_pending, pending - kChunk) << "step " << steps;
    pending = after.prompt_tokens_pending;
  }
  EXPECT_EQ(steps, static_cast<int>((long_.size() + kChunk - 1) / kChunk));
  EXPECT_EQ(e->stats().tokens_decoded - decoded0, long_.size() + static_cast<size_t>(steps));
  EXPECT_FALSE(hs->ready()) << "the short sequence was still running while the long prompt was evaluated";
  auto rl = e->wait(*hl);
  auto r = e->wait(*hs);
  ASSERT_TRUE(rl.ok() && r.ok());
  EXPECT_EQ(rl->tokens, want_long.tokens);
  EXPECT_EQ(r->tokens, want_short.tokens);
}

TEST_F(ChunkedPrefill, PromptsAreServedFirstComeFirstServed) {
  auto e = engine(2);
  auto h1 = e->submit(greedy_tokens(long_, 4));
  auto h2 = e->submit(greedy_tokens(long_, 4));
  ASSERT_TRUE(h1.ok() && h2.ok());
  // Both are admitted at once; the first one's prompt takes the whole budget until it is done.
  uint64_t pending = 2 * long_.size();
  size_t evaluated = 0;
  while (evaluated + kChunk < long_.size()) {
    ASSERT_TRUE(e->step().value());
    evaluated += kChunk;
    EXPECT_EQ(e->stats().prompt_tokens_pending, pending - kChunk);
    pending -= kChunk;
    EXPECT_EQ(e->stats().prompt_tokens_decoded, evaluated);
  }
  // The step that finishes the first prompt also starts the second with what the budget leaves.
  ASSERT_TRUE(e->step().value());
  EXPECT_EQ(e->stats().prompt_tokens_decoded, evaluated + kChunk);
  EXPECT_EQ(e->stats().prompt_tokens_pending, 2 * long_.size() - evaluated - kChunk);
  auto r1 = e->wait(*h1);
  auto r2 = e->wait(*h2);
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_LT(r1->prompt_ms, r2->prompt_ms) << "the first prompt was done first";
  EXPECT_EQ(r1->tokens, whole(long_, 4).tokens);
  EXPECT_EQ(r2->tokens, r1->tokens);
}

// Tenants (GenerationRequest::schedule): a batch tenant's long prompt admitted first does not hold back an
// interactive prompt admitted after it: from the next step on the interactive one's chunks go first, and
// the batch prompt resumes once it is done. Outputs unchanged.
TEST_F(ChunkedPrefill, AnInteractivePromptGoesBeforeABatchTenantsLongOne) {
  const auto want = whole(long_, 4);
  auto e = engine(2);
  auto bulk = greedy_tokens(long_, 4);
  bulk.schedule = backend::Schedule{1, "bulk", 1};
  auto hb = e->submit(bulk);
  ASSERT_TRUE(hb.ok());
  ASSERT_TRUE(e->step().value());  // the batch prompt's first chunk
  ASSERT_EQ(e->stats().prompt_tokens_decoded, kChunk);
  auto chat = greedy_tokens(long_, 4);
  chat.schedule = backend::Schedule{0, "chat", 1};
  auto hc = e->submit(chat);
  ASSERT_TRUE(hc.ok());
  // Until the interactive prompt is done, every step is its chunk: the batch prompt's pending tokens
  // stay where they were.
  const uint64_t bulk_pending = long_.size() - kChunk;
  size_t evaluated = 0;
  while (evaluated + kChunk < long_.size()) {
    ASSERT_TRUE(e->step().value());
    evaluated += kChunk;
    EXPECT_EQ(e->stats().prompt_tokens_pending, bulk_pending + long_.size() - evaluated)
        << "after " << evaluated << " interactive prompt tokens";
  }
  auto rc = e->wait(*hc);
  auto rb = e->wait(*hb);
  ASSERT_TRUE(rc.ok() && rb.ok());
  EXPECT_LT(rc->prompt_ms, rb->prompt_ms) << "the interactive prompt was done first";
  EXPECT_EQ(rc->tokens, want.tokens);
  EXPECT_EQ(rb->tokens, want.tokens);
}

// The time bound of a step that carries a running stream (EngineOptions::mixed_step_ms): with a bound no
// prompt token fits, such a step takes the fewest prompt tokens (kMinMixedChunk) however large
// prefill_chunk is; without one (0) the whole prompt goes in one step. Outputs unchanged.
TEST_F(ChunkedPrefill, AStepNextToARunningStreamIsBoundedInTime) {
  const auto want = whole(long_, 8);
  for (const double bound : {1e-9, 0.0}) {
    auto e = engine(2, 2048, false, bound);
    auto uncached = [&](int n) {
      auto r = greedy_tokens(long_, n);
      r.cache_prompt = false;  // every prompt token evaluated
      return r;
    };
    ASSERT_TRUE(e->generate(uncached(2)).ok());  // a measured step: the time per token is known
    auto hs = e->submit(greedy_tokens(short_, 200));
    ASSERT_TRUE(hs.ok());
    ASSERT_TRUE(e->step().value());  // the short prompt; it generates from the next step on
    auto hl = e->submit(uncached(8));
    ASSERT_TRUE(hl.ok());
    int steps = 0;
    while (e->stats().prompt_tokens_pending > 0 || steps == 0) {
      const auto before = e->stats();
      ASSERT_TRUE(e->step().value());
      ++steps;
      const uint64_t prompt = e->stats().prompt_tokens_decoded - before.prompt_tokens_decoded;
      if (bound > 0) {
        EXPECT_LE(prompt, EngineOptions::kMinMixedChunk) << "step " << steps;
      } else {
        EXPECT_EQ(prompt, long_.size()) << "no time bound: the whole prompt in one step";
      }
    }
    EXPECT_EQ(steps, bound > 0 ? static_cast<int>((long_.size() + EngineOptions::kMinMixedChunk - 1) /
                                                  EngineOptions::kMinMixedChunk)
                               : 1);
    auto rl = e->wait(*hl);
    ASSERT_TRUE(rl.ok());
    EXPECT_EQ(rl->tokens, want.tokens);
    hs->cancel();
  }
}

// A batch tenant's prompt is bounded in time even with no stream running, so that an interactive request
// arriving during it waits one short step; an interactive prompt alone still takes the whole chunk.
TEST_F(ChunkedPrefill, ABatchTenantsPromptIsBoundedInTimeEvenAlone) {
  const auto want = whole(long_, 4);
  auto e = engine(2, 2048, false, 1e-9);  // a bound no prompt token fits: the fewest tokens per step
  auto uncached = [&](int priority, const char* tenant) {
    auto r = greedy_tokens(long_, 4);
    r.cache_prompt = false;  // every prompt token evaluated
    r.schedule = backend::Schedule{priority, tenant, 1};
    return r;
  };
  ASSERT_TRUE(e->generate(uncached(0, "chat")).ok());  // a measured step: the time per token is known
  auto hb = e->submit(uncached(1, "bulk"));
  ASSERT_TRUE(hb.ok());
  const auto before = e->stats();
  ASSERT_TRUE(e->step().value());
  EXPECT_EQ(e->stats().prompt_tokens_decoded - before.prompt_tokens_decoded, EngineOptions::kMinMixedChunk)
      << "the batch prompt alone, bounded";
  auto rb = e->wait(*hb);
  ASSERT_TRUE(rb.ok());
  EXPECT_EQ(rb->tokens, want.tokens);
  auto hc = e->submit(uncached(0, "chat"));
  ASSERT_TRUE(hc.ok());
  const auto mid = e->stats();
  ASSERT_TRUE(e->step().value());
  EXPECT_EQ(e->stats().prompt_tokens_decoded - mid.prompt_tokens_decoded, long_.size())
      << "an interactive prompt alone: the whole chunk";
  auto rc = e->wait(*hc);
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(rc->tokens, want.tokens);
}

// One prompt a step (the CPU's setting): of two short prompts that would fit one step together, the
// first is evaluated alone and starts generating while the second is evaluated; outputs unchanged.
TEST_F(ChunkedPrefill, OnePromptPerStepFinishesTheFirstPromptAlone) {
  const auto want = whole(short_, 4);
  for (const bool one : {false, true}) {
    auto e = engine(2, 2048, one);
    auto h1 = e->submit(greedy_tokens(short_, 4));
    auto h2 = e->submit(greedy_tokens(short_, 4));
    ASSERT_TRUE(h1.ok() && h2.ok());
    ASSERT_TRUE(e->step().value());
    EXPECT_EQ(e->stats().prompt_tokens_pending, one ? short_.size() : 0u) << "one prompt per step: " << one;
    EXPECT_EQ(e->stats().tokens_decoded, one ? short_.size() : 2 * short_.size());
    ASSERT_TRUE(e->step().value());
    EXPECT_EQ(e->stats().prompt_tokens_pending, 0u);
    // One prompt a step: the first generates while the second's prompt is evaluated.
    EXPECT_EQ(e->stats().mixed_steps, one ? 1u : 0u);
    auto r1 = e->wait(*h1);
    auto r2 = e->wait(*h2);
    ASSERT_TRUE(r1.ok() && r2.ok());
    EXPECT_EQ(r1->tokens, want.tokens);
    EXPECT_EQ(r2->tokens, want.tokens);
  }
}

TEST_F(ChunkedPrefill, ChoicesShareOneChunkedPromptEvaluation) {
  const auto want = whole(long_, 8);
  auto e = engine(3);
  auto req = greedy_tokens(long_, 8);
  req.n_choices = 3;
  req.on_piece = [](const backend::TextPiece&) { return true; };
  auto r = e->generate(req);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(e->stats().prompt_tokens_decoded, long_.size());
  EXPECT_GE(e->stats().steps, (long_.size() + kChunk - 1) / kChunk);
  ASSERT_EQ(r->choices.size(), 3u);
  for (const auto& c : r->choices) EXPECT_EQ(c.tokens, want.tokens);
}

TEST_F(ChunkedPrefill, CancelInTheMiddleOfAPrefill) {
  const auto want = whole(long_, 8);
  auto e = engine(1);
  auto h = e->submit(greedy_tokens(long_, 8));
  ASSERT_TRUE(h.ok());
  constexpr uint32_t kSteps = 8;
  for (uint32_t i = 0; i < kSteps; ++i) ASSERT_TRUE(e->step().value());
  ASSERT_EQ(e->stats().prompt_tokens_decoded, kSteps * kChunk);
  ASSERT_EQ(e->stats().prompt_tokens_pending, long_.size() - kSteps * kChunk) << "the prefill is in progress";
  h->cancel();
  ASSERT_FALSE(e->step().value()) << "the cancelled sequence ends before anything else is decoded";
  ASSERT_TRUE(h->ready());
  auto r = h->get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish, backend::FinishReason::kCancelled);
  EXPECT_TRUE(r->tokens.empty());
  EXPECT_EQ(e->stats().prompt_tokens_pending, 0u);
  EXPECT_EQ(e->stats().prompt_tokens_decoded, kSteps * kChunk);
  // What it evaluated stays as a prompt cache; the same prompt again gives the uncached output.
  auto again = e->generate(greedy_tokens(long_, 8));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->n_cached_tokens, static_cast<int>(kSteps * kChunk));
  EXPECT_EQ(again->tokens, want.tokens);
}

}  // namespace
}  // namespace gantry::llama

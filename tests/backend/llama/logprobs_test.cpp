// Per-token logprobs (GenerationRequest::n_logprobs) on the tiny model: a log-softmax over the whole
// vocabulary, best alternatives first, consistent with the raw logits n_top_logits records.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/llama/llama_test_util.h"
#include "gantry/backend/llama/batch_engine.h"

namespace gantry::llama {
namespace {

using backend::GenerationRequest;

ContextOptions ctx_options() {
  ContextOptions o;
  o.n_ctx = 512;
  o.n_seq_max = 1;
  o.n_threads = 1;
  o.threadpool = false;
  return o;
}

GenerationRequest request(float temperature, int n_logprobs) {
  GenerationRequest r;
  r.prompt = "The capital of France is";
  r.max_tokens = 16;
  r.sampling.temperature = temperature;
  r.sampling.seed = 7;
  r.n_logprobs = n_logprobs;
  r.n_top_logits = 5;
  return r;
}

TEST(BatchEngineLogprob, GreedyChosenTokenIsTheTopOneAndMatchesTheLogits) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, ctx_options());
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  auto r = (*e)->generate(request(0.0f, 5));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_FALSE(r->tokens.empty());
  ASSERT_EQ(r->logprobs.size(), r->tokens.size());
  ASSERT_GE(r->top_logits.size(), r->tokens.size()) << "n_top_logits still works next to logprobs";
  for (size_t i = 0; i < r->tokens.size(); ++i) {
    SCOPED_TRACE("token " + std::to_string(i));
    const auto& lp = r->logprobs[i];
    EXPECT_EQ(lp.token, r->tokens[i]);
    EXPECT_EQ(lp.text, weights->token_to_piece(r->tokens[i]));
    EXPECT_LE(lp.logprob, 0.0f);
    ASSERT_EQ(lp.top.size(), 5u);
    double mass = 0;
    for (size_t k = 0; k < lp.top.size(); ++k) {
      EXPECT_LE(lp.top[k].second, 0.0f);
      if (k > 0) {
        EXPECT_LE(lp.top[k].second, lp.top[k - 1].second) << "best first";
      }
      mass += std::exp(static_cast<double>(lp.top[k].second));
    }
    EXPECT_LE(mass, 1.0 + 1e-5);
    // Greedy picks the most likely token.
    EXPECT_EQ(lp.top[0].first, lp.text);
    EXPECT_FLOAT_EQ(lp.top[0].second, lp.logprob);
    // Log-softmax only shifts the logits: differences between alternatives are the logits' own.
    const auto& logits = r->top_logits[i];
    EXPECT_EQ(logits[0].first, r->tokens[i]);
    for (size_t k = 1; k < 5; ++k) {
      EXPECT_EQ(lp.top[k].first, weights->token_to_piece(logits[k].first));
      EXPECT_NEAR(lp.top[0].second - lp.top[k].second, logits[0].second - logits[k].second, 1e-3);
    }
  }
}

TEST(BatchEngineLogprob, SampledTokensReportTheModelsDistribution) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, ctx_options());
  ASSERT_TRUE(e.ok());
  auto r = (*e)->generate(request(1.5f, 3));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->logprobs.size(), r->tokens.size());
  bool some_not_top = false;
  for (const auto& lp : r->logprobs) {
    ASSERT_EQ(lp.top.size(), 3u);
    EXPECT_LE(lp.logprob, lp.top[0].second + 1e-6f) << "nothing beats the best token";
    some_not_top = some_not_top || lp.text != lp.top[0].first;
  }
  EXPECT_TRUE(some_not_top) << "at temperature 1.5 some sampled token should not be the most likely one";
}

TEST(BatchEngineLogprob, ZeroAlternativesAndOff) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, ctx_options());
  ASSERT_TRUE(e.ok());
  auto r = (*e)->generate(request(0.0f, 0));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->logprobs.size(), r->tokens.size());
  for (const auto& lp : r->logprobs) {
    EXPECT_TRUE(lp.top.empty());
    EXPECT_LE(lp.logprob, 0.0f);
  }
  auto off = (*e)->generate(request(0.0f, -1));
  ASSERT_TRUE(off.ok());
  EXPECT_TRUE(off->logprobs.empty());
  EXPECT_EQ(off->tokens, r->tokens) << "recording logprobs does not change what is generated";
  for (int bad : {-2, 21}) {
    auto b = (*e)->submit(request(0.0f, bad));
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.status().message().find("n_logprobs must be in -1..20"), std::string::npos);
  }
}

}  // namespace
}  // namespace gantry::llama

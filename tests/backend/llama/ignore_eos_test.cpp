// ignore_eos (llama-server's request extension) on the generated tiny model: a request that would
// end at its first token (the end-of-generation token pushed up by a logit bias) instead generates
// exactly max_tokens, none of them an end-of-generation token; with several choices each does.
#include <gtest/gtest.h>
#include <llama.h>

#include <algorithm>

#include "backend/llama/llama_test_util.h"
#include "gantry/backend/llama/batch_engine.h"

namespace gantry::llama {
namespace {

using backend::FinishReason;
using backend::GenerationRequest;

ContextOptions small_ctx(uint32_t n_seq) {
  ContextOptions o;
  o.n_ctx = 512;
  o.n_seq_max = n_seq;
  o.n_threads = 1;
  o.threadpool = false;
  return o;
}

// A greedy request whose most likely token is always the end-of-generation token: without
// ignore_eos it ends at once.
GenerationRequest eos_favoured(const LlamaWeights& w, int max_tokens) {
  GenerationRequest r;
  r.prompt = "Once upon a time, in a land far away,";
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.sampling.logit_bias.emplace_back(llama_vocab_eos(w.vocab()), 100.0f);
  return r;
}

TEST(IgnoreEos, WithoutItTheBiasedRequestEndsAtOnce) {
  GANTRY_REQUIRE_TINY_MODEL();
  ASSERT_NE(llama_vocab_eos(weights->vocab()), LLAMA_TOKEN_NULL);
  auto e = BatchEngine::create(weights, small_ctx(1));
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  auto r = (*e)->generate(eos_favoured(*weights, 24));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->finish, FinishReason::kEndOfGeneration);
  EXPECT_TRUE(r->tokens.empty());
}

TEST(IgnoreEos, GeneratesExactlyMaxTokens) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, small_ctx(1));
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  for (int n : {1, 7, 48}) {
    GenerationRequest req = eos_favoured(*weights, n);
    req.ignore_eos = true;
    int pieces_tokens = 0;
    req.on_piece = [&](const backend::TextPiece& p) {
      pieces_tokens += static_cast<int>(p.logprobs.size());
      return true;
    };
    req.n_logprobs = 0;  // so each piece carries its tokens and the stream can be counted
    auto r = (*e)->generate(std::move(req));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->finish, FinishReason::kMaxTokens) << n;
    EXPECT_EQ(static_cast<int>(r->tokens.size()), n);
    EXPECT_EQ(pieces_tokens, n);
    EXPECT_TRUE(
        std::none_of(r->tokens.begin(), r->tokens.end(), [&](int32_t t) { return weights->is_eog(t); }));
  }
}

TEST(IgnoreEos, EveryChoiceGeneratesMaxTokens) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, small_ctx(2));
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  GenerationRequest req = eos_favoured(*weights, 16);
  req.ignore_eos = true;
  req.n_choices = 2;
  req.sampling.temperature = 0.8f;
  req.sampling.seed = 7;
  req.on_piece = [](const backend::TextPiece&) { return true; };
  auto r = (*e)->generate(std::move(req));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->choices.size(), 2u);
  for (const auto& c : r->choices) {
    EXPECT_EQ(c.finish, FinishReason::kMaxTokens);
    EXPECT_EQ(c.tokens.size(), 16u);
  }
  EXPECT_EQ(backend::completion_tokens(*r), 32);
}

TEST(IgnoreEos, RefusedWithAnOutputConstraint) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, small_ctx(1));
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  GenerationRequest req = eos_favoured(*weights, 8);
  req.ignore_eos = true;
  req.constraint = backend::OutputConstraint(backend::OutputConstraint::Kind::kJsonObject);
  auto r = (*e)->generate(std::move(req));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("ignore_eos"), std::string::npos) << r.status().to_string();
}

}  // namespace
}  // namespace gantry::llama

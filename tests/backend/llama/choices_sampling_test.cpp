// Several choices of one prompt (GenerationRequest::n_choices) and the sampling parameters OpenAI
// clients send (penalties, logit_bias, seed), plus per-piece logprobs (on_piece), on the tiny model.
#include <gtest/gtest.h>
#include <llama.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "backend/llama/llama_test_util.h"
#include "gantry/backend/llama/batch_engine.h"

namespace gantry::llama {
namespace {

using backend::FinishReason;
using backend::GenerationRequest;
using backend::GenerationResult;

ContextOptions ctx_options(uint32_t n_seq, bool unified = true) {
  ContextOptions o;
  o.n_ctx = 512;
  o.n_seq_max = n_seq;
  o.kv_unified = unified;
  o.n_threads = 1;
  o.threadpool = false;
  return o;
}

GenerationRequest greedy(std::string prompt, int max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

GenerationRequest sampled(uint32_t seed, int max_tokens) {
  GenerationRequest r;
  r.prompt = "Once upon a time";
  r.max_tokens = max_tokens;
  r.sampling.temperature = 1.0f;
  r.sampling.top_k = 0;
  r.sampling.top_p = 1.0f;
  r.sampling.min_p = 0.0f;
  r.sampling.seed = seed;
  return r;
}

std::unique_ptr<BatchEngine> engine(std::shared_ptr<LlamaWeights> w, uint32_t n_seq, bool unified = true) {
  auto e = BatchEngine::create(std::move(w), ctx_options(n_seq, unified));
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(*e) : nullptr;
}

// n = 2 greedy: the prompt is decoded once (the engine's prompt-token counter grows by the prompt's
// length, not twice that), both choices are the same text, and so is a request with one choice.
void check_greedy_choices_share_the_prompt(bool unified) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = engine(weights, 2, unified);
  ASSERT_TRUE(e);
  auto req = greedy("The capital of France is", 12);
  req.n_choices = 2;
  auto r = e->generate(req);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->choices.size(), 2u);
  EXPECT_EQ(e->stats().prompt_tokens_decoded, static_cast<uint64_t>(r->n_prompt_tokens))
      << "the prompt must be evaluated once for both choices";
  EXPECT_GT(r->n_prompt_tokens, 1);
  ASSERT_FALSE(r->choices[0].tokens.empty());
  EXPECT_EQ(r->choices[0].tokens, r->choices[1].tokens);
  EXPECT_EQ(r->choices[0].text, r->choices[1].text);
  EXPECT_EQ(r->tokens, r->choices[0].tokens) << "the top-level fields are choice 0's";
  EXPECT_EQ(backend::completion_tokens(*r),
            static_cast<int>(r->choices[0].tokens.size() + r->choices[1].tokens.size()));
  EXPECT_EQ(backend::choice_results(*r).size(), 2u);

  const uint64_t before = e->stats().prompt_tokens_decoded;
  auto one = e->generate(greedy("The capital of France is", 12));
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  EXPECT_TRUE(one->choices.empty());
  EXPECT_EQ(backend::choice_results(*one).size(), 1u);
  EXPECT_EQ(one->tokens, r->choices[0].tokens);
  // The same prompt again comes from a choice's slot (the prompt cache): only its last token is
  // evaluated again.
  EXPECT_EQ(one->n_cached_tokens, one->n_prompt_tokens - 1);
  EXPECT_EQ(e->stats().prompt_tokens_decoded - before, 1u);
}

TEST(BatchEngineChoices, GreedyChoicesShareOnePromptEvaluation) {
  check_greedy_choices_share_the_prompt(true);
}

TEST(BatchEngineChoices, GreedyChoicesShareThePromptAcrossKvStreams) {
  check_greedy_choices_share_the_prompt(false);  // one KV stream per sequence: the stream is copied
}

TEST(BatchEngineChoices, EveryChoiceEndsOnItsOwnAndSlotsAreFreed) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = engine(weights, 3);
  ASSERT_TRUE(e);
  auto req = sampled(11, 10);
  req.n_choices = 3;
  req.stop = {"e"};  // a frequent letter: choices stop at different points
  auto r = e->generate(req);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->choices.size(), 3u);
  for (const auto& c : r->choices) {
    EXPECT_EQ(c.text.find('e'), std::string::npos);
    EXPECT_EQ(c.n_prompt_tokens, r->n_prompt_tokens);
  }
  // All three slots are free again: three single requests run together.
  std::vector<SequenceHandle> hs;
  for (int i = 0; i < 3; ++i) {
    auto h = e->submit(greedy("Hello", 4));
    ASSERT_TRUE(h.ok());
    hs.push_back(*h);
  }
  for (auto& h : hs) ASSERT_TRUE(e->wait(h).ok());
  EXPECT_EQ(e->stats().active, 0u);
  EXPECT_EQ(e->stats().completed, 4u);
}

// Choices never run out of KV cells: in a unified cache they split what the shared prompt leaves
// (each stops at its share, finish reason max_tokens); with a stream each, each has its stream.
TEST(BatchEngineChoices, ChoicesStopAtTheirShareOfTheContext) {
  GANTRY_REQUIRE_TINY_MODEL();
  for (bool unified : {true, false}) {
    SCOPED_TRACE(unified ? "unified" : "a stream per sequence");
    ContextOptions o = ctx_options(2, unified);
    o.n_ctx = 256;
    auto e = BatchEngine::create(weights, o);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    const size_t n_ctx = (*e)->context().n_ctx(), n_ctx_seq = (*e)->context().n_ctx_seq();
    auto req = sampled(3, 100000);
    req.n_choices = 2;
    req.sampling.logit_bias = {{llama_vocab_eos(weights->vocab()), -INFINITY}};  // no early end
    auto r = (*e)->generate(req);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(r->choices.size(), 2u);
    const auto p = static_cast<size_t>(r->n_prompt_tokens);
    const size_t share = unified ? (n_ctx - p) / 2 : n_ctx_seq - p;
    if (unified) {
      ASSERT_LT(share, n_ctx_seq - p) << "the test needs a context one choice alone could fill";
    }
    for (const auto& c : r->choices) {
      EXPECT_EQ(c.finish, FinishReason::kMaxTokens);
      EXPECT_EQ(c.tokens.size(), share);
    }
    if (!unified) continue;
    // A prompt that leaves one cell: enough for one choice, not for two sharing the cache.
    GenerationRequest full;
    full.tokens.assign(n_ctx_seq - 1, 100);
    full.max_tokens = 4;
    full.sampling.temperature = 0;
    auto one = (*e)->generate(full);
    ASSERT_TRUE(one.ok()) << one.status().to_string();
    EXPECT_EQ(one->tokens.size(), 1u);
    full.n_choices = 2;
    auto h = (*e)->submit(full);
    ASSERT_FALSE(h.ok());
    EXPECT_TRUE(backend::is_context_length_exceeded(h.status())) << h.status().to_string();
  }
}

TEST(BatchEngineChoices, SeededSamplingIsReproducibleAndChoicesUseTheirOwnSeed) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = engine(weights, 2);
  ASSERT_TRUE(e);
  auto a = e->generate(sampled(1234, 16));
  auto b = e->generate(sampled(1234, 16));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->tokens, b->tokens) << "the same seed and request must give the same text";
  EXPECT_EQ(a->text, b->text);
  auto other = e->generate(sampled(99, 16));
  ASSERT_TRUE(other.ok());
  EXPECT_NE(a->tokens, other->tokens) << "another seed gives another text (temperature 1, no truncation)";

  auto two = sampled(1234, 16);
  two.n_choices = 2;
  auto x = e->generate(two);
  auto y = e->generate(two);
  ASSERT_TRUE(x.ok() && y.ok());
  ASSERT_EQ(x->choices.size(), 2u);
  ASSERT_EQ(y->choices.size(), 2u);
  EXPECT_EQ(x->choices[0].tokens, y->choices[0].tokens);
  EXPECT_EQ(x->choices[1].tokens, y->choices[1].tokens);
  EXPECT_NE(x->choices[0].tokens, x->choices[1].tokens) << "choice i is seeded with seed + i";
  EXPECT_EQ(x->choices[0].tokens, a->tokens) << "choice 0 uses the request's seed";
}

TEST(BatchEngineSampling, PenaltiesChangeTheOutputOfARepetitivePrompt) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = engine(weights, 1);
  ASSERT_TRUE(e);
  const std::string prompt = "the cat the cat the cat the cat the cat the cat the cat the cat";
  auto plain = e->generate(greedy(prompt, 24));
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  ASSERT_FALSE(plain->tokens.empty());
  std::map<int32_t, int> counts;
  for (int32_t t : plain->tokens) ++counts[t];
  EXPECT_LT(counts.size(), plain->tokens.size()) << "the greedy answer repeats tokens (the test needs it)";

  auto with = [&](auto set) {
    auto r = greedy(prompt, 24);
    set(r.sampling);
    auto out = e->generate(r);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    return out.ok() ? out->tokens : std::vector<int32_t>{};
  };
  EXPECT_NE(with([](auto& s) { s.repeat_penalty = 1.5f; }), plain->tokens) << "repeat_penalty";
  EXPECT_NE(with([](auto& s) { s.presence_penalty = 2.0f; }), plain->tokens) << "presence_penalty";
  EXPECT_NE(with([](auto& s) { s.frequency_penalty = 2.0f; }), plain->tokens) << "frequency_penalty";
  EXPECT_EQ(with([](auto& s) { s.presence_penalty = 0.0f; }), plain->tokens) << "0 is off";
}

TEST(BatchEngineSampling, LogitBiasOfMinus100RemovesTheGreedyToken) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = engine(weights, 1);
  ASSERT_TRUE(e);
  auto plain = e->generate(greedy("Hello my name is", 4));
  ASSERT_TRUE(plain.ok());
  ASSERT_FALSE(plain->tokens.empty());
  const int32_t first = plain->tokens[0];
  auto req = greedy("Hello my name is", 4);
  req.sampling.logit_bias = {{first, -100.0f}};
  auto biased = e->generate(req);
  ASSERT_TRUE(biased.ok()) << biased.status().to_string();
  ASSERT_FALSE(biased->tokens.empty());
  EXPECT_NE(biased->tokens[0], first);
  for (int32_t t : biased->tokens) EXPECT_NE(t, first) << "a banned token never comes";

  // A large positive bias makes a token the greedy choice.
  auto forced = greedy("Hello my name is", 2);
  const int32_t some = weights->tokenize(" banana", false, false)->front();
  forced.sampling.logit_bias = {{some, 100.0f}};
  auto f = e->generate(forced);
  ASSERT_TRUE(f.ok());
  ASSERT_FALSE(f->tokens.empty());
  EXPECT_EQ(f->tokens[0], some);
}

TEST(BatchEngineSampling, BadRequestsAreRefusedNamingTheField) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = engine(weights, 2);
  ASSERT_TRUE(e);
  auto expect_refused = [&](GenerationRequest r, const std::string& field) {
    auto h = e->submit(std::move(r));
    ASSERT_FALSE(h.ok()) << field;
    EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument) << field;
    EXPECT_NE(h.status().message().find(field), std::string::npos) << h.status().message();
  };
  auto r = greedy("Hi", 2);
  r.sampling.logit_bias = {{weights->n_vocab(), -100.0f}};
  expect_refused(r, "logit_bias");
  r = greedy("Hi", 2);
  r.sampling.logit_bias = {{-1, 1.0f}};
  expect_refused(r, "logit_bias");
  r = greedy("Hi", 2);
  r.sampling.presence_penalty = 2.5f;
  expect_refused(r, "presence_penalty");
  r = greedy("Hi", 2);
  r.sampling.frequency_penalty = -3.0f;
  expect_refused(r, "frequency_penalty");
  r = greedy("Hi", 2);
  r.n_choices = 3;  // more than the parallel sequences
  expect_refused(r, "n_choices");
  r = greedy("Hi", 2);
  r.n_choices = 0;
  expect_refused(r, "n_choices");
  r = greedy("Hi", 2);
  r.n_choices = 2;
  r.on_text = [](std::string_view) { return true; };
  expect_refused(r, "on_piece");
  EXPECT_EQ(e->stats().pending, 0u);
}

// Streamed pieces: each tagged with its choice; per choice the texts add up to the choice's text and
// the logprobs to its logprobs, token for token.
TEST(BatchEngineChoices, PiecesCarryTheirChoiceAndTheirTokensLogprobs) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = engine(weights, 2);
  ASSERT_TRUE(e);
  auto req = sampled(5, 16);
  req.n_choices = 2;
  req.n_logprobs = 2;
  std::vector<std::string> text(2);
  std::vector<std::vector<backend::TokenLogprob>> lps(2);
  bool bad_choice = false;
  req.on_piece = [&](const backend::TextPiece& p) {
    if (p.choice < 0 || p.choice > 1) {
      bad_choice = true;
      return true;
    }
    text[static_cast<size_t>(p.choice)] += p.text;
    auto& v = lps[static_cast<size_t>(p.choice)];
    v.insert(v.end(), p.logprobs.begin(), p.logprobs.end());
    return true;
  };
  auto r = e->generate(req);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE(bad_choice);
  ASSERT_EQ(r->choices.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE("choice " + std::to_string(i));
    const auto& c = r->choices[i];
    EXPECT_EQ(text[i], c.text);
    ASSERT_EQ(lps[i].size(), c.logprobs.size());
    ASSERT_EQ(c.logprobs.size(), c.tokens.size());
    for (size_t k = 0; k < c.tokens.size(); ++k) {
      EXPECT_EQ(lps[i][k].token, c.tokens[k]);
      EXPECT_EQ(lps[i][k].top.size(), 2u);
    }
  }
}

TEST(BatchEngineChoices, CancellingEndsEveryChoice) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = engine(weights, 2);
  ASSERT_TRUE(e);
  auto req = greedy("Once upon a time", 400);
  req.n_choices = 2;
  int pieces = 0;
  req.on_piece = [&](const backend::TextPiece& p) {
    if (!p.text.empty()) ++pieces;
    return pieces < 3;  // the caller goes away
  };
  auto r = e->generate(req);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->choices.size(), 2u);
  for (const auto& c : r->choices) {
    EXPECT_EQ(c.finish, FinishReason::kCancelled);
    EXPECT_LT(c.tokens.size(), 40u);
  }
  EXPECT_EQ(e->stats().active, 0u);
}

}  // namespace
}  // namespace gantry::llama

// The continuous-batching engine on the generated tiny model: determinism, sampling seeds, several
// sequences in one context versus each alone, KV release, cancellation, stop strings, bad input.
#include "gantry/backend/llama/batch_engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <limits>
#include <stdexcept>
#include <thread>

#include "backend/llama/llama_test_util.h"

namespace gantry::llama {
namespace {

using backend::FinishReason;
using backend::GenerationRequest;
using backend::GenerationResult;

ContextOptions small_ctx(uint32_t n_ctx = 512, uint32_t n_seq = 1) {
  ContextOptions o;
  o.n_ctx = n_ctx;
  o.n_seq_max = n_seq;
  o.n_threads = 1;
  o.threadpool = false;
  return o;
}

GenerationRequest greedy(std::string prompt, int n) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = n;
  r.sampling.temperature = 0;
  return r;
}

const std::vector<std::string> kPrompts = {
    "Hello my name is", "The capital of France is", "Once upon a time, in a land far away,",
    "1, 2, 3, 4,",      "def fibonacci(n):",        "Gantry runs models"};

// Same greedy tokens, or a divergence explained by a near tie: at the first differing token the
// reference's top-2 logits are within a small tolerance and `got` picked one of the two.
void expect_same_or_near_tie(const GenerationResult& ref, const GenerationResult& got,
                             const std::string& what) {
  const auto& a = ref.tokens;
  const auto& b = got.tokens;
  size_t k = 0;
  while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
  if (k == a.size() && k == b.size()) return;
  ASSERT_LT(k, a.size()) << what << ": longer than the reference";
  ASSERT_LT(k, b.size()) << what << ": ended early";
  ASSERT_GT(ref.top_logits.size(), k) << what << ": reference has no logits recorded";
  const auto& top = ref.top_logits[k];
  const float gap = top[0].second - top[1].second;
  EXPECT_LT(gap, 1e-3f * std::max(1.0f, std::fabs(top[0].second)))
      << what << " diverged at token " << k << " without a near tie (top-2 gap " << gap << ")";
  EXPECT_TRUE(b[k] == top[0].first || b[k] == top[1].first) << what << ": token is not one of the tied two";
}

TEST(BatchEngine, GreedyIsDeterministicAndStreamsAllText) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, small_ctx());
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  std::string streamed;
  auto req = greedy("Hello my name is", 24);
  req.on_text = [&](std::string_view t) {
    streamed += t;
    return true;
  };
  auto a = (*e)->generate(req);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  auto b = (*e)->generate(greedy("Hello my name is", 24));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->text, streamed);
  EXPECT_GT(a->n_prompt_tokens, 1);
  if (a->finish == FinishReason::kMaxTokens) {
    EXPECT_EQ(a->tokens.size(), 24u);
  }
  auto text = weights->detokenize(a->tokens);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, a->text);
}

TEST(BatchEngine, SeedReproducesSampledTextAndAnotherSeedDiffers) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, small_ctx());
  ASSERT_TRUE(e.ok());
  auto sampled = [&](uint32_t seed) {
    GenerationRequest r;
    r.prompt = "Once upon a time";
    r.max_tokens = 32;
    r.sampling.temperature = 1.0f;
    r.sampling.top_k = 0;
    r.sampling.top_p = 1.0f;
    r.sampling.min_p = 0.0f;
    r.sampling.seed = seed;
    auto res = (*e)->generate(r);
    EXPECT_TRUE(res.ok()) << res.status().to_string();
    return res.ok() ? res->tokens : std::vector<int32_t>{};
  };
  const auto a = sampled(42), b = sampled(42), c = sampled(43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a.size(), 32u);
}

// N sequences decoded together must give what each gives alone. Batch shapes change the order of
// floating-point sums, so a token may differ only where the model was at a near tie: at the first
// divergence the alone-run's top-2 logits must be within a small tolerance, and the batched run
// must have picked one of those two.
TEST(BatchEngine, SequencesTogetherMatchEachAlone) {
  GANTRY_REQUIRE_TINY_MODEL();
  const int n = 20;
  std::vector<GenerationResult> alone;
  {
    auto e = BatchEngine::create(weights, small_ctx(1024, 1));
    ASSERT_TRUE(e.ok());
    for (const auto& p : kPrompts) {
      auto req = greedy(p, n);
      req.n_top_logits = 2;
      auto r = (*e)->generate(req);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      alone.push_back(*r);
    }
  }
  auto e = BatchEngine::create(weights, small_ctx(2048, 4));
  ASSERT_TRUE(e.ok());
  std::vector<SequenceHandle> handles;
  for (const auto& p : kPrompts) {
    auto req = greedy(p, n);
    req.n_top_logits = 2;
    auto h = (*e)->submit(req);
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    handles.push_back(*h);
  }
  size_t identical = 0;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    auto r = (*e)->wait(handles[i]);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const auto& a = alone[i].tokens;
    const auto& b = r->tokens;
    size_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    if (k == a.size() && k == b.size()) {
      ++identical;
      continue;
    }
    ASSERT_LT(k, a.size()) << "prompt " << i << ": batched run is longer than the alone run";
    ASSERT_LT(k, b.size()) << "prompt " << i << ": batched run ended early";
    const auto& top = alone[i].top_logits[k];
    ASSERT_EQ(top.size(), 2u);
    const float gap = top[0].second - top[1].second;
    EXPECT_LT(gap, 1e-3f * std::max(1.0f, std::fabs(top[0].second)))
        << "prompt " << i << " diverged at token " << k << " without a near tie (top-2 gap " << gap << ")";
    EXPECT_TRUE(b[k] == top[0].first || b[k] == top[1].first)
        << "prompt " << i << ": batched token " << b[k] << " is not one of the two tied candidates";
    // The batched run's own logits at that step must show the same tie.
    const auto& btop = r->top_logits[k];
    EXPECT_NEAR(btop[0].second, top[0].second, 1e-2f * std::max(1.0f, std::fabs(top[0].second)));
  }
  EXPECT_GE(identical, kPrompts.size() - 1) << "more than one prompt diverged: suspicious for near ties";
  const auto stats = (*e)->stats();
  EXPECT_GE(stats.max_batch_seqs, 4u) << "the sequences were not decoded together";
}

TEST(BatchEngine, FinishedSequencesReleaseTheirKvCells) {
  GANTRY_REQUIRE_TINY_MODEL();
  // 256 cells (the minimum llama.cpp allocates), 2 slots; each sequence reserves ~100 cells, so the
  // 8 sequences only complete if every finished sequence gives its cells and slot back (its cached
  // prompt is evicted when the cells are needed).
  auto e = BatchEngine::create(weights, small_ctx(256, 2));
  ASSERT_TRUE(e.ok());
  ASSERT_EQ((*e)->context().n_ctx(), 256u);
  std::vector<SequenceHandle> handles;
  for (int i = 0; i < 8; ++i) {
    auto h = (*e)->submit(greedy(kPrompts[i % kPrompts.size()], 90));
    ASSERT_TRUE(h.ok());
    handles.push_back(*h);
  }
  // What /metrics shows as gantry_kv_cache_*: nothing held before admission, the running sequences'
  // reservations after a step, nothing once they are done.
  EXPECT_EQ((*e)->stats().kv_cells_reserved, 0u);
  EXPECT_EQ((*e)->stats().kv_cells, 256u);
  ASSERT_TRUE((*e)->step().ok());
  EXPECT_GT((*e)->stats().kv_cells_reserved, 90u) << "at least one running sequence's prompt and max_tokens";
  EXPECT_LE((*e)->stats().kv_cells_reserved, 256u);
  for (auto& h : handles) {
    auto r = (*e)->wait(h);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_GT(r->tokens.size(), 0u);
  }
  EXPECT_EQ((*e)->stats().kv_cells_reserved, 0u);
  // The idle slots keep their last prompt (the prompt cache) until clear_cache().
  EXPECT_GE((*e)->context().sequence_pos_max(0), 0);
  (*e)->clear_cache();
  for (int32_t seq = 0; seq < 2; ++seq) EXPECT_EQ((*e)->context().sequence_pos_max(seq), -1);
  EXPECT_EQ((*e)->stats().completed, 8u);
  EXPECT_LE((*e)->stats().max_batch_seqs, 2u);
}

TEST(BatchEngine, CallbackReturningFalseCancels) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, small_ctx());
  ASSERT_TRUE(e.ok());
  int calls = 0;
  auto req = greedy("Hello my name is", 100);
  req.render_special = true;
  req.on_text = [&](std::string_view) { return ++calls < 3; };
  auto r = (*e)->generate(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish, FinishReason::kCancelled);
  EXPECT_EQ(calls, 3);
  EXPECT_LT(r->tokens.size(), 100u);
  // The slot keeps what was decoded as a prompt cache: the prompt and every sampled token but the last.
  EXPECT_EQ((*e)->context().sequence_pos_max(0), r->n_prompt_tokens + static_cast<int>(r->tokens.size()) - 2);
  (*e)->clear_cache();
  EXPECT_EQ((*e)->context().sequence_pos_max(0), -1);
}

TEST(BatchEngine, CancelFromAnotherThreadStopsTheBackgroundLoop) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, small_ctx(2048, 2));
  ASSERT_TRUE(e.ok());
  (*e)->start();
  std::atomic<int> pieces{0};
  std::promise<void> fifth, cancelled;
  const std::shared_future<void> cancel_done = cancelled.get_future().share();
  auto req = greedy("Once upon a time", 1500);
  req.on_text = [&](std::string_view) {
    if (++pieces == 5) {  // held here until this thread has cancelled: the cancel lands mid-generation
      fifth.set_value();
      cancel_done.wait();
    }
    return true;
  };
  auto h = (*e)->submit(req);
  ASSERT_TRUE(h.ok());
  fifth.get_future().wait();
  h->cancel();
  cancelled.set_value();
  auto r = h->get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish, FinishReason::kCancelled);
  EXPECT_LT(r->tokens.size(), 1500u);
  // The engine keeps serving after a cancellation.
  auto again = (*e)->generate(greedy("Hello", 4));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->finish == FinishReason::kMaxTokens || again->finish == FinishReason::kEndOfGeneration);
  (*e)->stop();
}

TEST(BatchEngine, StopStringEndsBeforeIt) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, small_ctx());
  ASSERT_TRUE(e.ok());
  auto full = (*e)->generate(greedy("Hello my name is", 24));
  ASSERT_TRUE(full.ok());
  ASSERT_GT(full->text.size(), 12u);
  const std::string stop = full->text.substr(full->text.size() / 2, 3);
  const std::string expected = full->text.substr(0, full->text.find(stop));
  auto req = greedy("Hello my name is", 24);
  req.stop = {stop, "never-appears-anywhere"};
  std::string streamed;
  req.on_text = [&](std::string_view t) {
    streamed += t;
    return true;
  };
  auto r = (*e)->generate(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish, FinishReason::kStopString);
  EXPECT_EQ(r->text, expected);
  EXPECT_EQ(streamed, expected);
}

TEST(BatchEngine, InvalidSamplingParametersAreRefused) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, small_ctx());
  ASSERT_TRUE(e.ok());
  auto bad = [&](auto mutate, const std::string& field) {
    auto req = greedy("Hello", 4);
    mutate(req);
    auto r = (*e)->submit(req);
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << field;
    EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status().message();
  };
  bad([](auto& r) { r.sampling.temperature = -0.5f; }, "temperature");
  bad([](auto& r) { r.sampling.temperature = NAN; }, "temperature");
  bad([](auto& r) { r.sampling.top_p = 0.0f; }, "top_p");
  bad([](auto& r) { r.sampling.top_p = 1.5f; }, "top_p");
  bad([](auto& r) { r.sampling.top_k = -1; }, "top_k");
  bad([](auto& r) { r.sampling.min_p = -0.1f; }, "min_p");
  bad([](auto& r) { r.sampling.repeat_penalty = 0.0f; }, "repeat_penalty");
  bad([](auto& r) { r.max_tokens = 0; }, "max_tokens");
  bad([](auto& r) { r.tokens = {1, 999999}; }, "vocabulary");
}

TEST(BatchEngine, PromptLongerThanTheContextIsRefused) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, small_ctx(256));
  ASSERT_TRUE(e.ok());
  std::string prompt;
  for (int i = 0; i < 300; ++i) prompt += " word";
  auto r = (*e)->submit(greedy(prompt, 4));
  ASSERT_FALSE(r.ok());
  // The request's fault, never a retryable "resource exhausted" (the server would answer 429).
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(backend::is_context_length_exceeded(r.status())) << r.status().message();
  EXPECT_NE(r.status().message().find("the context holds 256"), std::string::npos) << r.status().message();
  EXPECT_EQ((*e)->stats().pending, 0u);
}

TEST(BatchEngine, AGenerationStopsWhenItsContextIsFull) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, small_ctx(256));
  ASSERT_TRUE(e.ok());
  std::string streamed;
  auto req = greedy("Once upon a time", 1000);  // more than the 256 cells can hold
  req.on_text = [&](std::string_view t) {
    streamed += t;
    return true;
  };
  auto r = (*e)->generate(req);
  // The generated model is deterministic and does not end its text within 1000 greedy tokens: it stops
  // at the context's end with a length finish, not with an out-of-KV error.
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->finish, backend::FinishReason::kMaxTokens);
  EXPECT_EQ(r->n_prompt_tokens + static_cast<int>(r->tokens.size()), 256);
  EXPECT_FALSE(streamed.empty());
  // The engine is usable afterwards: the cells the idle slot caches are given back to a new prompt.
  EXPECT_EQ((*e)->context().sequence_pos_max(0), 254);
  auto ok = (*e)->generate(greedy("Hello", 4));
  EXPECT_TRUE(ok.ok()) << ok.status().to_string();
}

TEST(BatchEngine, LongPromptIsDecodedInChunks) {
  GANTRY_REQUIRE_TINY_MODEL();
  std::string prompt = "In the beginning";
  for (int i = 0; i < 12; ++i) prompt += " there was a word, and then another one";
  auto whole_engine = BatchEngine::create(weights, small_ctx(1024));
  ASSERT_TRUE(whole_engine.ok());
  auto req = greedy(prompt, 12);
  req.n_top_logits = 2;
  auto whole = (*whole_engine)->generate(req);
  ASSERT_TRUE(whole.ok());
  ASSERT_GT(whole->n_prompt_tokens, 64);
  ContextOptions chunked = small_ctx(1024, 2);
  chunked.n_batch = chunked.n_ubatch = 16;  // the prompt needs several steps
  auto e = BatchEngine::create(weights, chunked);
  ASSERT_TRUE(e.ok());
  auto parts = (*e)->generate(req);
  ASSERT_TRUE(parts.ok()) << parts.status().to_string();
  EXPECT_GE((*e)->stats().steps, static_cast<uint64_t>(whole->n_prompt_tokens / 16));
  expect_same_or_near_tie(*whole, *parts, "chunked prompt");
}

TEST(BatchEngine, SubmitFromManyThreadsWhileTheLoopRuns) {
  GANTRY_REQUIRE_TINY_MODEL();
  std::vector<GenerationResult> alone;
  {
    auto e = BatchEngine::create(weights, small_ctx(1024));
    ASSERT_TRUE(e.ok());
    for (int i = 0; i < 4; ++i) {
      auto req = greedy(kPrompts[i], 16);
      req.n_top_logits = 2;
      auto r = (*e)->generate(req);
      ASSERT_TRUE(r.ok());
      alone.push_back(*r);
    }
  }
  auto e = BatchEngine::create(weights, small_ctx(2048, 4));
  ASSERT_TRUE(e.ok());
  (*e)->start();
  std::vector<std::thread> threads;
  std::vector<Result<GenerationResult>> results(8, Status(StatusCode::kInternal, "not run"));
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] { results[t] = (*e)->generate(greedy(kPrompts[t % 4], 16)); });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) {
    ASSERT_TRUE(results[t].ok()) << results[t].status().to_string();
    expect_same_or_near_tie(alone[t % 4], *results[t], "thread " + std::to_string(t));
  }
  EXPECT_GT((*e)->stats().max_batch_seqs, 1u);
  (*e)->stop();
}

// Issue 34: a json_object constraint whose every allowed first token is banned by logit_bias made
// llama.cpp's grammar throw on the decoding thread and abort the process. Now that request fails with
// a clear InvalidArgument, its neighbour in the same batch finishes, and the engine serves on.
TEST(BatchEngine, AGrammarWithEveryAllowedTokenBannedFailsThatRequestOnly) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, small_ctx(1024, 2));
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  (*e)->start();
  auto hostile = greedy("Answer in JSON:", 16);
  hostile.constraint = backend::OutputConstraint(backend::OutputConstraint::Kind::kJsonObject);
  int banned = 0;
  for (int32_t t = 0; t < weights->n_vocab(); ++t) {
    const std::string piece = weights->token_to_piece(t, false);
    const bool blank = piece.find_first_not_of(" \t\r\n") == std::string::npos;
    if (piece.find('{') != std::string::npos || (blank && !piece.empty())) {
      hostile.sampling.logit_bias.emplace_back(t, -std::numeric_limits<float>::infinity());
      ++banned;
    }
  }
  ASSERT_GT(banned, 0);
  auto bad = (*e)->submit(hostile);
  ASSERT_TRUE(bad.ok()) << bad.status().to_string();
  auto fine = (*e)->submit(greedy("Hello my name is", 16));
  ASSERT_TRUE(fine.ok());
  auto bad_result = (*e)->wait(*bad);
  ASSERT_FALSE(bad_result.ok());
  EXPECT_EQ(bad_result.status().code(), StatusCode::kInvalidArgument) << bad_result.status().to_string();
  EXPECT_NE(bad_result.status().message().find("output constraint cannot be met"), std::string::npos)
      << bad_result.status().message();
  auto fine_result = (*e)->wait(*fine);
  ASSERT_TRUE(fine_result.ok()) << fine_result.status().to_string();
  EXPECT_FALSE(fine_result->tokens.empty());
  auto after = (*e)->generate(greedy("Hello my name is", 8));
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  EXPECT_FALSE(after->tokens.empty());
  (*e)->stop();
}

// A caller's callback that throws on the decoding thread fails its own request (Internal), not the
// thread or the other sequences.
TEST(BatchEngine, ACallbackThatThrowsFailsItsOwnRequestOnly) {
  GANTRY_REQUIRE_TINY_MODEL();
  auto e = BatchEngine::create(weights, small_ctx(1024, 2));
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  (*e)->start();
  auto thrower = greedy("Once upon a time", 16);
  thrower.on_text = [](std::string_view) -> bool { throw std::runtime_error("the client's encoder broke"); };
  auto bad = (*e)->submit(thrower);
  ASSERT_TRUE(bad.ok());
  auto fine = (*e)->submit(greedy("Hello my name is", 16));
  ASSERT_TRUE(fine.ok());
  auto bad_result = (*e)->wait(*bad);
  ASSERT_FALSE(bad_result.ok());
  EXPECT_EQ(bad_result.status().code(), StatusCode::kInternal);
  EXPECT_NE(bad_result.status().message().find("the client's encoder broke"), std::string::npos)
      << bad_result.status().message();
  auto fine_result = (*e)->wait(*fine);
  ASSERT_TRUE(fine_result.ok()) << fine_result.status().to_string();
  EXPECT_TRUE((*e)->generate(greedy("1, 2, 3, 4,", 4)).ok());
  (*e)->stop();
}

}  // namespace
}  // namespace gantry::llama

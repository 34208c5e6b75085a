// Speculative decoding in the BatchEngine on the generated tiny models: with a draft model (the
// target itself, its Q8_0 copy) or prompt lookup (ngram-simple), the output is token for token the
// output without speculation (greedy, one or several sequences at once, n choices, penalties, a
// grammar; sampling draws the same random numbers), drafts are really made and partly accepted (EngineStats),
// the cells of rejected tokens are gone from the target's cache, and a draft with another vocabulary is
// refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <llama.h>

#include "backend/llama/llama_test_util.h"
#include "gantry/backend/llama/batch_engine.h"
#include "gantry/backend/llama/llama_backend.h"

namespace gantry::llama {
namespace {

using backend::GenerationRequest;
using backend::GenerationResult;

std::string model_path(const std::string& name) { return std::string(GANTRY_DEPS_DIR) + "/models/" + name; }

std::shared_ptr<LlamaWeights> load(const std::string& name) {
  auto w = LlamaWeights::load(model_path(name));
  EXPECT_TRUE(w.ok()) << w.status().to_string() << " (run scripts/setup.sh: it generates the test models)";
  return w.ok() ? *w : nullptr;
}

ContextOptions ctx_opts(uint32_t n_seq, uint32_t n_ctx = 2048) {
  ContextOptions o;
  o.n_ctx = n_ctx;
  o.n_seq_max = n_seq;
  o.n_threads = 1;
  o.threadpool = false;
  return o;
}

GenerationRequest greedy(const std::string& prompt, int n) {
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = n;
  r.sampling.temperature = 0;
  return r;
}

const std::vector<std::string>& prompts() {
  static const std::vector<std::string> p = {
      "The quick brown fox jumps over the lazy dog. The quick brown fox",
      "Once upon a time, in a land far away, there lived a",
      "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
      "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,",
      "Question: what is the capital of France?\nAnswer:",
  };
  return p;
}

class Speculative : public ::testing::Test {
 protected:
  void SetUp() override {
    target_ = testing::tiny_model();
    ASSERT_TRUE(target_) << "cannot load " << testing::tiny_model_path();
  }

  std::unique_ptr<BatchEngine> engine(const SpeculativeOptions& spec, uint32_t n_seq = 1) {
    auto e = BatchEngine::create(target_, ctx_opts(n_seq), {}, spec);
    EXPECT_TRUE(e.ok()) << e.status().to_string();
    return e.ok() ? std::move(*e) : nullptr;
  }

  SpeculativeOptions with_draft(std::shared_ptr<const LlamaWeights> draft, int n_max = 4) {
    SpeculativeOptions s;
    s.draft = std::move(draft);
    s.draft_context = ctx_opts(1);
    s.draft_max = n_max;
    return s;
  }

  // Every request alone on a plain engine.
  std::vector<GenerationResult> plain(const std::vector<GenerationRequest>& reqs, uint32_t n_seq = 1) {
    std::vector<GenerationResult> out;
    auto e = engine({}, n_seq);
    for (const auto& r : reqs) {
      auto g = e->generate(r);
      EXPECT_TRUE(g.ok()) << g.status().to_string();
      out.push_back(g.ok() ? *g : GenerationResult{});
    }
    return out;
  }

  // All requests submitted together on `e`.
  std::vector<GenerationResult> together(BatchEngine& e, const std::vector<GenerationRequest>& reqs) {
    std::vector<SequenceHandle> hs;
    for (const auto& r : reqs) {
      auto h = e.submit(r);
      EXPECT_TRUE(h.ok()) << h.status().to_string();
      if (h.ok()) hs.push_back(*h);
    }
    std::vector<GenerationResult> out;
    for (auto& h : hs) {
      auto g = e.wait(h);
      EXPECT_TRUE(g.ok()) << g.status().to_string();
      out.push_back(g.ok() ? *g : GenerationResult{});
    }
    return out;
  }

  static void expect_same(const std::vector<GenerationResult>& got,
                          const std::vector<GenerationResult>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
      EXPECT_EQ(got[i].text, want[i].text) << "request " << i;
      EXPECT_EQ(got[i].finish, want[i].finish) << "request " << i;
    }
  }

  std::shared_ptr<LlamaWeights> target_;
};

TEST_F(Speculative, TheTargetAsItsOwnDraftGivesTheSameTokensAndIsAlmostAlwaysRight) {
  std::vector<GenerationRequest> reqs;
  for (const auto& p : prompts()) reqs.push_back(greedy(p, 40));
  const auto want = plain(reqs);
  auto e = engine(with_draft(target_));
  std::vector<GenerationResult> got;
  for (const auto& r : reqs) {
    auto g = e->generate(r);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    got.push_back(*g);
  }
  expect_same(got, want);
  const EngineStats st = e->stats();
  EXPECT_GT(st.draft_tokens, 100u);
  // The draft is the target: it is wrong only where batch and single-token arithmetic round apart.
  EXPECT_GE(st.draft_accepted * 10, st.draft_tokens * 9) << st.draft_accepted << " of " << st.draft_tokens;
  // Fewer decode steps than tokens: several tokens per step.
  EXPECT_LT(st.steps, 5 * 40u / 2);
}

TEST_F(Speculative, AQuantisedDraftGivesTheSameTokensForSequencesDecodedTogether) {
  auto draft = load("tiny-llama-q8_0.gguf");
  ASSERT_TRUE(draft);
  std::vector<GenerationRequest> reqs;
  int n = 7;
  for (const auto& p : prompts())
    reqs.push_back(greedy(p, n += 9));  // different lengths end at different steps
  const auto want = plain(reqs);
  auto e = engine(with_draft(draft, 5), 3);
  expect_same(together(*e, reqs), want);
  const EngineStats st = e->stats();
  EXPECT_GT(st.draft_tokens, 0u);
  EXPECT_GT(st.draft_accepted, 0u);
  EXPECT_LT(st.draft_accepted, st.draft_tokens)
      << "a quantised draft is sometimes wrong: the rejection path ran";
  EXPECT_GE(st.max_batch_seqs, 2u);
}

TEST_F(Speculative, AKvStreamPerSequenceWorksTheSame) {
  auto draft = load("tiny-llama-q8_0.gguf");
  ASSERT_TRUE(draft);
  std::vector<GenerationRequest> reqs;
  for (const auto& p : prompts()) reqs.push_back(greedy(p, 24));
  const auto want = plain(reqs);
  ContextOptions o = ctx_opts(2);
  o.kv_unified = false;
  auto e = BatchEngine::create(target_, o, {}, with_draft(draft, 3));
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  expect_same(together(**e, reqs), want);
  EXPECT_GT((*e)->stats().draft_accepted, 0u);
}

TEST_F(Speculative, SamplingDrawsTheSameRandomNumbersAndAcceptsDrafts) {
  // The sampler sees the same rows in the same order and draws one random number per token either
  // way. With top_k 1 the draws cannot change a token: the text must be the text without a draft.
  // (With a wider choice, batch and cache layout round logits differently in the last bits, which
  // can tip a draw either way with or without a draft: only determinism is asserted there.)
  auto draft = load("tiny-llama-q8_0.gguf");
  ASSERT_TRUE(draft);
  std::vector<GenerationRequest> narrow, wide;
  for (const auto& p : prompts()) {
    GenerationRequest r = greedy(p, 32);
    r.sampling.temperature = 0.7f;
    r.sampling.seed = 42;
    r.sampling.top_k = 1;
    narrow.push_back(r);
    r.sampling.top_k = 20;
    wide.push_back(r);
  }
  const auto want = plain(narrow);
  auto e = engine(with_draft(draft, 4), 2);
  expect_same(together(*e, narrow), want);
  EXPECT_GT(e->stats().draft_accepted, 0u);
  auto a = engine(with_draft(draft, 4));
  auto b = engine(with_draft(draft, 4));
  std::vector<GenerationResult> ra, rb;
  for (const auto& r : wide) {
    auto x = a->generate(r);
    auto y = b->generate(r);
    ASSERT_TRUE(x.ok() && y.ok());
    ra.push_back(*x);
    rb.push_back(*y);
  }
  expect_same(ra, rb);
  EXPECT_GT(a->stats().draft_accepted, 0u) << "drafts are accepted while sampling at temperature 0.7";
}

TEST_F(Speculative, ChoicesPenaltiesLogprobsAndAGrammarAreUnchanged) {
  auto draft = load("tiny-llama-q8_0.gguf");
  ASSERT_TRUE(draft);
  std::vector<GenerationRequest> reqs;
  GenerationRequest choices = greedy(prompts()[1], 20);
  choices.n_choices = 2;
  choices.sampling.temperature = 0.9f;
  choices.sampling.top_k = 1;
  choices.sampling.seed = 7;
  choices.on_piece = [](const backend::TextPiece&) { return true; };
  reqs.push_back(choices);
  GenerationRequest penalised = greedy(prompts()[0], 24);
  penalised.sampling.repeat_penalty = 1.3f;
  penalised.n_logprobs = 2;
  reqs.push_back(penalised);
  GenerationRequest json = greedy(prompts()[4], 24);
  json.constraint.kind = backend::OutputConstraint::Kind::kJsonObject;
  reqs.push_back(json);
  const auto want = plain(reqs, 2);
  auto e = engine(with_draft(draft, 4), 3);
  const auto got = together(*e, reqs);
  expect_same(got, want);
  ASSERT_EQ(got[0].choices.size(), 2u);
  for (size_t c = 0; c < 2; ++c)
    EXPECT_EQ(got[0].choices[c].tokens, want[0].choices[c].tokens) << "choice " << c;
  ASSERT_EQ(got[1].logprobs.size(), want[1].logprobs.size());
  for (size_t i = 0; i < got[1].logprobs.size(); ++i) {
    EXPECT_EQ(got[1].logprobs[i].token, want[1].logprobs[i].token);
    EXPECT_NEAR(got[1].logprobs[i].logprob, want[1].logprobs[i].logprob, 1e-3);
  }
  EXPECT_GT(e->stats().draft_tokens, 0u);
}

TEST_F(Speculative, RejectedTokensLeaveNoCellsAndThePromptCacheStillMatches) {
  // An unrelated model with the same vocabulary (bench-100m) drafts: nearly every token is rejected.
  auto draft = load("bench-100m-q4_0.gguf");
  ASSERT_TRUE(draft);
  const GenerationRequest r = greedy(prompts()[2], 30);
  const auto want = plain({r});
  auto e = engine(with_draft(draft, 6));
  auto first = e->generate(r);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(first->tokens, want[0].tokens);
  const auto st = e->stats();
  ASSERT_GT(st.draft_tokens, st.draft_accepted + 10) << "the test needs rejected draft tokens";
  // The slot holds the prompt and every generated token but the last (never decoded), nothing more.
  auto prompt = target_->tokenize(r.prompt, true, true);
  ASSERT_TRUE(prompt.ok());
  EXPECT_EQ(e->context().sequence_pos_max(0),
            static_cast<int32_t>(prompt->size() + first->tokens.size()) - 2);
  auto second = e->generate(r);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->n_cached_tokens, static_cast<int>(prompt->size()) - 1);
  EXPECT_EQ(second->tokens, first->tokens);
}

TEST_F(Speculative, ALongPromptIsCaughtUpByTheDraftInPieces) {
  // The draft evaluates at most n_ubatch (16) tokens a step: a long prompt takes it several steps,
  // during which the sequence decodes without drafts; then drafting starts, and the text is the same.
  auto draft = load("tiny-llama-q8_0.gguf");
  ASSERT_TRUE(draft);
  std::string prompt;
  for (int i = 0; prompt.size() < 400; ++i) prompt += prompts()[static_cast<size_t>(i) % prompts().size()] + " ";
  GenerationRequest r = greedy(prompt, 40);
  ContextOptions o = ctx_opts(2);
  o.n_batch = 32;
  o.n_ubatch = 16;
  auto plain_engine = BatchEngine::create(target_, o);
  ASSERT_TRUE(plain_engine.ok());
  auto want = (*plain_engine)->generate(r);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  ASSERT_GT(want->n_prompt_tokens, 64);
  auto e = BatchEngine::create(target_, o, {}, with_draft(draft, 3));
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  auto got = (*e)->generate(r);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->tokens, want->tokens);
  const EngineStats st = (*e)->stats();
  EXPECT_GT(st.draft_accepted, 0u);
}

TEST_F(Speculative, PromptLookupGivesTheSameTokensAndAcceptsRepeats) {
  // Random weights repeat themselves soon: a 2-token n-gram finds earlier text to copy.
  SpeculativeOptions ngram;
  ngram.types = {"ngram-simple"};
  ngram.ngram_size_n = 2;
  ngram.ngram_size_m = 8;
  std::vector<GenerationRequest> reqs;
  for (const auto& p : prompts()) reqs.push_back(greedy(p, 64));
  const auto want = plain(reqs);
  auto e = engine(ngram, 2);
  expect_same(together(*e, reqs), want);
  const EngineStats st = e->stats();
  EXPECT_GT(st.draft_tokens, 0u);
  EXPECT_GT(st.draft_accepted, 0u);
}

TEST_F(Speculative, ADraftWithAnotherVocabularyIsRefused) {
  auto other = load("tiny-qwen25-tools.gguf");
  ASSERT_TRUE(other);
  auto e = BatchEngine::create(target_, ctx_opts(1), {}, with_draft(other));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("tiny-qwen25-tools.gguf cannot draft for"), std::string::npos)
      << e.status().message();
  EXPECT_NE(e.status().message().find("vocabulary"), std::string::npos) << e.status().message();
  // The rule itself, both ways round.
  EXPECT_FALSE(check_draft_vocabulary(*other, *target_).ok());
  EXPECT_TRUE(check_draft_vocabulary(*target_, *load("tiny-llama-q8_0.gguf")).ok());
}

TEST_F(Speculative, BadOptionsAreRefused) {
  SpeculativeOptions s = with_draft(target_);
  s.draft_min = 5;
  s.draft_max = 2;
  EXPECT_EQ(BatchEngine::create(target_, ctx_opts(1), {}, s).status().code(), StatusCode::kInvalidArgument);
  SpeculativeOptions t;
  t.types = {"ngram-nonsense"};
  EXPECT_EQ(BatchEngine::create(target_, ctx_opts(1), {}, t).status().code(), StatusCode::kInvalidArgument);
  t.types = {"ngram-simple", "draft-eagle3"};  // a type that needs a model Gantry does not load
  EXPECT_EQ(BatchEngine::create(target_, ctx_opts(1), {}, t).status().code(), StatusCode::kInvalidArgument);
  t.types = {"none"};
  EXPECT_FALSE(t.enabled());
}

TEST(SpeculativeModel, TheBackendLoadsAndBudgetsTheDraftWithTheTarget) {
  LlamaBackend be;
  backend::Placement p;
  p.provider = "cpu";
  p.intra_op_threads = 1;
  p.llama.n_ctx = 512;
  const std::string target = testing::tiny_model_path();
  auto plain = be.estimate_file(target, p);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  p.llama.draft_model = model_path("tiny-llama-q8_0.gguf");
  p.llama.draft_max = 4;
  auto spec = be.estimate_file(target, p);
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  // The draft's Q8_0 weights (4.4 MB) and its own KV cache come on top.
  EXPECT_GT(spec->bytes.at("cpu"), plain->bytes.at("cpu") + 4'000'000);
  EXPECT_NE(spec->basis.find("draft model"), std::string::npos) << spec->basis;
  backend::Placement lookup = p;
  lookup.llama.draft_model.reset();
  lookup.llama.spec_type = "ngram-simple";
  auto ngram = be.estimate_file(target, lookup);
  ASSERT_TRUE(ngram.ok()) << ngram.status().to_string();
  // No model, but up to 64 more rows of logits (32000 floats each) a step.
  EXPECT_EQ(ngram->bytes.at("cpu"), plain->bytes.at("cpu") + 64u * 32000u * 4u) << ngram->basis;

  auto m = be.load_file(target, p);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ((*m)->metadata().properties.at("draft_model"), *p.llama.draft_model);
  auto r = (*m)->generate(greedy(prompts()[0], 16));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->tokens.size(), 16u);
  // The model's stats carry the drafts as the backend's own figure (exported as gantry_draft_tokens_total).
  const auto st = (*m)->stats();
  auto drafted = std::find_if(st.figures.begin(), st.figures.end(),
                              [](const backend::BackendFigure& f) { return f.name == "draft_tokens_total"; });
  ASSERT_NE(drafted, st.figures.end());
  EXPECT_TRUE(drafted->counter);
  EXPECT_GT(drafted->value, 0.0);

  p.llama.draft_model = model_path("tiny-qwen25-tools.gguf");
  auto bad = be.load_file(target, p);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("vocabulary"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace gantry::llama

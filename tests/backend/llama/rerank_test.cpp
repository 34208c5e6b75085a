// Reranking (pooling rank) on the generated tiny reranker, and pooling-honest embeddings.
#include <gtest/gtest.h>
#include <llama.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/llama/llama_test_util.h"
#include "gantry/backend/generation.h"
#include "gantry/backend/llama/embedder.h"
#include "gantry/backend/llama/llama_backend.h"

namespace gantry::llama {
namespace {

std::string reranker_path() { return std::string(GANTRY_DEPS_DIR) + "/models/tiny-reranker.gguf"; }

Result<std::unique_ptr<LlamaModel>> load(LlamaBackend& backend, const std::string& path, int parallel = 2) {
  backend::Placement p;
  p.provider = "cpu";
  p.intra_op_threads = 1;
  p.llama.n_ctx = 1024;
  p.llama.parallel = parallel;
  auto m = backend.load_file(path, p);
  if (m.ok()) GANTRY_RETURN_IF_ERROR((*m)->init());
  return m;
}

class Reranker : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(reranker_path()))
        << reranker_path() << " is missing (run scripts/setup.sh: scripts/models/gguf_reranker.py makes it)";
    auto m = load(backend_, reranker_path());
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    model_ = std::move(*m);
  }
  LlamaBackend backend_;
  std::unique_ptr<LlamaModel> model_;
};

TEST_F(Reranker, TextInfoSaysRankNotGenerationNorEmbeddings) {
  const auto& ti = model_->text_info();
  EXPECT_EQ(ti.pooling, "rank");
  EXPECT_FALSE(ti.embeds);
  EXPECT_FALSE(ti.generates);
  EXPECT_EQ(model_pooling(model_->weights()), Pooling::kRank);
}

TEST_F(Reranker, ScoresAreDeterministicPerPairWhateverTheBatch) {
  const std::vector<std::string> docs = {"The capital of France is Paris.", "Bananas are yellow.",
                                         "Paris is a city in France."};
  auto a = model_->rerank("What is the capital of France?", docs);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_EQ(a->scores.size(), 3u);
  for (float s : a->scores) {
    // Qwen3-style head: a softmax over ("yes", "no"), the score is P(yes).
    EXPECT_GT(s, 0.0f);
    EXPECT_LT(s, 1.0f);
  }

  // Every pair's tokens are counted.
  int tokens = 0;
  for (const auto& d : docs) {
    auto t = rerank_tokens(model_->weights(), "What is the capital of France?", d);
    ASSERT_TRUE(t.ok());
    tokens += static_cast<int>(t->size());
  }
  EXPECT_EQ(a->prompt_tokens, tokens);

  // The same request: the same scores, bit for bit.
  auto again = model_->rerank("What is the capital of France?", docs);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->scores, a->scores);

  // In another order, alone, and the same document twice in one request: the same scores up to float
  // rounding (where a pair sits in the batch changes the order of the attention's sums).
  constexpr float kRounding = 1e-5f;
  auto b = model_->rerank("What is the capital of France?",
                          std::vector<std::string>{docs[2], docs[0], docs[1], docs[0]});
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  ASSERT_EQ(b->scores.size(), 4u);
  EXPECT_NEAR(b->scores[0], a->scores[2], kRounding);
  EXPECT_NEAR(b->scores[1], a->scores[0], kRounding);
  EXPECT_NEAR(b->scores[2], a->scores[1], kRounding);
  EXPECT_NEAR(b->scores[3], a->scores[0], kRounding);
  EXPECT_NEAR(b->scores[3], b->scores[1], kRounding);
  auto alone = model_->rerank("What is the capital of France?", std::vector<std::string>{docs[1]});
  ASSERT_TRUE(alone.ok()) << alone.status().to_string();
  EXPECT_NEAR(alone->scores[0], a->scores[1], kRounding);
  // Different documents differ by far more than rounding.
  EXPECT_GT(std::fabs(a->scores[0] - a->scores[1]), 100 * kRounding);
  EXPECT_GT(std::fabs(a->scores[1] - a->scores[2]), 100 * kRounding);
  EXPECT_GT(std::fabs(a->scores[0] - a->scores[2]), 100 * kRounding);

  // Another query changes the scores.
  auto other = model_->rerank("Which fruit is yellow?", docs);
  ASSERT_TRUE(other.ok());
  EXPECT_GT(std::fabs(other->scores[1] - a->scores[1]), 100 * kRounding);

  auto none = model_->rerank("q", std::vector<std::string>{});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->scores.empty());
}

TEST_F(Reranker, MorePairsThanSequencesStillScoreEach) {
  std::vector<std::string> docs;
  for (int i = 0; i < 7; ++i) docs.push_back("document number " + std::to_string(i));
  auto all = model_->rerank("number", docs);
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  ASSERT_EQ(all->scores.size(), 7u);
  auto last = model_->rerank("number", std::vector<std::string>{docs[6]});
  ASSERT_TRUE(last.ok());
  EXPECT_NEAR(last->scores[0], all->scores[6], 1e-5f);
}

TEST_F(Reranker, PromptIsTheModelsRerankTemplate) {
  const char* tmpl = llama_model_chat_template(model_->weights().raw(), "rerank");
  ASSERT_NE(tmpl, nullptr);
  std::string want = tmpl;
  want.replace(want.find("{query}"), 7, "Q {document} ?");
  want.replace(want.find("{document}", want.find("<Document>")), 10, "D");
  auto expect = model_->weights().tokenize(want, false, true);
  auto got = rerank_tokens(model_->weights(), "Q {document} ?", "D");
  ASSERT_TRUE(expect.ok() && got.ok());
  EXPECT_EQ(*got, *expect);  // a placeholder inside the query is the query's text, not replaced again
}

TEST_F(Reranker, RefusesEmbeddingsAndTooLongPairs) {
  auto e = model_->embed(std::vector<std::string>{"hello"});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(e.status().message().find("pooling is rank"), std::string::npos) << e.status().message();

  std::string long_doc;
  for (int i = 0; i < 1200; ++i) long_doc += " word";
  auto r = model_->rerank("q", std::vector<std::string>{"short", long_doc});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(backend::is_context_length_exceeded(r.status())) << r.status().message();
  EXPECT_NE(r.status().message().find("documents[1]"), std::string::npos) << r.status().message();

  ASSERT_TRUE(model_->drain().ok());
  EXPECT_EQ(model_->rerank("q", std::vector<std::string>{"d"}).status().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(model_->reset().ok());
  EXPECT_TRUE(model_->rerank("q", std::vector<std::string>{"d"}).ok());
}

TEST(RerankOther, AGeneratingModelIsNoRerankerAndPoolsByMean) {
  LlamaBackend backend;
  auto m = load(backend, testing::tiny_model_path());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  // tiny-llama declares no pooling: Gantry pools it by the mean.
  EXPECT_EQ((*m)->text_info().pooling, "mean");
  EXPECT_TRUE((*m)->text_info().embeds);
  EXPECT_TRUE((*m)->embed(std::vector<std::string>{"hello"}).ok());
  auto r = (*m)->rerank("q", std::vector<std::string>{"d"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("not a reranking model: its pooling is mean"), std::string::npos)
      << r.status().message();
}

TEST(RerankOther, DeclaredPoolingNoneGivesNoEmbeddings) {
  const std::string path = std::string(GANTRY_DEPS_DIR) + "/models/tiny-pooling-none.gguf";
  ASSERT_TRUE(std::filesystem::exists(path))
      << path << " is missing (scripts/models/gguf_reranker.py makes it)";
  LlamaBackend backend;
  auto m = load(backend, path);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ((*m)->text_info().pooling, "none");
  EXPECT_FALSE((*m)->text_info().embeds);
  EXPECT_TRUE((*m)->text_info().generates);
  auto e = (*m)->embed(std::vector<std::string>{"hello"});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(e.status().message().find("its pooling is none"), std::string::npos) << e.status().message();
  auto r = (*m)->rerank("q", std::vector<std::string>{"d"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a reranking model: its pooling is none"), std::string::npos)
      << r.status().message();
}

TEST(RerankOther, WithoutATemplateThePairIsJoinedAsTheVocabularyAddsTokens) {
  GANTRY_REQUIRE_TINY_MODEL();
  // tiny-llama: llama SPM, which adds BOS only (no EOS, no SEP): BOS query document.
  const llama_vocab* v = weights->vocab();
  ASSERT_TRUE(llama_vocab_get_add_bos(v));
  ASSERT_FALSE(llama_vocab_get_add_eos(v));
  ASSERT_FALSE(llama_vocab_get_add_sep(v));
  auto q = weights->tokenize("the query", false, false);
  auto d = weights->tokenize("a document", false, false);
  auto pair = rerank_tokens(*weights, "the query", "a document");
  ASSERT_TRUE(q.ok() && d.ok() && pair.ok());
  std::vector<int32_t> want = {llama_vocab_bos(v)};
  want.insert(want.end(), q->begin(), q->end());
  want.insert(want.end(), d->begin(), d->end());
  EXPECT_EQ(*pair, want);
  // Special-token text in a document stays text.
  auto special = rerank_tokens(*weights, "q", "</s>");
  auto plain = weights->tokenize("</s>", false, false);
  ASSERT_TRUE(special.ok() && plain.ok());
  EXPECT_EQ(std::vector<int32_t>(special->end() - plain->size(), special->end()), *plain);
}

TEST(RerankOther, PoolingNamesAndAMeanEmbedderDoesNotRank) {
  EXPECT_EQ(pooling_name(Pooling::kRank), "rank");
  EXPECT_EQ(pooling_name(Pooling::kNone), "none");
  EXPECT_EQ(pooling_name(Pooling::kMean), "mean");
  EXPECT_EQ(pooling_name(Pooling::kCls), "cls");
  EXPECT_EQ(pooling_name(Pooling::kLast), "last");
  GANTRY_REQUIRE_TINY_MODEL();
  ContextOptions o;
  o.n_ctx = 256;
  o.n_threads = 1;
  o.pooling = Pooling::kMean;
  auto emb = LlamaEmbedder::create(weights, o);
  ASSERT_TRUE(emb.ok()) << emb.status().to_string();
  auto r = (*emb)->rerank("q", std::vector<std::string>{"d"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace gantry::llama

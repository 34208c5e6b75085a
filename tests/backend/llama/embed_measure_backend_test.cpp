// Embeddings, memory measurement and the Backend/Model facade on the tiny model.
#include <gtest/gtest.h>
#include <llama.h>

#include <cmath>
#include <map>

#include "backend/llama/llama_test_util.h"
#include "gantry/backend/llama/embedder.h"
#include "gantry/backend/llama/llama_backend.h"
#include "gantry/backend/llama/measure.h"
#include "gantry/backend/llama/settings.h"
#include "gantry/backend/llama/speed.h"

namespace gantry::llama {
namespace {

TEST(LlamaEmbedder, MeanPoolingIsTheMeanOfTokenEmbeddings) {
  GANTRY_REQUIRE_TINY_MODEL();
  ContextOptions o;
  o.n_ctx = 512;
  o.n_seq_max = 4;
  o.n_threads = 1;
  o.pooling = Pooling::kMean;
  auto emb = LlamaEmbedder::create(weights, o);
  ASSERT_TRUE(emb.ok()) << emb.status().to_string();
  const std::vector<std::string> texts = {"The quick brown fox", "jumps over", "The quick brown fox"};
  auto v = (*emb)->embed(texts, /*normalize=*/false);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  ASSERT_EQ(v->size(), 3u);
  ASSERT_EQ((*v)[0].size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_NEAR((*v)[0][i], (*v)[2][i], 1e-4f);
  float diff = 0;
  for (int i = 0; i < 64; ++i) diff += std::fabs((*v)[0][i] - (*v)[1][i]);
  EXPECT_GT(diff, 1e-3f);

  // Reference: per-token embeddings (no pooling) of the first text, averaged by hand.
  ContextOptions none = o;
  none.embeddings = true;
  none.pooling = Pooling::kNone;
  none.n_seq_max = 1;
  auto ctx = LlamaContext::create(weights, none);
  ASSERT_TRUE(ctx.ok());
  auto toks = weights->tokenize(texts[0], true, false);
  ASSERT_TRUE(toks.ok());
  llama_batch b = llama_batch_init(64, 0, 1);
  for (size_t i = 0; i < toks->size(); ++i) {
    b.token[i] = (*toks)[i];
    b.pos[i] = static_cast<int32_t>(i);
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = true;
  }
  b.n_tokens = static_cast<int32_t>(toks->size());
  ASSERT_TRUE((*ctx)->decode(b).ok());
  std::vector<double> mean(64, 0.0);
  for (int32_t i = 0; i < b.n_tokens; ++i) {
    const float* e = llama_get_embeddings_ith((*ctx)->raw(), i);
    ASSERT_NE(e, nullptr);
    for (int k = 0; k < 64; ++k) mean[k] += e[k] / b.n_tokens;
  }
  llama_batch_free(b);
  for (int k = 0; k < 64; ++k) EXPECT_NEAR((*v)[0][k], mean[k], 1e-3 * (1 + std::fabs(mean[k])));

  auto normed = (*emb)->embed(std::vector<std::string>{"jumps over"}, true);
  ASSERT_TRUE(normed.ok());
  double norm = 0;
  for (float x : (*normed)[0]) norm += double(x) * x;
  EXPECT_NEAR(norm, 1.0, 1e-4);
  ContextOptions bad = o;
  bad.pooling = Pooling::kNone;
  EXPECT_FALSE(LlamaEmbedder::create(weights, bad).ok());

  // A text longer than the embedding context is the request's fault (400), not a full server (429).
  std::string long_text;
  for (int i = 0; i < 600; ++i) long_text += " word";
  auto too_long = (*emb)->embed(std::vector<std::string>{"ok", long_text}, false);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(backend::is_context_length_exceeded(too_long.status())) << too_long.status().message();
  EXPECT_NE(too_long.status().message().find("text 1 has"), std::string::npos) << too_long.status().message();
}

// Settings as LlamaBackend would make them for `path` on the CPU with one thread.
LlamaSettings cpu_settings(const std::string& path, std::map<std::string, std::string> options) {
  backend::Placement p;
  p.provider = "cpu";
  p.intra_op_threads = 1;
  auto llama = model::parse_llama_options(options);
  EXPECT_TRUE(llama.ok()) << llama.status().to_string();
  if (llama.ok()) p.llama = *llama;
  auto s = llama_settings(p, path);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? *s : LlamaSettings{};
}

TEST(MeasureMemory, ReportsLlamaCppsBuffers) {
  const std::string tiny = testing::tiny_model_path();
  auto m = measure_memory(tiny, cpu_settings(tiny, {{"n_ctx", "512"}}));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_EQ(m->devices.size(), 1u);
  EXPECT_EQ(m->devices[0].device, "cpu");
  EXPECT_EQ(m->n_ctx, 512u);
  EXPECT_EQ(m->model_bytes, m->model_tensor_bytes);  // CPU only: every tensor in a CPU buffer
  // 2 layers x 512 cells x (K 32 + V 32 values: 2 KV heads of 16) x 2 bytes (f16)
  EXPECT_EQ(m->kv_bytes, 2u * 512u * 64u * 2u);
  EXPECT_EQ(m->output_bytes, 32000u * 4u);  // one row of logits per sequence
  EXPECT_GT(m->compute_bytes, 0u);
  EXPECT_EQ(m->total_bytes, m->model_bytes + m->kv_bytes + m->compute_bytes + m->output_bytes);
  EXPECT_GT(m->rss_growth_bytes, 0);

  // q8_0 blocks of 32 do not divide the tiny model's 16-wide heads
  auto tiny_q8 = measure_memory(tiny, cpu_settings(tiny, {{"n_ctx", "512"}, {"kv_type", "q8_0"}}));
  ASSERT_FALSE(tiny_q8.ok());
  EXPECT_EQ(tiny_q8.status().code(), StatusCode::kInvalidArgument) << tiny_q8.status().to_string();
  EXPECT_NE(tiny_q8.status().message().find("does not divide"), std::string::npos);

  // The ~100M model: 12 layers, 4 KV heads of 64 -> K and V 256 wide; q8_0 = 34 bytes per 32 values.
  const std::string q8 = testing::bench_model_path();
  auto q = measure_memory(q8, cpu_settings(q8, {{"n_ctx", "1024"}, {"parallel", "2"}, {"kv_type", "q8_0"}}));
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(q->kv_bytes, 12u * 1024u * 512u / 32u * 34u);
  EXPECT_EQ(q->output_bytes, 2u * 32000u * 4u);
  EXPECT_EQ(q->model_bytes, q->model_tensor_bytes);

  LlamaSettings s = cpu_settings(tiny, {});
  EXPECT_EQ(measure_memory("/nonexistent.gguf", s).status().code(), StatusCode::kNotFound);
}

TEST(MeasureSpeed, ProducesPositiveRates) {
  GANTRY_REQUIRE_TINY_MODEL();
  SpeedOptions o;
  o.n_prompt = 32;
  o.n_gen = 8;
  o.reps = 2;
  o.threads = 1;
  auto r = measure_speed(weights, o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].test, "pp32");
  EXPECT_EQ((*r)[1].test, "tg8");
  for (const auto& x : *r) {
    EXPECT_EQ(x.samples_ts.size(), 2u);
    EXPECT_GT(x.avg_ts, 0);
  }
  o.reps = 0;
  EXPECT_EQ(measure_speed(weights, o).status().code(), StatusCode::kInvalidArgument);
}

TEST(LlamaBackend, ModelRunsThroughTheGenericInterface) {
  LlamaBackend backend;
  EXPECT_EQ(backend.name(), "llama.cpp");
  EXPECT_TRUE(backend.provider_available("cpu").ok);
  EXPECT_FALSE(backend.provider_available("tensorrt").ok);
  backend::Placement p;
  p.provider = "cpu";
  p.intra_op_threads = 1;
  p.llama.n_ctx = 1024;
  p.llama.parallel = 3;
  p.llama.max_tokens = 12;
  auto m = backend.load_file(testing::tiny_model_path(), p);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_TRUE((*m)->init().ok());
  EXPECT_EQ((*m)->metadata().backend, "llama.cpp");
  auto prompt = [](const std::string& s) {
    std::vector<backend::NamedTensor> in;
    in.push_back({"prompt", *Tensor::from_strings(Shape({1}), {s})});
    return in;
  };
  auto one = (*m)->infer_one(prompt("Hello my name is"));
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  ASSERT_EQ(one->size(), 2u);
  const auto& text = (*one)[0].tensor.strings()[0];
  const auto toks = (*one)[1].tensor.values<int32_t>();
  EXPECT_FALSE(toks.empty());
  EXPECT_LE(toks.size(), 12u);
  auto detok = (*m)->weights().detokenize(std::vector<int32_t>(toks.begin(), toks.end()));
  ASSERT_TRUE(detok.ok());
  EXPECT_EQ(*detok, text);

  std::vector<std::vector<backend::NamedTensor>> batch = {prompt("Hello my name is"), prompt("1, 2, 3,"),
                                                          prompt("Once upon a time")};
  auto many = (*m)->infer_batch(batch);
  ASSERT_TRUE(many.ok()) << many.status().to_string();
  ASSERT_EQ(many->size(), 3u);
  for (const auto& out : *many) EXPECT_FALSE(out[0].tensor.strings()[0].empty());

  std::vector<backend::NamedTensor> wrong;
  wrong.push_back({"image", *Tensor::from_strings(Shape({1}), {"x"})});
  EXPECT_EQ((*m)->infer_one(wrong).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE((*m)->drain().ok());
  EXPECT_EQ((*m)->infer_one(prompt("x")).status().code(), StatusCode::kUnavailable);
  ASSERT_TRUE((*m)->reset().ok());
  EXPECT_TRUE((*m)->infer_one(prompt("x")).ok());
}

}  // namespace
}  // namespace gantry::llama

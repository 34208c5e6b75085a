// LlamaModel through the generic backend::Model contract only (a Model&, no cast): streaming,
// cancellation from another thread, chat template, embeddings, token counters, drain; and
// LlamaBackend::estimate_memory against llama.cpp's real allocations.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <future>
#include <thread>

#include "backend/llama/llama_test_util.h"
#include "gantry/backend/llama/llama_backend.h"
#include "gantry/backend/llama/measure.h"

namespace gantry::llama {
namespace {

std::unique_ptr<backend::Model> load_tiny(std::map<std::string, std::string> options = {{"n_ctx", "2048"}}) {
  LlamaBackend backend;
  backend::Placement p;
  p.provider = "cpu";
  p.intra_op_threads = 1;
  auto llama = model::parse_llama_options(options);
  EXPECT_TRUE(llama.ok()) << llama.status().to_string();
  if (!llama.ok()) return nullptr;
  p.llama = *llama;
  auto m = backend.load_file(testing::tiny_model_path(), p);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  if (!m.ok()) return nullptr;
  return std::unique_ptr<backend::Model>(std::move(*m));
}

backend::GenerationRequest greedy(std::string prompt, int max_tokens) {
  backend::GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

TEST(LlamaModel, StreamsTextAndCountsTokens) {
  auto model = load_tiny();
  ASSERT_TRUE(model);
  backend::Model& m = *model;
  ASSERT_TRUE(m.init().ok());
  std::string streamed;
  auto req = greedy("Hello my name is", 12);
  req.on_text = [&](std::string_view t) {
    streamed += t;
    return true;
  };
  auto r = m.generate(req);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE(r->tokens.empty());
  EXPECT_EQ(streamed, r->text);
  EXPECT_GT(r->n_prompt_tokens, 0);

  backend::ModelStats s = m.stats();
  EXPECT_EQ(s.calls, 1u);
  EXPECT_EQ(s.failures, 0u);
  EXPECT_EQ(s.prompt_tokens, static_cast<uint64_t>(r->n_prompt_tokens));
  EXPECT_EQ(s.generated_tokens, r->tokens.size());

  // infer_one counts too.
  std::vector<backend::NamedTensor> in;
  in.push_back({"prompt", *Tensor::from_strings(Shape({1}), {"Once upon a time"})});
  auto out = m.infer_one(in);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const uint64_t n_out = (*out)[1].tensor.values<int32_t>().size();
  s = m.stats();
  EXPECT_EQ(s.calls, 2u);
  EXPECT_EQ(s.generated_tokens, r->tokens.size() + n_out);
  EXPECT_GT(s.prompt_tokens, static_cast<uint64_t>(r->n_prompt_tokens));

  // A request the engine refuses is a failure.
  auto bad = greedy("x", 0);
  EXPECT_EQ(m.generate(bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.stats().failures, 1u);
}

TEST(LlamaModel, CancelFromAnotherThreadEndsCancelled) {
  auto model = load_tiny();
  ASSERT_TRUE(model);
  backend::Model& m = *model;
  ASSERT_TRUE(m.init().ok());
  std::atomic<int> pieces{0};
  std::promise<void> fifth, cancelled;
  const std::shared_future<void> cancel_done = cancelled.get_future().share();
  auto req = greedy("Once upon a time", 1500);
  req.add_special = true;
  req.on_text = [&](std::string_view) {
    if (++pieces == 5) {  // held here until the other thread has cancelled: the cancel lands mid-generation
      fifth.set_value();
      cancel_done.wait();
    }
    return true;
  };
  auto g = m.start_generation(req);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  backend::Generation& gen = **g;
  EXPECT_GT(gen.id(), 0u);
  std::thread canceller([&, at_fifth = fifth.get_future()] {
    at_fifth.wait();
    gen.cancel();
    cancelled.set_value();
  });
  auto r = gen.wait();
  if (pieces.load() < 5) fifth.set_value();  // it ended before a fifth piece (the checks below say so)
  canceller.join();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(gen.done());
  EXPECT_EQ(r->finish, backend::FinishReason::kCancelled);
  EXPECT_EQ(backend::finish_reason_name(r->finish), "cancelled");
  EXPECT_LT(r->tokens.size(), 1500u);
  EXPECT_GE(pieces.load(), 5);
  EXPECT_FALSE(gen.wait().ok());  // the result was taken

  // Dropping an unfinished generation cancels it; the model serves on.
  {
    auto dropped = m.start_generation(greedy("Once upon a time", 1500));
    ASSERT_TRUE(dropped.ok());
  }
  auto again = m.generate(greedy("Hello", 4));
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_NE(again->finish, backend::FinishReason::kCancelled);
}

TEST(LlamaModel, DrainWaitsForARunningGeneration) {
  auto model = load_tiny();
  ASSERT_TRUE(model);
  backend::Model& m = *model;
  ASSERT_TRUE(m.init().ok());
  std::atomic<int> pieces{0};
  std::promise<void> second, release;
  const std::shared_future<void> released = release.get_future().share();
  auto req = greedy("Once upon a time", 1500);
  req.on_text = [&](std::string_view) {
    if (++pieces == 2) {  // held here: the generation is running until the test lets it go
      second.set_value();
      released.wait();
    }
    return true;
  };
  auto g = m.start_generation(req);
  ASSERT_TRUE(g.ok());
  second.get_future().wait();
  std::atomic<bool> drained{false};
  std::thread drainer([&] {
    EXPECT_TRUE(m.drain().ok());
    drained = true;
  });
  // drain() has begun once the model refuses new work (format_chat starts nothing).
  const std::vector<backend::ChatMessage> hi{{"user", "hi"}};
  while (m.format_chat(hi, true).ok()) std::this_thread::yield();
  EXPECT_FALSE(drained.load()) << "drain() returned while a generation was running";
  EXPECT_EQ(m.start_generation(greedy("Hi", 2)).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(m.format_chat(hi, true).status().code(), StatusCode::kUnavailable);
  (*g)->cancel();
  release.set_value();
  ASSERT_TRUE((*g)->wait().ok());
  drainer.join();
  EXPECT_TRUE(drained.load());
  ASSERT_TRUE(m.reset().ok());
  EXPECT_TRUE(m.generate(greedy("Hello", 2)).ok());
}

TEST(LlamaModel, ResetClearsThePromptCache) {
  auto model = load_tiny();
  ASSERT_TRUE(model);
  backend::Model& m = *model;
  ASSERT_TRUE(m.init().ok());
  const auto req = greedy("The prompt cache keeps this sentence for the next request", 6);
  auto first = m.generate(req);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(first->n_cached_tokens, 0);
  auto again = m.generate(req);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->n_cached_tokens, again->n_prompt_tokens - 1);
  EXPECT_EQ(again->tokens, first->tokens);
  ASSERT_TRUE(m.reset().ok());
  auto after = m.generate(req);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->n_cached_tokens, 0) << "reset() must empty the prompt cache";
  EXPECT_EQ(after->tokens, first->tokens);
}

TEST(LlamaModel, ChatTemplateAndEmbeddingsThroughTheBaseClass) {
  auto model = load_tiny();
  ASSERT_TRUE(model);
  backend::Model& m = *model;
  std::vector<backend::ChatMessage> msgs = {{"system", "Be brief."}, {"user", "Hi there"}};
  auto text = m.format_chat(msgs, true);
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  EXPECT_EQ(*text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
            "<|im_start|>assistant\n");

  const std::vector<std::string> texts = {"The quick brown fox", "jumps over", "The quick brown fox"};
  auto v = m.embed(texts);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  ASSERT_EQ(v->size(), 3u);
  for (const auto& e : *v) {
    ASSERT_EQ(e.size(), 64u);  // n_embd of the tiny model
    double norm = 0;
    for (float x : e) norm += double(x) * x;
    EXPECT_NEAR(norm, 1.0, 1e-4);
  }
  for (int i = 0; i < 64; ++i) EXPECT_NEAR((*v)[0][i], (*v)[2][i], 1e-5f);
  float diff = 0;
  for (int i = 0; i < 64; ++i) diff += std::fabs((*v)[0][i] - (*v)[1][i]);
  EXPECT_GT(diff, 1e-3f);
  auto raw = m.embed(std::vector<std::string>{"jumps over"}, /*normalize=*/false);
  ASSERT_TRUE(raw.ok());
  double norm = 0;
  for (float x : (*raw)[0]) norm += double(x) * x;
  EXPECT_GT(std::fabs(norm - 1.0), 1e-3) << "normalize=false must keep the raw vector";
  EXPECT_EQ(m.stats().calls, 2u);
}

// The dry run's estimate is what llama.cpp really allocates with the same settings, per device.
TEST(LlamaBackend, EstimateMemoryEqualsTheRealAllocation) {
  LlamaBackend backend;
  struct Case {
    std::string path;
    std::map<std::string, std::string> options;
  };
  const std::vector<Case> cases = {
      {testing::tiny_model_path(), {}},
      {testing::tiny_model_path(), {{"n_ctx", "1024"}, {"parallel", "3"}}},
      {testing::bench_model_path(), {}},
      {testing::bench_model_path(), {{"n_ctx", "4096"}, {"kv_type", "q4_1"}, {"n_batch", "256"}}},
      {testing::bench_model_path(), {{"parallel", "2"}, {"flash_attn", "off"}}},
  };
  for (const auto& c : cases) {
    backend::Placement p;
    p.provider = "cpu";
    p.intra_op_threads = 1;
    auto llama = model::parse_llama_options(c.options);
    ASSERT_TRUE(llama.ok()) << llama.status().to_string();
    p.llama = *llama;
    auto e = backend.estimate_file(c.path, p);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    EXPECT_TRUE(e->exact);
    EXPECT_NE(e->basis.find("dry run"), std::string::npos) << e->basis;
    auto s = llama_settings(p, c.path);
    ASSERT_TRUE(s.ok());
    auto real = measure_memory(c.path, *s, /*warm_up=*/false);
    ASSERT_TRUE(real.ok()) << real.status().to_string();
    ASSERT_EQ(e->bytes.size(), real->devices.size()) << c.path;
    for (const auto& d : real->devices) {
      ASSERT_TRUE(e->bytes.contains(d.device)) << d.device;
      EXPECT_EQ(e->bytes.at(d.device), d.total_bytes)
          << c.path << " on " << d.device << ": weights " << d.model_bytes << " kv " << d.kv_bytes
          << " compute " << d.compute_bytes << " output " << d.output_bytes;
    }
    EXPECT_EQ(e->total(), real->total_bytes);
  }
}

}  // namespace
}  // namespace gantry::llama

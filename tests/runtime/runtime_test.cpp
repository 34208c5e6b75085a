// The Runtime end to end on the bundled models: every format through the factory, the memory budget
// refusing what cannot fit, and LRU eviction between real GGUF and ONNX models.
#include "gantry/runtime/runtime.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "gantry/memory/budget.h"
#include "gantry/model/sha256.h"

namespace gantry::runtime {
namespace {

namespace fs = std::filesystem;
const fs::path kModels = fs::path(GANTRY_DEPS_DIR) / "models";
const std::string kTinyLlama = (kModels / "tiny-llama.gguf").string();
const std::string kMlp = (kModels / "mlp_64_128_10.onnx").string();
const std::string kSilero = (kModels / "silero_vad_v5.onnx").string();

#define REQUIRE_MODELS()                            \
  for (const auto& p : {kTinyLlama, kMlp, kSilero}) \
  ASSERT_TRUE(fs::exists(p)) << p << " is missing: run `make setup` (it makes the models)"

RuntimeOptions test_options(std::string budget = {}) {
  RuntimeOptions o;
  o.memory_budget = std::move(budget);
  o.verdict_cache_dir = "none";
  o.keep_alive_timer = false;
  return o;
}

Tensor mlp_input(float v) {
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = v * static_cast<float>(i % 7) - 1.0f;
  return Tensor::from_values<float>(DType::kFloat32, Shape({1, 64}), x).value();
}

std::vector<uint8_t> run_mlp(ModelHandle& h) {
  Tensor x = mlp_input(0.25f);
  std::vector<NamedTensor> in{{h->metadata().inputs[0].name, x}};
  auto out = h->infer_one(in);
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok()) return {};
  const auto* p = static_cast<const uint8_t*>((*out)[0].tensor.data());
  return {p, p + (*out)[0].tensor.byte_size()};
}

// The CPU budget's row. Every runtime has one: a test that found none would check nothing, so it fails.
BudgetInfo cpu_budget(const Runtime& rt) {
  for (const auto& b : rt.budgets())
    if (b.device == "cpu") return b;
  ADD_FAILURE() << "the runtime has no CPU budget";
  return {};
}

std::string greedy(ModelHandle& h) {
  backend::GenerationRequest r;
  r.prompt = "Once upon a time";
  r.max_tokens = 8;
  r.sampling.temperature = 0;
  auto g = h->generate(r);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? g->text : std::string();
}

std::vector<uint8_t> run_silero(ModelHandle& h) {
  std::vector<float> audio(512), state(2 * 128, 0.0f);
  for (size_t i = 0; i < audio.size(); ++i) audio[i] = 0.5f * std::sin(0.1f * static_cast<float>(i));
  std::vector<NamedTensor> in{
      {"input", Tensor::from_values<float>(DType::kFloat32, Shape({1, 512}), audio).value()},
      {"state", Tensor::from_values<float>(DType::kFloat32, Shape({2, 1, 128}), state).value()},
      {"sr", Tensor::from_values<int64_t>(DType::kInt64, Shape(), {16000}).value()}};
  auto out = h->infer_one(in);
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok()) return {};
  const auto* p = static_cast<const uint8_t*>((*out)[0].tensor.data());
  return {p, p + (*out)[0].tensor.byte_size()};
}

uint64_t reserved_total(const Runtime& rt, const std::string& name) {
  for (const auto& m : rt.models())
    if (m.name == name) {
      uint64_t t = 0;
      for (const auto& [d, b] : m.reserved_bytes) t += b;
      return t;
    }
  return 0;
}

TEST(Runtime, LoadsEveryFormatThroughTheFactory) {
  REQUIRE_MODELS();
  auto rt = Runtime::create(test_options());
  ASSERT_TRUE(rt.ok()) << rt.status().message();
  auto llama = (*rt)->load(kTinyLlama);
  ASSERT_TRUE(llama.ok()) << llama.status().message();
  EXPECT_EQ(llama->name(), "tiny-llama");
  EXPECT_EQ((*llama)->metadata().backend, "llama.cpp");
  EXPECT_FALSE(greedy(*llama).empty());

  auto mlp = (*rt)->load(kMlp);
  ASSERT_TRUE(mlp.ok()) << mlp.status().message();
  EXPECT_EQ(mlp->name(), "mlp_64_128_10");
  EXPECT_EQ(run_mlp(*mlp).size(), 10 * sizeof(float));

  const auto models = (*rt)->models();
  ASSERT_EQ(models.size(), 2u);
  for (const auto& m : models) {
    EXPECT_EQ(m.state, ModelState::kReady) << m.name;
    EXPECT_EQ(m.provider, "cpu") << m.name;
    EXPECT_GT(m.reserved_bytes.at("cpu"), 0u) << m.name;
  }
  // The budget's ledger holds both models.
  const BudgetInfo cpu = cpu_budget(**rt);
  EXPECT_EQ(cpu.device, "cpu");
  EXPECT_EQ(cpu.owners.size(), 2u);
  EXPECT_GT(cpu.used, 0u);
}

TEST(Runtime, ExplainsTheProviderChoiceForGguf) {
  REQUIRE_MODELS();
  auto rt = Runtime::create(test_options());
  ASSERT_TRUE(rt.ok());
  auto ex = (*rt)->explain(kTinyLlama);
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  EXPECT_NE(ex->backend.find("llama.cpp"), std::string::npos);
  ASSERT_NE(ex->choice.chosen_verdict(), nullptr) << ex->choice.explain();
  EXPECT_EQ(ex->choice.chosen_verdict()->provider, "cpu");
  ASSERT_TRUE(ex->memory);
  EXPECT_GT(ex->memory->total(), 0u);
  EXPECT_TRUE((*rt)->models().empty());  // nothing stays loaded
}

// A GGUF package's "llama" options reach llama.cpp; a command's defaults sit under them and its flags over.
TEST(Runtime, PackageLlamaOptionsReachTheModelBetweenDefaultsAndFlags) {
  REQUIRE_MODELS();
  const fs::path dir = fs::temp_directory_path() / ("gantry-llama-opts-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(kTinyLlama, dir / "tiny.gguf");
  model::Manifest m;
  m.name = "tiny-opts";
  m.version = "1.0.0";
  m.format = model::ModelFormat::kGguf;
  m.model_file = "tiny.gguf";
  m.sha256["tiny.gguf"] = model::sha256_file(dir / "tiny.gguf").value();
  m.llama.n_ctx = 512;
  m.llama.parallel = 2;
  m.llama.kv_type = KvType::kF32;
  m.llama.mmap = false;  // the f16 weights are read into memory: from the runtime's CPU pool
  ASSERT_TRUE(model::write_manifest(dir / "gantry.json", m).ok());

  auto rt = Runtime::create(test_options());
  ASSERT_TRUE(rt.ok()) << rt.status().message();
  LoadOptions lo;
  lo.factory.llama_defaults.parallel = 4;  // what gantry serve says when the package says nothing
  lo.factory.llama_defaults.n_ctx = 2048;
  {
    auto h = (*rt)->load(dir.string(), lo);
    ASSERT_TRUE(h.ok()) << h.status().message();
    const auto& props = (*h)->metadata().properties;
    EXPECT_EQ(props.at("n_ctx"), "512");
    EXPECT_EQ(props.at("parallel"), "2");
    EXPECT_EQ(props.at("kv_type"), "f32");
    EXPECT_EQ(props.at("kv_unified"), "false") << "the package chose its slot count: a KV stream per slot";
    EXPECT_FALSE(greedy(*h).empty());
    uint64_t in_use = 0;
    for (const auto& b : (*rt)->budgets())
      for (const auto& o : b.owners)
        if (b.device == "cpu" && o.owner == "tiny-opts") in_use = o.in_use;
    EXPECT_GE(in_use, 8'339'456u) << "the weights are charged to the model through the pool";
  }  // the handle goes before the unload, which waits for handles
  ASSERT_TRUE((*rt)->unload("tiny-opts").ok());

  lo.factory.llama.n_ctx = 1024;  // --ctx
  auto flagged = (*rt)->load(dir.string(), lo);
  ASSERT_TRUE(flagged.ok()) << flagged.status().message();
  EXPECT_EQ((*flagged)->metadata().properties.at("n_ctx"), "1024");
  EXPECT_EQ((*flagged)->metadata().properties.at("parallel"), "2");
  fs::remove_all(dir);
}

// llama-server's KV layout rule: one pool when the slot count is only a command's default, a stream per
// slot when someone chose it; kv_unified given wins either way.
TEST(Runtime, KvLayoutFollowsWhetherTheSlotCountWasChosen) {
  REQUIRE_MODELS();
  auto rt = Runtime::create(test_options());
  ASSERT_TRUE(rt.ok()) << rt.status().message();
  auto layout = [&](const LoadOptions& lo) {
    auto h = (*rt)->load(kTinyLlama, lo);
    EXPECT_TRUE(h.ok()) << h.status().message();
    if (!h.ok()) return std::string();
    std::string v = (*h)->metadata().properties.at("kv_unified");
    h = ModelHandle();
    EXPECT_TRUE((*rt)->unload("tiny-llama").ok());
    return v;
  };
  LoadOptions lo;
  lo.factory.llama_defaults.parallel = 4;  // gantry serve without --parallel
  EXPECT_EQ(layout(lo), "true");
  lo.factory.llama.parallel = 4;  // --parallel 4
  EXPECT_EQ(layout(lo), "false");
  lo.factory.llama.kv_unified = true;  // --kv-unified
  EXPECT_EQ(layout(lo), "true");
  lo.factory.llama.parallel.reset();
  lo.factory.llama.kv_unified = false;  // --no-kv-unified
  EXPECT_EQ(layout(lo), "false");
}

TEST(Runtime, RefusesAModelThatCannotFitWithTheNumbers) {
  REQUIRE_MODELS();
  auto rt = Runtime::create(test_options("cpu=1MiB"));
  ASSERT_TRUE(rt.ok()) << rt.status().message();
  auto r = (*rt)->load(kTinyLlama);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().message();
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find("needs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cpu"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1.0 MiB"), std::string::npos) << msg;
  auto info = (*rt)->manager().info("tiny-llama");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->state, ModelState::kFailed);
}

TEST(Runtime, RejectsABudgetForADeviceTheMachineLacks) {
  auto rt = Runtime::create(test_options("cuda:7=1GiB"));
  ASSERT_FALSE(rt.ok());
  EXPECT_NE(rt.status().message().find("cuda:7"), std::string::npos) << rt.status().message();
}

// Three models (GGUF and ONNX) under a budget that holds two: the least recently used idle one is
// evicted, and every model still gives the same results (after a reload too).
TEST(Runtime, EvictsTheLeastRecentlyUsedModelAndResultsStayRight) {
  REQUIRE_MODELS();
  uint64_t llama_bytes = 0, silero_bytes = 0, mlp_bytes = 0;
  std::string want_text;
  std::vector<uint8_t> want_silero, want_mlp;
  {
    auto probe = Runtime::create(test_options());
    ASSERT_TRUE(probe.ok());
    auto a = (*probe)->load(kTinyLlama);
    auto b = (*probe)->load(kSilero);
    auto c = (*probe)->load(kMlp);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    want_text = greedy(*a);
    want_silero = run_silero(*b);
    want_mlp = run_mlp(*c);
    llama_bytes = reserved_total(**probe, "tiny-llama");
    silero_bytes = reserved_total(**probe, "silero_vad_v5");
    mlp_bytes = reserved_total(**probe, "mlp_64_128_10");
  }
  ASSERT_GT(llama_bytes, 0u);
  ASSERT_GT(silero_bytes, 0u);
  ASSERT_GT(mlp_bytes, 0u);
  // Holds llama + silero and llama + mlp, never all three.
  const uint64_t capacity = llama_bytes + std::max(silero_bytes, mlp_bytes);
  auto rt = Runtime::create(test_options("cpu=" + std::to_string(capacity)));
  ASSERT_TRUE(rt.ok()) << rt.status().message();
  Runtime& r = **rt;
  {
    auto a = r.load(kTinyLlama);
    ASSERT_TRUE(a.ok()) << a.status().message();
    EXPECT_EQ(greedy(*a), want_text);
  }
  {
    auto b = r.load(kSilero);
    ASSERT_TRUE(b.ok()) << b.status().message();
    EXPECT_EQ(run_silero(*b), want_silero);
  }
  {
    auto a = r.get("tiny-llama");  // llama used again: silero is now the least recently used
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(greedy(*a), want_text);
  }
  {
    auto c = r.load(kMlp);
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(run_mlp(*c), want_mlp);
  }
  auto state = [&](const std::string& n) { return r.manager().info(n).value().state; };
  EXPECT_EQ(state("tiny-llama"), ModelState::kReady);
  EXPECT_EQ(state("silero_vad_v5"), ModelState::kEvicted);
  EXPECT_EQ(state("mlp_64_128_10"), ModelState::kReady);
  const BudgetInfo cpu = cpu_budget(r);
  EXPECT_EQ(cpu.capacity, capacity);
  EXPECT_GT(cpu.peak, 0u);
  EXPECT_LE(cpu.peak, cpu.capacity);
  // Silero comes back (evicting the least recently used of the others) with the same results.
  auto b = r.load(kSilero);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(run_silero(*b), want_silero);
  EXPECT_EQ(state("tiny-llama"), ModelState::kEvicted);
}

// A model's host prompt cache is charged to it in the CPU budget and is the first thing given back
// when another model needs the room: the new model loads, nothing is evicted.
TEST(Runtime, HostPromptCacheIsGivenBackBeforeAnyModelIsEvicted) {
  REQUIRE_MODELS();
  auto park_a_prompt = [](ModelHandle& h) {
    // Two unrelated prompts on one slot: the first one's state is parked in host memory.
    for (const char* prompt :
         {"Once upon a time there was a lighthouse keeper who", "Translate into French:"}) {
      backend::GenerationRequest r;
      r.prompt = prompt;
      r.max_tokens = 8;
      r.sampling.temperature = 0;
      ASSERT_TRUE(h->generate(r).ok());
    }
  };
  LoadOptions a, b;
  a.name = "a";
  a.factory.llama.cache_ram = 64;  // MiB
  b.name = "b";
  uint64_t model_bytes = 0, cache_bytes = 0;
  {
    auto probe = Runtime::create(test_options());
    ASSERT_TRUE(probe.ok());
    auto h = (*probe)->load(kTinyLlama, a);
    ASSERT_TRUE(h.ok()) << h.status().message();
    model_bytes = reserved_total(**probe, "a");
    park_a_prompt(*h);
    cache_bytes = (*h)->stats().cache_bytes;
  }
  ASSERT_GT(model_bytes, 0u);
  ASSERT_GT(cache_bytes, 0u);
  // Room for both models and half the cache.
  auto rt = Runtime::create(test_options("cpu=" + std::to_string(2 * model_bytes + cache_bytes / 2)));
  ASSERT_TRUE(rt.ok()) << rt.status().message();
  Runtime& r = **rt;
  auto ha = r.load(kTinyLlama, a);
  ASSERT_TRUE(ha.ok()) << ha.status().message();
  park_a_prompt(*ha);
  ASSERT_EQ((*ha)->stats().cache_bytes, cache_bytes);
  memory::Budget& cpu = *r.manager().budgets().at("cpu");
  EXPECT_EQ(cpu.usage("a")->reserved, model_bytes + cache_bytes);
  ha = ModelHandle();  // idle: evictable, were it not for the cache going first
  auto hb = r.load(kTinyLlama, b);
  ASSERT_TRUE(hb.ok()) << hb.status().message();
  EXPECT_EQ(r.manager().evictions(), 0u);
  EXPECT_EQ(r.manager().info("a")->state, ModelState::kReady);
  EXPECT_EQ(r.manager().info("a")->stats.cache_bytes, 0u);
  EXPECT_EQ(cpu.reclaimed(), cache_bytes);
  EXPECT_EQ(cpu.usage("a")->reserved, model_bytes);
  EXPECT_LE(cpu.peak(), cpu.capacity());
}

TEST(Runtime, ANameLoadedFromAnotherSourceIsAnError) {
  REQUIRE_MODELS();
  auto rt = Runtime::create(test_options());
  ASSERT_TRUE(rt.ok());
  LoadOptions o;
  o.name = "m";
  ASSERT_TRUE((*rt)->load(kMlp, o).ok());
  auto again = (*rt)->load(kSilero, o);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("already loaded"), std::string::npos) << again.status().message();
}

}  // namespace
}  // namespace gantry::runtime

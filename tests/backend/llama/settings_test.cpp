// The one Placement -> llama.cpp translation: documented defaults, every key, errors, the planner's
// offload choice for provider cuda (on hand-made GPU devices: this machine has none), all nine KV types.
#include "gantry/backend/llama/settings.h"

#include <gtest/gtest.h>

#include "backend/llama/llama_test_util.h"
#include "gantry/backend/llama/measure.h"
#include "gantry/plan/gguf_profile.h"

namespace gantry::llama {
namespace {

plan::ModelProfile tiny_profile() {
  auto p = plan::profile_from_gguf(std::filesystem::path(testing::tiny_model_path()));
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return p.ok() ? *p : plan::ModelProfile{};
}

// A placement with llama.cpp options given as text (what a manifest or a flag would say).
Result<backend::Placement> try_placement(std::string provider,
                                         const std::map<std::string, std::string>& options) {
  backend::Placement p;
  p.provider = std::move(provider);
  GANTRY_ASSIGN_OR_RETURN(p.llama, model::parse_llama_options(options));
  return p;
}

backend::Placement placement(std::string provider, const std::map<std::string, std::string>& options = {}) {
  auto p = try_placement(std::move(provider), options);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return p.ok() ? *p : backend::Placement{};
}

const std::vector<plan::Device> kCpuOnly = {
    plan::memory_target("cpu", "CPU", false, 64ull << 30, 64ull << 30)};

TEST(LlamaSettings, DefaultsAreTheDocumentedOnes) {
  plan::ModelProfile m = tiny_profile();
  m.n_ctx_train = 4096;
  auto s = llama_settings(placement("cpu"), m, kCpuOnly);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->context.n_ctx, 2048u);
  EXPECT_EQ(s->context.n_seq_max, 1u);
  EXPECT_EQ(s->context.n_batch, 512u);
  EXPECT_EQ(s->context.n_ubatch, 512u);
  EXPECT_EQ(s->context.type_k, KvType::kF16);
  EXPECT_EQ(s->context.type_v, KvType::kF16);
  EXPECT_EQ(s->context.flash_attn, FlashAttn::kAuto);
  EXPECT_EQ(s->context.n_threads, 0);
  EXPECT_EQ(s->load.placement.n_gpu_layers, 0);
  EXPECT_EQ(s->max_tokens, 128);
  EXPECT_NE(s->reason.find("cpu"), std::string::npos);
  EXPECT_EQ(s->context.kv_unified, kKvUnifiedDefault);
  EXPECT_TRUE(s->engine.cache_prompt);
  EXPECT_FALSE(s->cache_ram_bytes) << "the loader's default (a share of its budget)";
  EXPECT_EQ(s->engine.prefill_chunk, 0u) << "n_ubatch";
  EXPECT_TRUE(s->engine.one_prompt_per_step) << "every layer on the CPU";

  m.n_ctx_train = 1024;  // a smaller training context wins
  EXPECT_EQ(llama_settings(placement("cpu"), m, kCpuOnly)->context.n_ctx, 1024u);
  EXPECT_EQ(llama_settings(placement("cpu", {{"n_ctx", "0"}}), m, kCpuOnly)->context.n_ctx, 1024u);
  EXPECT_EQ(llama_settings(placement("cpu", {{"n_ctx", "8192"}}), m, kCpuOnly)->context.n_ctx, 8192u);
}

TEST(LlamaSettings, EveryKeyIsApplied) {
  backend::Placement p = placement("cuda", {{"n_ctx", "4096"},
                                            {"parallel", "4"},
                                            {"n_batch", "256"},
                                            {"n_ubatch", "128"},
                                            {"n_gpu_layers", "7"},
                                            {"tensor_split", "3,1"},
                                            {"kv_type", "q4_1"},
                                            {"flash_attn", "on"},
                                            {"max_tokens", "9"},
                                            {"mmap", "off"},
                                            {"chat_template_file", "/t/chat.jinja"},
                                            {"reasoning_format", "none"},
                                            {"draft_model", "/t/draft.gguf"},
                                            {"draft_max", "6"},
                                            {"draft_min", "2"},
                                            {"draft_p_min", "0.5"},
                                            {"spec_type", "ngram-simple,ngram-mod"},
                                            {"spec_ngram_size_n", "3"},
                                            {"spec_ngram_size_m", "16"},
                                            {"kv_unified", "on"},
                                            {"cache_prompt", "off"},
                                            {"cache_ram", "-1"},
                                            {"prefill_chunk", "64"},
                                            {"rpc", "10.0.0.2:50052,10.0.0.3:50052"},
                                            {"pooling", "cls"},
                                            {"reasoning", "off"}});
  p.intra_op_threads = 3;
  p.device_ids = {1};
  auto s = llama_settings(p, tiny_profile(), kCpuOnly);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->context.n_ctx, 4096u);
  EXPECT_EQ(s->context.n_seq_max, 4u);
  EXPECT_EQ(s->context.n_batch, 256u);
  EXPECT_EQ(s->context.n_ubatch, 128u);
  EXPECT_EQ(s->context.type_k, KvType::kQ4_1);
  EXPECT_EQ(s->context.type_v, KvType::kQ4_1);
  EXPECT_EQ(s->context.flash_attn, FlashAttn::kOn);
  EXPECT_EQ(s->context.n_threads, 3);
  EXPECT_EQ(s->load.placement.n_gpu_layers, 7);
  EXPECT_EQ(s->load.placement.tensor_split, (std::vector<float>{3, 1}));
  EXPECT_EQ(s->load.placement.main_gpu, 1);
  EXPECT_EQ(s->max_tokens, 9);
  EXPECT_FALSE(s->load.use_mmap);
  EXPECT_EQ(s->chat_template_file, "/t/chat.jinja");
  EXPECT_EQ(s->reasoning_format, backend::ReasoningFormat::kNone);
  EXPECT_EQ(s->draft_path, "/t/draft.gguf");
  EXPECT_EQ(s->speculative.draft_max, 6);
  EXPECT_EQ(s->speculative.draft_min, 2);
  EXPECT_FLOAT_EQ(s->speculative.draft_p_min, 0.5f);
  EXPECT_EQ(s->speculative.types, (std::vector<std::string>{"ngram-simple", "ngram-mod"}));
  EXPECT_EQ(s->speculative.ngram_size_n, 3);
  EXPECT_EQ(s->speculative.ngram_size_m, 16);
  EXPECT_EQ(s->speculative.draft_context.n_ctx, 4096u);   // the draft's context is the target's
  EXPECT_FALSE(s->speculative.draft_context.threadpool);  // it runs on the target's threads
  EXPECT_TRUE(s->context.kv_unified);
  EXPECT_FALSE(s->engine.cache_prompt);
  EXPECT_EQ(s->cache_ram_bytes, EngineOptions::kUnlimited);
  EXPECT_EQ(s->engine.prefill_chunk, 64u);
  EXPECT_EQ(s->pooling, Pooling::kCls);
  EXPECT_FALSE(s->thinking);
  EXPECT_EQ(model::llama_option_keys().size(), 26u);
  EXPECT_EQ(s->load.placement.rpc_servers, (std::vector<std::string>{"10.0.0.2:50052", "10.0.0.3:50052"}));
}

TEST(LlamaSettings, BadOptionsAreRefusedWithTheirName) {
  const plan::ModelProfile m = tiny_profile();
  // Malformed options are refused where they are read (parse_llama_options, as a manifest or flag is),
  // contradicting ones by llama_settings.
  auto err = [&](const std::string& provider, const std::map<std::string, std::string>& options) {
    auto p = try_placement(provider, options);
    if (!p.ok()) return p.status().message();
    auto s = llama_settings(*p, m, kCpuOnly);
    EXPECT_FALSE(s.ok());
    return s.ok() ? std::string() : s.status().message();
  };
  // Options set in code (not parsed) are range-checked by llama_settings too.
  backend::Placement direct;
  direct.llama.parallel = 0;
  EXPECT_NE(llama_settings(direct, m, kCpuOnly).status().message().find("parallel"), std::string::npos);
  const std::string unknown = err("cpu", {{"n_threads", "2"}});
  EXPECT_NE(unknown.find("'n_threads'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("n_ctx, parallel"), std::string::npos) << unknown;  // lists the known keys
  EXPECT_NE(err("cpu", {{"n_ctx", "12x"}}).find("n_ctx"), std::string::npos);
  EXPECT_NE(err("cpu", {{"parallel", "0"}}).find("parallel"), std::string::npos);
  EXPECT_NE(err("cpu", {{"kv_type", "q3_k"}}).find("iq4_nl"), std::string::npos);
  EXPECT_NE(err("cpu", {{"flash_attn", "yes"}}).find("flash_attn"), std::string::npos);
  EXPECT_NE(err("cpu", {{"tensor_split", "3,x"}}).find("tensor_split"), std::string::npos);
  EXPECT_NE(err("cpu", {{"max_tokens", "0"}}).find("max_tokens"), std::string::npos);
  EXPECT_NE(err("cpu", {{"kv_unified", "maybe"}}).find("kv_unified"), std::string::npos);
  EXPECT_NE(err("cpu", {{"cache_ram", "-2"}}).find("cache_ram"), std::string::npos);
  EXPECT_NE(err("cpu", {{"prefill_chunk", "0"}}).find("prefill_chunk"), std::string::npos);
  EXPECT_NE(err("cpu", {{"parallel", "8"}, {"n_batch", "4"}}).find("n_batch"), std::string::npos);
  EXPECT_NE(err("cpu", {{"kv_type", "q8_0"}, {"flash_attn", "off"}}).find("flash attention"),
            std::string::npos);
  EXPECT_NE(err("cpu", {{"n_gpu_layers", "4"}}).find("provider cpu"), std::string::npos);
  EXPECT_NE(err("cpu", {{"draft_p_min", "1.5"}}).find("draft_p_min"), std::string::npos);
  EXPECT_NE(err("cpu", {{"draft_max", "2000"}}).find("draft_max"), std::string::npos);
  EXPECT_NE(err("cpu", {{"draft_max", "2"}, {"draft_min", "3"}}).find("draft_min=3 must be <= draft_max"),
            std::string::npos);
  EXPECT_NE(err("cpu", {{"spec_type", "ngram-simple,ngram-bogus"}}).find("unknown type 'ngram-bogus'"),
            std::string::npos);
  EXPECT_NE(err("rocm", {}).find("rocm"), std::string::npos);
}

TEST(LlamaSettings, CudaOffloadsWhatThePlannerSaysFits) {
  const plan::ModelProfile m = tiny_profile();
  const uint32_t n_all = m.n_layer() + 1;  // the repeating layers and the output layer
  auto devices = [](uint64_t gpu_free) {
    return std::vector<plan::Device>{plan::memory_target("cpu", "CPU", false, 64ull << 30, 64ull << 30),
                                     plan::memory_target("cuda:0", "GPU", true, gpu_free, gpu_free)};
  };
  // Plenty of VRAM: everything.
  auto all = llama_settings(placement("cuda"), m, devices(8ull << 30));
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  EXPECT_EQ(all->load.placement.n_gpu_layers, static_cast<int>(n_all));
  EXPECT_NE(all->reason.find("all 2 layers"), std::string::npos) << all->reason;
  EXPECT_FALSE(all->engine.one_prompt_per_step) << "a GPU evaluates several prompts together: packed";

  // Exactly the memory the planner predicts for k layers: k fit, k + 1 do not.
  for (uint32_t k = 0; k < n_all; ++k) {
    auto s = llama_settings(placement("cuda"), m, devices(8ull << 30));
    ASSERT_TRUE(s.ok());
    plan::PlanOptions o;
    o.n_ctx = s->context.n_ctx;
    o.n_parallel = s->context.n_seq_max;
    o.n_batch = s->context.n_batch;
    o.n_ubatch = s->context.n_ubatch;
    o.kv_unified = s->context.kv_unified;
    o.n_gpu_layers = static_cast<int>(k);
    auto p = plan::plan_gguf(m, o, devices(8ull << 30));
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    uint64_t need = 0;
    for (const auto& d : p->devices) {
      if (plan::is_gpu(d.device)) need += d.predicted.total();
    }
    auto fit = llama_settings(placement("cuda"), m, devices(need));
    ASSERT_TRUE(fit.ok()) << fit.status().to_string();
    EXPECT_EQ(fit->load.placement.n_gpu_layers, static_cast<int>(k)) << "free " << need;
    EXPECT_NE(fit->reason.find("planner"), std::string::npos) << fit->reason;
  }
  // An explicit n_gpu_layers is taken as given; no GPU at all is Unavailable.
  EXPECT_EQ(
      llama_settings(placement("cuda", {{"n_gpu_layers", "-1"}}), m, kCpuOnly)->load.placement.n_gpu_layers,
      -1);
  EXPECT_EQ(llama_settings(placement("cuda"), m, kCpuOnly).status().code(), StatusCode::kUnavailable);
}

// hardware_requirements.strategy for a GGUF: tensor-parallel is llama.cpp's row split, pipeline its layer
// split, each over the listed devices only; pool keeps the model whole on the device chosen for it.
TEST(LlamaSettings, StrategiesBecomeSplitModes) {
  const plan::ModelProfile m = tiny_profile();
  using SplitMode = LlamaPlacement::SplitMode;
  auto with = [&](const char* strategy, std::vector<int> ids) {
    backend::Placement p = placement("cuda", {{"n_gpu_layers", "-1"}});
    p.strategy = model::parse_strategy(strategy).value();
    p.device_ids = std::move(ids);
    auto s = llama_settings(p, m, kCpuOnly);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return s.ok() ? s->load.placement : LlamaPlacement{};
  };
  const LlamaPlacement tp = with("tensor-parallel", {1, 3});
  EXPECT_EQ(tp.split_mode, SplitMode::kRow);
  EXPECT_EQ(tp.tensor_split, (std::vector<float>{0, 1, 0, 1}));
  const LlamaPlacement pp = with("pipeline", {0, 1});
  EXPECT_EQ(pp.split_mode, SplitMode::kLayer);
  EXPECT_EQ(pp.tensor_split, (std::vector<float>{1, 1}));
  const LlamaPlacement pool = with("pool", {2});
  EXPECT_EQ(pool.split_mode, SplitMode::kNone);
  EXPECT_EQ(pool.main_gpu, 2);
  EXPECT_TRUE(pool.tensor_split.empty());
  // An explicit tensor_split is the user's: kept.
  backend::Placement own = placement("cuda", {{"n_gpu_layers", "-1"}, {"tensor_split", "3,1"}});
  own.strategy = model::Strategy::kTensorParallel;
  own.device_ids = {0, 1};
  EXPECT_EQ(llama_settings(own, m, kCpuOnly)->load.placement.tensor_split, (std::vector<float>{3, 1}));
}

TEST(LlamaSettings, PlacementFromPlanReproducesThePlan) {
  const plan::ModelProfile m = tiny_profile();
  plan::PlanOptions o;
  o.n_ctx = 1024;
  o.n_parallel = 2;
  o.n_batch = 256;
  o.n_ubatch = 128;
  o.kv_type = KvType::kBF16;
  o.n_gpu_layers = 2;
  auto p = plan::plan_gguf(m, o,
                           {plan::memory_target("cpu", "CPU", false, 64ull << 30, 64ull << 30),
                            plan::memory_target("cuda:0", "A", true, 8ull << 30, 8ull << 30),
                            plan::memory_target("cuda:1", "B", true, 8ull << 30, 8ull << 30)});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto s = llama_settings(placement_from_plan(*p), m, kCpuOnly);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->context.n_ctx, p->n_ctx);
  EXPECT_EQ(s->context.n_seq_max, 2u);
  EXPECT_EQ(s->context.n_batch, p->n_batch);
  EXPECT_EQ(s->context.n_ubatch, p->n_ubatch);
  EXPECT_EQ(s->context.type_k, KvType::kBF16);
  EXPECT_EQ(s->load.placement.n_gpu_layers, 2);
  EXPECT_EQ(s->load.placement.tensor_split.size(), 2u);
}

// `gantry plan M.gguf --kv-type q4_1 --measure`: the plan's own placement loads and measures (the
// measure path once knew only five KV types and failed here).
TEST(LlamaSettings, PlanWithQ4_1KvMeasures) {
  const std::string path = testing::bench_model_path();
  auto m = plan::profile_from_gguf(std::filesystem::path(path));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  plan::PlanOptions o;
  o.n_ctx = 1024;
  o.kv_type = KvType::kQ4_1;
  o.kv_unified = true;
  auto p = plan::plan_gguf(*m, o, kCpuOnly);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  backend::Placement placement = placement_from_plan(*p);
  placement.intra_op_threads = 1;
  auto s = llama_settings(placement, path);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->context.type_k, KvType::kQ4_1);
  auto measured = measure_memory(path, *s, /*warm_up=*/false);
  ASSERT_TRUE(measured.ok()) << measured.status().to_string();
  EXPECT_EQ(measured->kv_bytes, p->totals.kv_cache);
  EXPECT_EQ(measured->kv_bytes, 12u * 1024u * 2u * 256u / 32u * 20u);  // q4_1: 20 bytes per 32 values

  // The tiny model's heads are 16 wide (two per 32-wide row): llama.cpp refuses q4_1 for them, and so
  // does the planner now, instead of planning what cannot load.
  auto tiny = plan::plan_gguf(tiny_profile(), o, kCpuOnly);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.status().message().find("multiple of 32"), std::string::npos) << tiny.status().message();
}

// Every KV type reaches llama.cpp as its own ggml type: the dry run's KV bytes are the type's row size.
TEST(LlamaSettings, AllNineKvTypesReachLlamaCpp) {
  const std::string path = testing::bench_model_path();
  for (const char* name : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"}) {
    backend::Placement p = placement("cpu", {{"n_ctx", "256"}, {"kv_type", name}});
    p.intra_op_threads = 1;
    auto s = llama_settings(p, path);
    ASSERT_TRUE(s.ok()) << name << ": " << s.status().to_string();
    auto m = dry_run_memory(path, *s);
    ASSERT_TRUE(m.ok()) << name << ": " << m.status().to_string();
    // 12 layers x 256 cells x K and V rows of 256 values (4 KV heads of 64).
    auto row = kv_row_bytes(*parse_kv_type(name), 256);
    ASSERT_TRUE(row.ok());
    EXPECT_EQ(m->kv_bytes, 12u * 256u * 2u * *row) << name;
  }
}

}  // namespace
}  // namespace gantry::llama

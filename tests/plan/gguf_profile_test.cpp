// GGUF -> planner profile and hw registry -> planner devices, on the generated models.
#include "gantry/plan/gguf_profile.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace gantry::plan {
namespace {

const std::string kModels = GANTRY_DEPS_DIR "/models/";

TEST(ModelProfile, TinyLlama) {
  if (!std::filesystem::exists(kModels + "tiny-llama.gguf")) FAIL() << "run 'make setup' to generate models";
  auto p = profile_from_gguf(std::filesystem::path(kModels + "tiny-llama.gguf"));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->architecture, "llama");
  ASSERT_EQ(p->n_layer(), 2u);
  EXPECT_EQ(p->n_embd, 64u);
  EXPECT_EQ(p->n_vocab, 32000u);
  EXPECT_EQ(p->n_ctx_train, 2048u);
  for (const auto& l : p->layers) {
    EXPECT_EQ(l.n_head, 4u);
    EXPECT_EQ(l.n_head_kv, 2u);
    EXPECT_EQ(l.n_embd_head_k, 16u);
    EXPECT_EQ(l.n_embd_head_v, 16u);
    EXPECT_EQ(l.n_ff, 128u);
    EXPECT_FALSE(l.sliding_window);
    // f16 matrices q, k, v, o, gate, up, down + two f32 norms
    EXPECT_EQ(l.weight_bytes, (64ull * 64 * 2 + 64ull * 32 * 2 + 64ull * 128 * 3) * 2 + 2 * 64 * 4);
  }
  EXPECT_EQ(p->input_weight_bytes, 32000ull * 64 * 2);
  EXPECT_EQ(p->output_weight_bytes, 32000ull * 64 * 2 + 64 * 4);
  EXPECT_EQ(p->total_weight_bytes(), 8340736u);  // llama_model_size()
  EXPECT_EQ(p->n_params, 4170048u);              // llama_model_n_params()
  EXPECT_EQ(p->weight_type, "f16");

  // Planned at ctx 512 on the CPU: KV 2 layers x 512 x 64 x 2 bytes, as llama.cpp allocates (0.12 MiB).
  auto plan = plan::plan_gguf(*p,
                              [] {
                                plan::PlanOptions o;
                                o.n_ctx = 512;
                                return o;
                              }(),
                              {plan::memory_target("cpu", "CPU", false, 1ull << 34, 1ull << 34)});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->totals.kv_cache, 131072u);
  EXPECT_EQ(plan->totals.output, 128000u);
}

TEST(ModelProfile, BenchModelIsQ8) {
  if (!std::filesystem::exists(kModels + "bench-100m-q8_0.gguf")) FAIL() << "run 'make setup'";
  auto p = profile_from_gguf(std::filesystem::path(kModels + "bench-100m-q8_0.gguf"));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->n_layer(), 12u);
  EXPECT_EQ(p->layers[3].n_head_kv, 4u);
  EXPECT_EQ(p->weight_type, "q8_0");
  EXPECT_EQ(p->total_weight_bytes(), 132516864u);  // llama_model_size()
}

TEST(ModelProfile, Q4ModelHasCpuRepackCopies) {
  if (!std::filesystem::exists(kModels + "bench-100m-q4_0.gguf")) FAIL() << "run 'make setup'";
  auto p = profile_from_gguf(std::filesystem::path(kModels + "bench-100m-q4_0.gguf"));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  uint64_t repack = 0;
  for (const auto& l : p->layers) repack += l.repack_bytes;
  // Every q4_0 matrix of every layer (not token_embd, not the q6_K output): llama.cpp's CPU_REPACK buffer was
  // 40.50 MiB for this model.
  EXPECT_EQ(repack, 12ull * (2 * 331776 + 2 * 110592 + 3 * 884736));
  EXPECT_EQ(p->output_repack_bytes, 0u);
  EXPECT_GT(p->mapped_span_bytes, 0u);
  EXPECT_LE(p->mapped_span_bytes, p->total_weight_bytes());
}

TEST(ModelProfile, MissingFieldsAreNamed) {
  // A GGUF with an architecture but no block_count.
  std::vector<uint8_t> b;
  auto put = [&](const void* p, size_t n) { b.insert(b.end(), (const uint8_t*)p, (const uint8_t*)p + n); };
  auto u32 = [&](uint32_t v) { put(&v, 4); };
  auto u64 = [&](uint64_t v) { put(&v, 8); };
  auto str = [&](const std::string& s) {
    u64(s.size());
    put(s.data(), s.size());
  };
  put("GGUF", 4);
  u32(3);
  u64(0);
  u64(1);
  str("general.architecture");
  u32(8);
  str("llama");
  auto f = model::GgufFile::parse(b, "nolayers.gguf");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto p = profile_from_gguf(*f);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("llama.block_count"), std::string::npos) << p.status().to_string();
}

TEST(ModelProfile, DevicesFromRegistry) {
  hw::Registry r;
  r.cpu.model = "Test CPU";
  r.host.memory_total_bytes = 64ull << 30;
  r.host.memory_available_bytes = 48ull << 30;
  r.host.memory_limit_bytes = 32ull << 30;  // a container limit wins
  hw::Device cpu;
  cpu.id = "cpu:0";
  cpu.kind = hw::DeviceKind::kCpu;
  hw::Device gpu;
  gpu.id = "cuda:0";
  gpu.name = "H100";
  gpu.memory_total_bytes = 80ull << 30;
  gpu.memory_free_bytes = 79ull << 30;
  hw::Device unknown_mem;
  unknown_mem.id = "vulkan:0";
  r.devices = {cpu, gpu, unknown_mem};
  const auto d = devices_from_registry(r);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_FALSE(is_gpu(d[0]));
  EXPECT_EQ(device_free_bytes(d[0]), 32ull << 30);
  EXPECT_EQ(device_total_bytes(d[0]), 32ull << 30);
  EXPECT_EQ(hw::memory_device_id(d[0]), "cpu");
  EXPECT_EQ(d[0].name, "Test CPU");
  EXPECT_TRUE(is_gpu(d[1]));
  EXPECT_EQ(hw::memory_device_id(d[1]), "cuda:0");
  EXPECT_EQ(device_free_bytes(d[1]), 79ull << 30);
}

}  // namespace
}  // namespace gantry::plan

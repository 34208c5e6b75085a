// measure_cpu_model_speed: this CPU timed on a model's own matrices (plan --speed's local CPU figure).
#include "gantry/backend/llama/cpu_model_speed.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "backend/llama/llama_test_util.h"
#include "gantry/plan/gguf_profile.h"
#include "gantry/weights/writer.h"

namespace gantry::llama {
namespace {

std::string model_path(const char* name) { return std::string(GANTRY_DEPS_DIR) + "/models/" + name; }

hw::CpuInfo avx2_cpu() {
  hw::CpuInfo cpu;
  cpu.isa = {"avx2", "fma"};
  cpu.cache.l3_bytes = 32ull << 20;
  return cpu;
}

TEST(CpuModelSpeed, TimesEveryLayerOfASmallModelAndItsNodes) {
  const std::string path = testing::tiny_model_path();
  ASSERT_TRUE(std::filesystem::exists(path)) << "run scripts/setup.sh: it generates " << path;
  auto profile = plan::profile_from_gguf(path);
  ASSERT_TRUE(profile.ok()) << profile.status().to_string();
  auto s = measure_cpu_model_speed(path, *profile, avx2_cpu(), 2.0, {.threads = 2, .budget_ms = 20});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_GT(s->memory_bandwidth, 0);
  EXPECT_EQ(s->bandwidth_efficiency, 1.0);
  EXPECT_TRUE(s->overlap);  // the timed rate already holds the arithmetic
  EXPECT_EQ(s->bandwidth_source, "measured");
  EXPECT_GT(s->seconds_per_node, 0);
  EXPECT_EQ(s->seconds_per_step, plan::kCpuHostSecondsPerStep);
  // FLOP/s stay the ISA estimate (2 threads x 2 GHz x 32 FLOP/cycle), which bounds batched steps.
  EXPECT_DOUBLE_EQ(s->flops, 2 * 2e9 * 32);
  EXPECT_EQ(s->cache_bytes, 32ull << 20);
  // Both of its layers (7 matrices each) and the output projection: the whole model fits in max_bytes.
  EXPECT_NE(s->description.find("2 copies of layer 0 and the output projection (15 matrices"),
            std::string::npos)
      << s->description;
}

TEST(CpuModelSpeed, ALargerModelThanTheLimitIsTimedOnFewerLayers) {
  const std::string path = testing::bench_model_path();  // 12 layers, ~8 MiB each in q8_0
  ASSERT_TRUE(std::filesystem::exists(path)) << "run scripts/setup.sh: it generates " << path;
  auto profile = plan::profile_from_gguf(path);
  ASSERT_TRUE(profile.ok()) << profile.status().to_string();
  auto s = measure_cpu_model_speed(path, *profile, avx2_cpu(), 2.0,
                                   {.threads = 1, .max_bytes = 48ull << 20, .budget_ms = 20});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_GT(s->memory_bandwidth, 0);
  // The output projection (32000 x 768 q8_0, 24.9 MiB) is over half of 48 MiB: a slice of its rows; the rest
  // of the room holds 2 or 3 layer copies, not 12.
  EXPECT_EQ(s->description.find("12 copies"), std::string::npos) << s->description;
  EXPECT_NE(s->description.find(" copies of layer 0"), std::string::npos) << s->description;
}

TEST(CpuModelSpeed, ARepackedTypeIsTimedWhereLlamaCppPutsIt) {
  const std::string path = model_path("bench-100m-q4_0.gguf");
  ASSERT_TRUE(std::filesystem::exists(path)) << "run scripts/setup.sh: it generates " << path;
  auto profile = plan::profile_from_gguf(path);
  ASSERT_TRUE(profile.ok()) << profile.status().to_string();
  auto s = measure_cpu_model_speed(path, *profile, avx2_cpu(), 2.0, {.threads = 1, .budget_ms = 20});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  // The planner's profile says which bytes llama.cpp repacks on this CPU; the measurement places the same.
  uint64_t repacked = profile->output_repack_bytes;
  for (const auto& l : profile->layers) repacked += l.repack_bytes;
  EXPECT_EQ(s->description.find("CPU_REPACK") != std::string::npos, repacked > 0) << s->description;
}

weights::Weight weight(const std::string& name, DType type, std::vector<int64_t> shape) {
  const Shape sh(shape);
  Tensor t = Tensor::allocate(type, sh).value();  // zeroed
  return {name, type, sh, std::move(t)};
}

TEST(CpuModelSpeed, MatricesTheCpuCannotMultiplyAreLeftOutNotAborted) {
  // A file our GGUF reader accepts whose first layer holds an i32 "weight": ggml has no product for it, and
  // computing one would abort the process. It is left out; a layer of nothing else is an error.
  const auto dir = std::filesystem::temp_directory_path();
  const auto mixed = dir / "gantry-cpu-speed-mixed.gguf", only_ints = dir / "gantry-cpu-speed-ints.gguf";
  ASSERT_TRUE(weights::write_gguf(mixed,
                                  {weight("blk.0.attn_q.weight", DType::kInt32, {8, 64}),
                                   weight("blk.0.ffn_up.weight", DType::kFloat32, {32, 64})},
                                  {{"general.architecture", "llama"}})
                  .ok());
  ASSERT_TRUE(weights::write_gguf(only_ints, {weight("blk.0.attn_q.weight", DType::kInt32, {8, 64})},
                                  {{"general.architecture", "llama"}})
                  .ok());
  plan::ModelProfile profile;
  profile.layers.resize(2);
  profile.n_embd = 64;
  auto s = measure_cpu_model_speed(mixed.string(), profile, avx2_cpu(), 2.0, {.threads = 1, .budget_ms = 5});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_NE(s->description.find("2 copies of layer 0 (2 matrices"), std::string::npos) << s->description;
  s = measure_cpu_model_speed(only_ints.string(), profile, avx2_cpu(), 2.0, {.threads = 1, .budget_ms = 5});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("no weight matrices"), std::string::npos) << s.status().to_string();
  std::filesystem::remove(mixed);
  std::filesystem::remove(only_ints);
}

TEST(CpuModelSpeed, NotAGgufFileIsAClearError) {
  const auto path = std::filesystem::temp_directory_path() / "gantry-cpu-speed-not.gguf";
  std::ofstream(path) << "not a model";
  plan::ModelProfile profile;
  auto s = measure_cpu_model_speed(path.string(), profile, avx2_cpu(), 2.0, {.threads = 1});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(path.string()), std::string::npos) << s.status().to_string();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace gantry::llama

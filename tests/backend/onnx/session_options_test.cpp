// The manifest's ONNX Runtime options reach the session and change what it does, seen from outside: the
// threads it starts (intra_op_threads, inter_op_threads) and what it asks Gantry's pool for on each Run
// (memory_pattern, graph_optimization_level). A setting that stopped reaching the session fails here.
#include <dirent.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "backend/onnx/onnx_test_util.h"
#include "gantry/backend/onnx/onnx_model.h"
#include "gantry/backend/onnx/ort_env.h"
#include "gantry/memory/block_pool.h"

namespace gantry::onnx {
namespace {

namespace fs = std::filesystem;
using backend::NamedTensor;
using backend::Placement;
const fs::path kMlp = fs::path(GANTRY_DEPS_DIR) / "models" / "mlp_64_128_10.onnx";
const fs::path kSilero = fs::path(GANTRY_DEPS_DIR) / "models" / "silero_vad_v5.onnx";

std::vector<NamedTensor> silero_inputs() {
  std::vector<float> audio(512), state(2 * 128, 0.0f);
  for (size_t i = 0; i < audio.size(); ++i) audio[i] = 0.3f * static_cast<float>((i * 7) % 11) - 1.0f;
  return {{"input", Tensor::from_values<float>(DType::kFloat32, Shape({1, 512}), audio).value()},
          {"state", Tensor::from_values<float>(DType::kFloat32, Shape({2, 1, 128}), state).value()},
          {"sr", Tensor::from_values<int64_t>(DType::kInt64, Shape(), {16000}).value()}};
}

int process_threads() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++n;
    ::closedir(d);
  }
  return n;
}

std::vector<NamedTensor> mlp_rows(int64_t rows) {
  std::vector<float> v(static_cast<size_t>(rows) * 64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>(i % 31) - 0.1f;
  return {{"input", Tensor::from_values<float>(DType::kFloat32, Shape({rows, 64}), v).value()}};
}

TEST(SessionOptions, ThreadCountsStartThatManyThreads) {
  ASSERT_TRUE(fs::exists(kMlp)) << kMlp;
  ASSERT_TRUE(OrtRuntime::get().ok());
  auto threads_of = [](int intra, int inter) {
    Placement p;
    p.intra_op_threads = intra;
    p.inter_op_threads = inter;
    const int before = process_threads();
    auto m = OnnxModel::open(kMlp, p);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return process_threads() -
           before;  // the session's pools; its caller's thread is one of the intra-op ones
  };
  // Counts above the machine's hardware threads are capped (with a warning): 2 is there on any test machine.
  const int one = threads_of(1, 1);
  EXPECT_EQ(threads_of(2, 1) - one, 1) << "intra_op_threads 2: one more pool thread than 1";
  EXPECT_EQ(threads_of(1, 2) - one, 1) << "inter_op_threads 2: the parallel executor's pool";
}

// Allocations one Run asks the pool for, after a warm-up Run (which plans the memory pattern).
uint64_t allocations_per_run(const Placement& p, const fs::path& model = kSilero) {
  memory::BlockPoolOptions o;
  o.reuse_cache_bytes = 0;
  auto pool = std::make_unique<memory::BlockPool>(memory::make_host_backing(), o);
  OrtRuntime* rt = *OrtRuntime::get();
  EXPECT_TRUE(rt->use_pool(pool.get()).ok());
  OnnxModelOptions mo;
  mo.use_env_allocators = true;
  uint64_t n = 0;
  {
    auto m = OnnxModel::open(model, p, "options", mo);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    if (m.ok()) {
      const auto in = model == kSilero ? silero_inputs() : mlp_rows(3);
      EXPECT_TRUE((*m)->infer_one(in).ok());
      EXPECT_TRUE((*m)->infer_one(in).ok());
      const uint64_t before = pool->stats().total_allocations;
      EXPECT_TRUE((*m)->infer_one(in).ok());
      n = pool->stats().total_allocations - before;
    }
  }
  rt->release_pool(pool.get());
  return n;
}

TEST(SessionOptions, MemoryPatternAndGraphOptimisationChangeWhatARunAllocates) {
  ASSERT_TRUE(fs::exists(kSilero)) << kSilero;
  Placement base = testing::one_thread();
  Placement pattern_off = base;
  pattern_off.onnx.memory_pattern = false;
  Placement pattern_on = base;
  pattern_on.onnx.memory_pattern = true;
  const uint64_t on = allocations_per_run(pattern_on), off = allocations_per_run(pattern_off);
  std::printf("allocations per Run of silero: memory pattern on %llu, off %llu\n", (unsigned long long)on,
              (unsigned long long)off);
  EXPECT_LT(on, off) << "a planned memory pattern takes one block for the intermediates";

  Placement unoptimised = pattern_off;
  unoptimised.onnx.graph_optimization = model::GraphOptimizationLevel::kDisable;
  Placement optimised = pattern_off;
  optimised.onnx.graph_optimization = model::GraphOptimizationLevel::kAll;
  const uint64_t raw = allocations_per_run(unoptimised), fused = allocations_per_run(optimised);
  std::printf("allocations per Run of silero: optimisation off %llu, all %llu\n", (unsigned long long)raw,
              (unsigned long long)fused);
  EXPECT_LT(fused, raw) << "fusing nodes leaves fewer intermediate tensors to allocate";
}

}  // namespace
}  // namespace gantry::onnx

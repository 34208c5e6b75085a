// llama.cpp's CPU weights drawn from a memory::BlockPool (through tensor_buft_overrides) where that is no
// slower: read into memory, on the CPU, no repackable tensor types. Elsewhere the pool stays untouched.
#include <gtest/gtest.h>

#include <filesystem>

#include "backend/llama/llama_test_util.h"
#include "gantry/backend/llama/llama_backend.h"
#include "gantry/memory/backing.h"
#include "gantry/memory/block_pool.h"
#include "gantry/memory/budget.h"

namespace gantry::llama {
namespace {

backend::Placement cpu_placement(bool mmap) {
  backend::Placement p;
  p.provider = "cpu";
  p.intra_op_threads = 1;
  p.model_name = "pooled";
  p.llama.n_ctx = 256;
  p.llama.mmap = mmap;
  return p;
}

std::string greedy(backend::Model& m) {
  backend::GenerationRequest r;
  r.prompt = "Once upon a time";
  r.max_tokens = 8;
  r.sampling.temperature = 0;
  auto g = m.generate(r);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return g.ok() ? g->text : std::string();
}

TEST(LlamaPoolWeights, CpuWeightsReadIntoMemoryComeFromThePoolAndGoBackOnUnload) {
  ASSERT_TRUE(std::filesystem::exists(testing::tiny_model_path())) << "run `make setup`";
  memory::Budget budget("cpu", 1ull << 30);
  memory::BlockPoolOptions po;
  po.budget = &budget;
  memory::BlockPool pool(memory::make_host_backing(), po);
  LlamaBackend pooled(&pool);
  LlamaBackend plain;

  auto reference = plain.load_file(testing::tiny_model_path(), cpu_placement(/*mmap=*/false));
  ASSERT_TRUE(reference.ok()) << reference.status().to_string();
  const std::string want = greedy(**reference);
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(pool.stats().bytes_in_use, 0u);

  {
    auto m = pooled.load_file(testing::tiny_model_path(), cpu_placement(/*mmap=*/false));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    // The f16/f32 weights (8.3 MB) live in the pool, charged to the model in the budget.
    const auto st = pool.stats();
    EXPECT_GE(st.bytes_in_use, 8'339'456u);
    EXPECT_LT(st.bytes_in_use, 9'000'000u);
    bool charged = false;
    for (const auto& o : budget.ledger())
      if (o.owner == "pooled") charged = o.in_use == st.bytes_in_use;
    EXPECT_TRUE(charged) << "the pool's bytes are charged to the model";
    EXPECT_EQ(greedy(**m), want) << "the same tokens as llama.cpp's own buffers";
  }
  EXPECT_EQ(pool.stats().bytes_in_use, 0u) << "unloading returns the weights to the pool";
  EXPECT_EQ(pool.stats().bad_frees, 0u);

  // Mapped weights are the file's pages: the pool is not used (it would be a copy).
  auto mapped = pooled.load_file(testing::tiny_model_path(), cpu_placement(/*mmap=*/true));
  ASSERT_TRUE(mapped.ok()) << mapped.status().to_string();
  EXPECT_EQ(pool.stats().bytes_in_use, 0u);
}

TEST(LlamaPoolWeights, RepackableTypesKeepLlamaCppsOwnBuffers) {
  ASSERT_TRUE(std::filesystem::exists(testing::bench_model_path())) << "run `make setup`";
  memory::BlockPool pool(memory::make_host_backing());
  LlamaBackend pooled(&pool);
  auto m = pooled.load_file(testing::bench_model_path(), cpu_placement(/*mmap=*/false));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(pool.stats().bytes_in_use, 0u) << "q8_0 weights may be repacked by ggml: not overridden";
}

}  // namespace
}  // namespace gantry::llama

// CUDA VMM backing: runs where libcuda.so.1 and a GPU exist, skips with the reason elsewhere.
#include <gtest/gtest.h>

#include "gantry/memory/backing.h"
#include "gantry/memory/block_pool.h"
#include "gantry/memory/budget.h"

namespace gantry::memory {
namespace {

constexpr uint64_t MiB = 1ull << 20;

TEST(CudaBacking, UnavailableSaysWhyOrMapsBlocks) {
  auto backing = make_cuda_backing(0);
  if (!backing.ok()) {
    EXPECT_EQ(backing.status().code(), StatusCode::kUnavailable);
    EXPECT_FALSE(backing.status().message().empty());
    GTEST_SKIP() << "no CUDA VMM here: " << backing.status().message();
  }
  Backing& b = **backing;
  EXPECT_EQ(b.device(), "cuda:0");
  EXPECT_FALSE(b.host_accessible());
  ASSERT_GT(b.granularity(), 0u);
  EXPECT_EQ(b.granularity() % (64 * 1024), 0u);
  auto block = b.map(b.granularity() * 2);
  ASSERT_TRUE(block.ok()) << block.status().to_string();
  EXPECT_NE(block->base, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block->base) % b.granularity(), 0u);
  b.unmap(*block);
  EXPECT_FALSE(b.map(b.granularity() + 1).ok());
}

TEST(CudaBacking, PoolOverDeviceMemory) {
  auto backing = make_cuda_backing(0);
  if (!backing.ok()) GTEST_SKIP() << "no CUDA VMM here: " << backing.status().message();
  Budget budget("cuda:0", 64 * MiB);
  BlockPoolOptions o;
  o.block_size = 8 * MiB;
  o.keep_empty_blocks = 0;
  o.budget = &budget;
  BlockPool pool(std::move(backing).value(), o);
  std::vector<void*> ps;
  for (int i = 0; i < 20; ++i) {
    auto p = pool.allocate_for("m", (i + 1) * 100 * 1024);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    ps.push_back(*p);
  }
  EXPECT_GT(pool.stats().blocks, 0u);
  EXPECT_EQ(budget.usage("m")->in_use, pool.stats().bytes_in_use);
  EXPECT_FALSE(pool.allocate_for("m", 60 * MiB).ok());  // over the budget
  for (void* p : ps) ASSERT_TRUE(pool.free(p).ok());
  EXPECT_EQ(pool.stats().blocks, 0u);  // empty blocks unmapped and returned
  EXPECT_EQ(pool.stats().bytes_reserved, 0u);
}

}  // namespace
}  // namespace gantry::memory

// BlockPool::reset_peaks: the peak of what happened since (one inference after a load), per pool and owner.
#include <gtest/gtest.h>

#include "gantry/memory/block_pool.h"
#include "gantry/memory/owner_scope.h"

namespace gantry::memory {
namespace {

constexpr uint64_t MiB = 1024 * 1024;

TEST(BlockPoolPeaks, ResetStartsThePeaksFromWhatIsLiveNow) {
  BlockPoolOptions o;
  o.block_size = 4 * MiB;
  o.keep_empty_blocks = 0;
  o.reuse_cache_bytes = 0;
  BlockPool pool(make_host_backing(), o);
  OwnerScope scope("m");
  auto weights = pool.allocate(2 * MiB);
  ASSERT_TRUE(weights.ok());
  auto transient = pool.allocate(8 * MiB);  // a load-time copy, freed again
  ASSERT_TRUE(transient.ok());
  ASSERT_TRUE(pool.free(*transient).ok());
  EXPECT_EQ(pool.stats().peak_in_use, 10 * MiB);
  const uint64_t reserved_before = pool.stats().peak_reserved;
  EXPECT_GE(reserved_before, 10 * MiB);

  pool.reset_peaks();
  PoolStats s = pool.stats();
  EXPECT_EQ(s.peak_in_use, 2 * MiB);
  EXPECT_EQ(s.peak_reserved, s.bytes_reserved);
  EXPECT_LT(s.peak_reserved, reserved_before);  // the transient's block went back
  EXPECT_EQ(pool.owner("m")->peak_in_use, 2 * MiB);

  auto act = pool.allocate(1 * MiB);  // one "inference"
  ASSERT_TRUE(act.ok());
  ASSERT_TRUE(pool.free(*act).ok());
  s = pool.stats();
  EXPECT_EQ(s.peak_in_use, 3 * MiB);
  EXPECT_EQ(pool.owner("m")->peak_in_use, 3 * MiB);
  EXPECT_EQ(s.bytes_in_use, 2 * MiB);
  ASSERT_TRUE(pool.free(*weights).ok());
}

}  // namespace
}  // namespace gantry::memory

#include "gantry/memory/block_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

#include "gantry/memory/budget.h"
#include "gantry/memory/owner_scope.h"

namespace gantry::memory {
namespace {

constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * KiB;

std::unique_ptr<BlockPool> host_pool(BlockPoolOptions o = {}) {
  return std::make_unique<BlockPool>(make_host_backing(), o);
}

bool aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

TEST(OwnerScope, NestsPerThread) {
  EXPECT_EQ(OwnerScope::current(), kUnattributed);
  EXPECT_EQ(OwnerScope::current_serial(), 0u);
  {
    OwnerScope a("a");
    EXPECT_EQ(OwnerScope::current(), "a");
    const uint64_t sa = OwnerScope::current_serial();
    {
      OwnerScope b("b");
      EXPECT_EQ(OwnerScope::current(), "b");
      EXPECT_NE(OwnerScope::current_serial(), sa);
      std::thread([] { EXPECT_EQ(OwnerScope::current(), kUnattributed); }).join();
    }
    EXPECT_EQ(OwnerScope::current(), "a");
    EXPECT_EQ(OwnerScope::current_serial(), sa);
  }
  EXPECT_EQ(OwnerScope::current(), kUnattributed);
}

TEST(BlockPool, ChurnThenFullFreeCoalescesAndReturnsBlocks) {
  BlockPoolOptions o;
  o.block_size = 4 * MiB;
  o.keep_empty_blocks = 1;
  auto pool = host_pool(o);
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> kind(0, 9);
  std::uniform_int_distribution<uint64_t> small(1, BlockPool::kSmallLimit);
  std::uniform_int_distribution<uint64_t> large(BlockPool::kSmallLimit + 1, 3 * MiB);
  std::vector<std::pair<unsigned char*, uint64_t>> live;
  uint64_t expected_in_use = 0;
  for (int i = 0; i < 6000; ++i) {
    if (!live.empty() && (kind(rng) < 4 || live.size() > 300)) {
      std::uniform_int_distribution<size_t> pick(0, live.size() - 1);
      const size_t k = pick(rng);
      // The bytes written at allocation are still there: no other allocation overlapped it.
      const auto [p, n] = live[k];
      ASSERT_EQ(p[0], static_cast<unsigned char>(n));
      ASSERT_EQ(p[n - 1], static_cast<unsigned char>(n >> 3));
      expected_in_use -= pool->allocation_size(p);
      ASSERT_TRUE(pool->free(p).ok());
      live[k] = live.back();
      live.pop_back();
    } else {
      const uint64_t n = kind(rng) < 8 ? small(rng) : large(rng);
      auto r = pool->allocate(n);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      auto* p = static_cast<unsigned char*>(*r);
      ASSERT_TRUE(aligned(p, 64));
      const uint64_t sz = pool->allocation_size(p);
      ASSERT_GE(sz, n);
      ASSERT_EQ(sz % 64, 0u);
      p[0] = static_cast<unsigned char>(n);
      p[n - 1] = static_cast<unsigned char>(n >> 3);
      expected_in_use += sz;
      live.emplace_back(p, n);
    }
    ASSERT_EQ(pool->stats().bytes_in_use, expected_in_use);
  }
  const PoolStats busy = pool->stats();
  EXPECT_GT(busy.blocks, 1u);
  EXPECT_EQ(busy.allocations, live.size());
  for (auto [p, n] : live) ASSERT_TRUE(pool->free(p).ok());
  const PoolStats idle = pool->stats();
  EXPECT_EQ(idle.bytes_in_use, 0u);
  EXPECT_EQ(idle.allocations, 0u);
  EXPECT_EQ(idle.bad_frees, 0u);
  EXPECT_GT(idle.peak_in_use, 0u);
  // Every block but the one kept is back with the backing; the kept one is a single free run.
  ASSERT_EQ(idle.blocks, 1u);
  auto blocks = pool->blocks();
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].free_runs, 1u);
  EXPECT_EQ(blocks[0].used_runs, 0u);
  EXPECT_EQ(blocks[0].free_bytes, blocks[0].size);
  EXPECT_EQ(idle.blocks_mapped - idle.blocks_unmapped, 1u);
  pool->trim();
  EXPECT_EQ(pool->stats().blocks, 0u);
  EXPECT_EQ(pool->stats().bytes_reserved, 0u);
}

// A pool with a stricter minimum (256 bytes: CUDA memory) aligns and sizes everything to it, small requests
// and cached runs included.
TEST(BlockPool, MinAlignmentAppliesToEveryAllocation) {
  BlockPoolOptions o;
  o.min_alignment = 200;  // rounded up to a power of two: 256
  BlockPool pool(make_host_backing(), o);
  EXPECT_EQ(pool.options().min_alignment, 256u);
  std::vector<void*> ps;
  for (uint64_t size :
       {uint64_t{1}, uint64_t{64}, uint64_t{65}, uint64_t{300}, uint64_t{4096}, 40 * KiB + 3}) {
    for (int k = 0; k < 3; ++k) {
      auto p = pool.allocate(size);
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 256, 0u) << size;
      EXPECT_EQ(pool.allocation_size(*p) % 256, 0u) << size;
      ps.push_back(*p);
    }
  }
  // Freed and asked for again (the reuse cache): still aligned.
  for (size_t i = 0; i < ps.size(); i += 2) ASSERT_TRUE(pool.free(ps[i]).ok());
  for (size_t i = 0; i < ps.size(); i += 2) {
    auto p = pool.allocate(pool.allocation_size(ps[i + 1]));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 256, 0u);
    ps[i] = *p;
  }
  for (void* p : ps) ASSERT_TRUE(pool.free(p).ok());
  EXPECT_EQ(pool.stats().bytes_in_use, 0u);
}

TEST(BlockPool, FreedNeighboursCoalesce) {
  BlockPoolOptions o;
  o.block_size = 2 * MiB;
  o.keep_empty_blocks = 1;
  o.reuse_cache_bytes = 0;  // every free coalesces at once
  auto pool = host_pool(o);
  void* a = *pool->allocate(100 * KiB);
  void* b = *pool->allocate(100 * KiB);
  void* c = *pool->allocate(100 * KiB);
  ASSERT_EQ(pool->blocks().size(), 1u);
  EXPECT_EQ(pool->blocks()[0].used_runs, 3u);
  ASSERT_TRUE(pool->free(a).ok());
  ASSERT_TRUE(pool->free(c).ok());  // c merges with the tail
  EXPECT_EQ(pool->blocks()[0].free_runs, 2u);
  // A request that fits in a's hole takes it (best fit), not the big tail.
  void* d = *pool->allocate(90 * KiB);
  EXPECT_EQ(d, a);
  ASSERT_TRUE(pool->free(d).ok());
  ASSERT_TRUE(pool->free(b).ok());  // now a+b+tail are one run
  EXPECT_EQ(pool->blocks()[0].free_runs, 1u);
  EXPECT_EQ(pool->blocks()[0].free_bytes, pool->blocks()[0].size);
}

TEST(BlockPool, ReuseCacheServesTheSameSizeAndFlushes) {
  BlockPoolOptions o;
  o.block_size = 2 * MiB;
  o.capacity = 4 * MiB;
  auto pool = host_pool(o);
  void* keep = *pool->allocate(1000);  // something stays allocated
  void* a = *pool->allocate(300 * KiB);
  void* b = *pool->allocate(300 * KiB);
  ASSERT_TRUE(pool->free(a).ok());
  EXPECT_EQ(pool->stats().cached_bytes, 300 * KiB);
  EXPECT_FALSE(pool->free(a).ok());  // a cached run is not a live allocation
  EXPECT_EQ(pool->allocation_size(a), 0u);
  void* c = *pool->allocate(300 * KiB);  // exactly that size: the cached run
  EXPECT_EQ(c, a);
  EXPECT_EQ(pool->stats().cache_hits, 1u);
  EXPECT_EQ(pool->stats().cached_bytes, 0u);
  ASSERT_TRUE(pool->free(b).ok());
  ASSERT_TRUE(pool->free(c).ok());
  EXPECT_EQ(pool->stats().cached_bytes, 600 * KiB);
  // A request that only fits once the cached runs coalesce with the rest: flushed, no new block.
  auto big = pool->allocate(2 * MiB - 64 * KiB - 2 * 300 * KiB + 500 * KiB);
  ASSERT_TRUE(big.ok()) << big.status().to_string();
  EXPECT_EQ(pool->stats().cached_bytes, 0u);
  ASSERT_TRUE(pool->free(*big).ok());
  // Nothing allocated any more: everything coalesces, cache empty.
  ASSERT_TRUE(pool->free(keep).ok());
  EXPECT_EQ(pool->stats().cached_bytes, 0u);
  for (const auto& blk : pool->blocks()) EXPECT_EQ(blk.free_runs, 1u);
  EXPECT_EQ(pool->stats().bad_frees, 1u);
}

TEST(BlockPool, DoubleFreeAndForeignPointerAreCountedErrors) {
  auto pool = host_pool();
  void* small = *pool->allocate(100);
  void* big = *pool->allocate(1 * MiB);
  void* other = *pool->allocate(100);
  ASSERT_TRUE(pool->free(small).ok());
  Status s = pool->free(small);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(pool->free(big).ok());
  EXPECT_FALSE(pool->free(big).ok());
  int on_stack = 0;
  EXPECT_FALSE(pool->free(&on_stack).ok());
  std::unique_ptr<char[]> heap(new char[64]);
  EXPECT_FALSE(pool->free(heap.get()).ok());
  EXPECT_FALSE(pool->free(static_cast<char*>(other) + 8).ok());  // inside a live slot
  const PoolStats st = pool->stats();
  EXPECT_EQ(st.bad_frees, 5u);
  EXPECT_EQ(st.allocations, 1u);  // `other` still live and intact
  EXPECT_EQ(pool->allocation_size(other), 128u);
  ASSERT_TRUE(pool->free(other).ok());
  EXPECT_EQ(pool->stats().bytes_in_use, 0u);
}

TEST(BlockPool, LargerThanCapacityFailsCleanly) {
  BlockPoolOptions o;
  o.capacity = 8 * MiB;
  o.block_size = 2 * MiB;
  auto pool = host_pool(o);
  auto r = pool->allocate(9 * MiB);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("larger than the memory pool"), std::string::npos);
  // Up to the capacity works; one more block does not.
  std::vector<void*> ps;
  for (int i = 0; i < 4; ++i) {
    auto p = pool->allocate(2 * MiB);
    ASSERT_TRUE(p.ok()) << i << ": " << p.status().to_string();
    ps.push_back(*p);
  }
  auto over = pool->allocate(1);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("capacity 8.0 MiB"), std::string::npos) << over.status().message();
  EXPECT_EQ(pool->stats().failed, 2u);
  EXPECT_EQ(pool->stats().bytes_reserved, 8 * MiB);
  for (void* p : ps) ASSERT_TRUE(pool->free(p).ok());
  EXPECT_TRUE(pool->allocate(7 * MiB).ok());  // empty blocks are given back to make room
}

TEST(BlockPool, ZeroSizeAndBadAlignment) {
  auto pool = host_pool();
  auto z = pool->allocate(0);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(*z, nullptr);
  EXPECT_TRUE(pool->free(nullptr).ok());
  EXPECT_EQ(pool->stats().total_allocations, 0u);
  EXPECT_EQ(pool->stats().bad_frees, 0u);
  auto bad = pool->allocate(64, 48);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(BlockPool, EveryPointerIsAligned) {
  auto pool = host_pool();
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint64_t> size(1, 200 * KiB);
  std::vector<void*> ps;
  for (size_t align : {size_t{0}, size_t{16}, size_t{64}, size_t{128}, size_t{256}, size_t{4096},
                       size_t{65536}, size_t{1} << 21}) {
    for (int i = 0; i < 50; ++i) {
      auto p = pool->allocate(size(rng), align);
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      EXPECT_TRUE(aligned(*p, std::max<size_t>(align, 64))) << *p << " align " << align;
      ps.push_back(*p);
    }
  }
  for (void* p : ps) ASSERT_TRUE(pool->free(p).ok());
  EXPECT_EQ(pool->stats().bytes_in_use, 0u);
  for (const auto& b : pool->blocks()) EXPECT_EQ(b.free_runs, 1u);
}

TEST(BlockPool, ConcurrentAllocFree) {
  auto pool = host_pool();
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      OwnerScope scope("thread" + std::to_string(t % 2));
      std::mt19937 rng(t);
      std::uniform_int_distribution<uint64_t> size(1, 128 * KiB);
      std::vector<std::pair<unsigned char*, unsigned char>> mine;
      for (int i = 0; i < 3000; ++i) {
        if (mine.size() > 20 || (!mine.empty() && rng() % 2)) {
          auto [p, tag] = mine.back();
          mine.pop_back();
          if (p[0] != tag) ++errors;  // someone else wrote into our allocation
          if (!pool->free(p).ok()) ++errors;
        } else {
          auto r = pool->allocate(size(rng));
          if (!r.ok()) {
            ++errors;
            continue;
          }
          auto* p = static_cast<unsigned char*>(*r);
          const auto tag = static_cast<unsigned char>(rng());
          p[0] = tag;
          mine.emplace_back(p, tag);
        }
      }
      for (auto [p, tag] : mine)
        if (!pool->free(p).ok()) ++errors;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  const PoolStats st = pool->stats();
  EXPECT_EQ(st.bytes_in_use, 0u);
  EXPECT_EQ(st.allocations, 0u);
  EXPECT_EQ(st.bad_frees, 0u);
  EXPECT_GT(pool->owner("thread0")->peak_in_use, 0u);
  EXPECT_GT(pool->owner("thread1")->peak_in_use, 0u);
}

TEST(BlockPool, BudgetSeesChargesPerOwner) {
  Budget budget("cpu", 1 * MiB);
  BlockPoolOptions o;
  o.budget = &budget;
  auto pool = host_pool(o);
  void* a = nullptr;
  void* b = nullptr;
  {
    OwnerScope scope("model-a");
    a = *pool->allocate(300 * KiB);
    void* tiny = *pool->allocate(10);  // a 64-byte slot
    ASSERT_TRUE(pool->free(tiny).ok());
  }
  {
    OwnerScope scope("model-b");
    b = *pool->allocate(200 * KiB);
  }
  void* u = *pool->allocate(1000);  // no scope
  EXPECT_EQ(budget.usage("model-a")->in_use, 300 * KiB);
  EXPECT_EQ(budget.usage("model-a")->peak, 300 * KiB + 64);
  EXPECT_EQ(budget.usage("model-b")->in_use, 200 * KiB);
  EXPECT_EQ(budget.usage(kUnattributed)->in_use, 1024u);  // the 1024-byte class
  EXPECT_EQ(pool->owner("model-a")->bytes_in_use, 300 * KiB);
  EXPECT_EQ(pool->owner("model-b")->allocations, 1u);
  EXPECT_EQ(pool->owners().size(), 3u);
  // The budget refuses: the allocation fails, nothing is left charged or allocated.
  {
    OwnerScope scope("model-b");
    auto r = pool->allocate(600 * KiB);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
    EXPECT_NE(r.status().message().find("budget 1.0 MiB"), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(budget.usage("model-b")->in_use, 200 * KiB);
  EXPECT_EQ(pool->owner("model-b")->bytes_in_use, 200 * KiB);
  EXPECT_EQ(pool->stats().failed, 1u);
  // Explicit owner.
  void* c = *pool->allocate_for("model-c", 100 * KiB);
  EXPECT_EQ(budget.usage("model-c")->in_use, 100 * KiB);
  for (void* p : {a, b, u, c}) ASSERT_TRUE(pool->free(p).ok());
  for (const auto& o : budget.ledger()) EXPECT_EQ(o.in_use, 0u) << o.owner;
  EXPECT_EQ(budget.over_credits(), 0u);
}

TEST(BlockPool, SmallSlotsDoNotOverlap) {
  auto pool = host_pool();
  std::vector<std::pair<char*, uint64_t>> ps;
  for (uint64_t n = 1; n <= BlockPool::kSmallLimit; n = n * 3 / 2 + 1)
    for (int i = 0; i < 40; ++i) {
      auto* p = static_cast<char*>(*pool->allocate(n));
      std::memset(p, static_cast<int>(ps.size() & 0xff), n);
      ps.emplace_back(p, n);
    }
  for (size_t k = 0; k < ps.size(); ++k) {
    auto [p, n] = ps[k];
    for (uint64_t j = 0; j < n; j += 7) ASSERT_EQ(static_cast<unsigned char>(p[j]), k & 0xff);
  }
  for (auto [p, n] : ps) ASSERT_TRUE(pool->free(p).ok());
  pool->trim();
  EXPECT_EQ(pool->stats().blocks, 0u);
}

}  // namespace
}  // namespace gantry::memory

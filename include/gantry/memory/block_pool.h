// BlockPool: one device's allocator over a Backing, with per-owner attribution and an optional Budget.
//
// - Blocks (at least options.block_size, multiples of the backing's granularity) are mapped on demand
//   until options.capacity bytes are reserved; empty blocks beyond options.keep_empty_blocks are
//   unmapped and returned to the backing at once.
// - Requests up to kSmallLimit bytes (with alignment <= 64) come from size classes: slabs carved out of
//   blocks, one slot per allocation. Larger ones take the best-fitting free run of a block (the
//   smallest that fits), and freed runs coalesce with free neighbours. A freed large run may first
//   wait in a small exact-size reuse cache (options.reuse_cache_bytes); the cache is flushed (its runs
//   coalesced) before the pool maps a block or fails, whenever nothing is allocated any more, and by
//   trim().
// - Every returned pointer is aligned to max(64, options.min_alignment, alignment). Sizes are rounded up
//   to 64 bytes (small ones to their size class; to min_alignment when that is larger); the rounded size
//   is what is charged and reported.
// - Each allocation is attributed to OwnerScope::current() (or the owner passed explicitly) and charged
//   to that owner in a Budget's ledger: options.budget's when set, else an unlimited budget the pool makes
//   for itself. A charge the budget refuses fails the allocation (ResourceExhausted with the budget's
//   numbers); a charged allocation the pool then cannot place is refunded (Budget::refund), leaving no
//   trace. The pool never evicts anything.
// - Per-owner bytes in use and their peak have one record, that ledger: owners() and owner() read them
//   from it and the pool keeps no second count that could drift from what the budget decides with. (Why
//   the budget's and not the pool's: the budget must hold them to refuse a charge atomically, across
//   pools; a pool without a budget gets an unlimited one so that the same type keeps them everywhere.)
//   So a budget shared by several pools shows each owner's bytes over all of them, and an owner the
//   budget release()d shows 0 bytes. What only the pool knows stays the pool's: blocks, reservations,
//   allocation sizes, the pool-wide totals (stats()) and each owner's live allocation count.
// - Locks: the pool keeps each owner's Budget::Account (no lookup by name per allocation). Its own
//   unlimited budget is guarded by the pool's lock, so an allocation or free there takes one lock. A
//   given budget is charged under its own lock before the pool's is taken, and credited after it is let
//   go: the two never nest (a charge may ask the budget's reclaimers, which free into pools).
// - free() of a pointer the pool did not return, or returned and already took back, is an error that
//   is counted (stats().bad_frees) and logged; the pool's state is unchanged.
// - allocate(0) returns nullptr (success, nothing charged); free(nullptr) does nothing.
// - Thread-safe. The pool must outlive every allocation made from it (the destructor unmaps all).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/memory/backing.h"

namespace gantry::memory {

class Budget;

struct BlockPoolOptions {
  uint64_t capacity = 0;              // most bytes reserved from the backing; 0 = no limit
  uint64_t block_size = 32ull << 20;  // smallest block mapped (rounded up to the granularity)
  size_t keep_empty_blocks = 1;       // empty blocks kept mapped for reuse; the rest are returned
  // The ledger charged per owner; must outlive the pool. Null: the pool makes an unlimited one.
  Budget* budget = nullptr;
  // Freed large runs kept (not yet coalesced) for a later request of exactly the same size, up to this
  // many bytes in all: ONNX Runtime asks for the same sizes every Run. 0 turns it off.
  uint64_t reuse_cache_bytes = 64ull << 20;
  // Every pointer is aligned to at least this (a power of two >= 64), and every size rounded up to it:
  // 256 for CUDA memory (cudaMalloc's guarantee, which ONNX Runtime's CUDA kernels assume).
  size_t min_alignment = 64;
};

// Plain data; a snapshot.
struct PoolStats {
  uint64_t bytes_in_use = 0;    // allocated and not freed (rounded sizes)
  uint64_t bytes_reserved = 0;  // mapped from the backing
  uint64_t peak_in_use = 0;
  uint64_t peak_reserved = 0;
  uint64_t blocks = 0;             // blocks mapped now
  uint64_t allocations = 0;        // live allocations now
  uint64_t total_allocations = 0;  // successful allocate() calls ever (size > 0)
  uint64_t failed = 0;             // allocate() calls that failed
  uint64_t bad_frees = 0;          // free() of a foreign or already freed pointer
  uint64_t blocks_mapped = 0;      // backing map() calls ever
  uint64_t blocks_unmapped = 0;    // backing unmap() calls ever
  uint64_t cached_bytes = 0;       // freed runs waiting in the reuse cache
  uint64_t cache_hits = 0;         // allocations served from it
};

// One owner's share of the pool; a snapshot.
struct OwnerStats {
  std::string owner;
  uint64_t bytes_in_use = 0;  // the ledger's OwnerUsage::in_use (rounded sizes)
  uint64_t peak_in_use = 0;   // the ledger's OwnerUsage::peak
  uint64_t allocations = 0;   // live, from this pool (the pool's own count)
};

// One block's layout, for tests and diagnostics.
struct BlockInfo {
  uint64_t size = 0;
  uint64_t free_bytes = 0;  // in free runs (slab slots not counted)
  size_t free_runs = 0;
  size_t used_runs = 0;  // allocated runs and slabs
};

class BlockPool {
 public:
  static constexpr uint64_t kSmallLimit = 32 * 1024;
  static constexpr size_t kMinAlignment = 64;

  BlockPool(std::unique_ptr<Backing> backing, BlockPoolOptions options = {});
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // `alignment` 0 means 64; otherwise a power of two (InvalidArgument if not).
  Result<void*> allocate(uint64_t bytes, size_t alignment = 0);
  Result<void*> allocate_for(std::string_view owner, uint64_t bytes, size_t alignment = 0);
  // InvalidArgument for a pointer this pool does not have allocated (counted in bad_frees).
  Status free(void* p);

  // The rounded size of live allocation `p`, 0 when `p` is not one.
  uint64_t allocation_size(const void* p) const;

  // Flushes the reuse cache and returns every empty block to the backing.
  void trim();
  // Starts the peaks afresh: peak_in_use and peak_reserved (and each owner's peak, in the ledger:
  // Budget::reset_owner_peaks) become what is in use and reserved now, so that a later stats() gives the
  // peak of what happened since (one inference).
  void reset_peaks();

  const Backing& backing() const { return *backing_; }
  const std::string& device() const { return backing_->device(); }
  const BlockPoolOptions& options() const { return options_; }
  PoolStats stats() const;
  // Every owner this pool ever allocated for, by name (those with nothing live still listed); bytes and
  // peak from the ledger, live allocations from the pool.
  std::vector<OwnerStats> owners() const;
  std::optional<OwnerStats> owner(std::string_view name) const;  // nullopt: never allocated for here
  // The budget whose ledger holds this pool's per-owner bytes (options.budget, or the pool's own).
  const Budget& budget() const { return *ledger_; }
  std::vector<BlockInfo> blocks() const;  // in address order

 private:
  // allocate() and allocate_for(): `scoped` when `owner` is the current OwnerScope's (then the owner's
  // account comes from this thread's cache).
  Result<void*> allocate_as(std::string_view owner, bool scoped, uint64_t bytes, size_t alignment);

  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<Backing> backing_;
  BlockPoolOptions options_;
  std::unique_ptr<Budget> own_budget_;  // when options.budget is null
  Budget* ledger_ = nullptr;            // options.budget or own_budget_
};

}  // namespace gantry::memory

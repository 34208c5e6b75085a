#include "gantry/memory/block_pool.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <unordered_map>

#include "gantry/core/log.h"
#include "gantry/memory/budget.h"
#include "gantry/memory/owner_scope.h"

namespace gantry::memory {

namespace {

constexpr uint64_t kQuantum = BlockPool::kMinAlignment;
constexpr uint32_t kNoOwner = UINT32_MAX;

uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }
uintptr_t align_up(uintptr_t v, uintptr_t a) { return (v + a - 1) & ~(a - 1); }

// Size classes for small requests: multiples of 64 up to 512, then four steps per power of two up
// to kSmallLimit (so a slot wastes at most ~25 %). Every class is a multiple of 64. A constant table
// (built at compile time): the hot path reads it without a guard.
struct SizeClasses {
  std::array<uint32_t, 8 + 4 * 6> sizes{};
  std::array<uint8_t, BlockPool::kSmallLimit / kQuantum + 1> by_quanta{};  // (size + 63) / 64 -> class
  constexpr SizeClasses() {
    size_t n = 0;
    for (uint32_t s = 64; s <= 512; s += 64) sizes[n++] = s;
    for (uint32_t base = 512; base < BlockPool::kSmallLimit; base *= 2)
      for (uint32_t step = 1; step <= 4; ++step) sizes[n++] = base + base / 4 * step;
    size_t c = 0;
    for (size_t q = 0; q < by_quanta.size(); ++q) {
      while (sizes[c] < q * kQuantum) ++c;
      by_quanta[q] = static_cast<uint8_t>(c);
    }
  }
  constexpr size_t index(uint64_t bytes) const { return by_quanta[(bytes + kQuantum - 1) / kQuantum]; }
};

constexpr SizeClasses kClasses;
static_assert(kClasses.sizes.back() == BlockPool::kSmallLimit, "the last class is the small limit");

std::atomic<uint64_t> g_pool_ids{1};

// The last owner a thread resolved, per pool: saves two string lookups per allocation (the pool's owner
// id and the owner's account in the ledger).
struct OwnerCache {
  uint64_t pool = 0;
  uint64_t serial = UINT64_MAX;
  uint32_t id = 0;
  Budget::Account* account = nullptr;
};
thread_local OwnerCache t_owner_cache;

// The nodes of a pool's trees (each block's runs, the free runs), kept for reuse once freed: splitting
// and merging runs is the allocator's hot path, and a malloc and a free per tree node were a large part
// of it. One free list per node size; the nodes go back to the heap with the cache. Not thread-safe:
// the trees change only under the pool's lock.
class NodeCache {
 public:
  NodeCache() = default;
  NodeCache(const NodeCache&) = delete;
  NodeCache& operator=(const NodeCache&) = delete;
  ~NodeCache() {
    for (List& l : lists_)
      while (Free* n = l.head) {
        l.head = n->next;
        ::operator delete(n);
      }
  }
  void* take(size_t bytes) {
    for (List& l : lists_)
      if (l.bytes == bytes && l.head) {
        Free* n = l.head;
        l.head = n->next;
        return n;
      }
    return ::operator new(bytes);
  }
  void give(void* p, size_t bytes) {
    for (List& l : lists_)
      if (l.bytes == bytes || l.bytes == 0) {
        l.bytes = bytes;
        l.head = new (p) Free{l.head};
        return;
      }
    ::operator delete(p);  // more node sizes than lists: not kept
  }

 private:
  struct Free {
    Free* next;
  };
  struct List {
    size_t bytes = 0;
    Free* head = nullptr;
  };
  std::array<List, 4> lists_;
};

// A tree's allocator over a NodeCache (single nodes; anything else from the heap).
template <class T>
struct NodeAllocator {
  using value_type = T;
  NodeCache* nodes;
  explicit NodeAllocator(NodeCache* n) : nodes(n) {}
  template <class U>
  NodeAllocator(const NodeAllocator<U>& o) : nodes(o.nodes) {}  // rebinding, as containers do
  T* allocate(size_t n) {
    static_assert(sizeof(T) >= sizeof(void*) && alignof(T) <= alignof(std::max_align_t));
    return static_cast<T*>(n == 1 ? nodes->take(sizeof(T)) : ::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) {
    if (n == 1)
      nodes->give(p, sizeof(T));
    else
      ::operator delete(p);
  }
  template <class U>
  bool operator==(const NodeAllocator<U>& o) const {
    return nodes == o.nodes;
  }
};

}  // namespace

struct BlockPool::Impl {
  struct Slab;
  enum class State : uint8_t { kFree, kUsed, kSlab, kCached };
  struct Run {
    uint64_t size = 0;
    State state = State::kFree;
    uint32_t owner = kNoOwner;
    std::unique_ptr<Slab> slab;
  };
  using Runs = std::map<uint64_t, Run, std::less<uint64_t>, NodeAllocator<std::pair<const uint64_t, Run>>>;
  struct Block {
    explicit Block(NodeCache* nodes) : runs(Runs::allocator_type(nodes)) {}
    BackingBlock mapping;
    uintptr_t base = 0;
    Runs runs;             // by offset; covers the block exactly
    size_t used_runs = 0;  // runs not free
  };
  struct Slab {
    Block* block = nullptr;
    uint64_t offset = 0;  // of its run
    uintptr_t start = 0;
    uint32_t cls = 0;
    uint32_t slot = 0;
    uint32_t slots = 0;
    // Slots [0, used) have been handed out; the rest never were (so a fresh slab costs no pass over
    // its slots). owners[i] is slot i's owner, kNoOwner when free; set only below `used`.
    std::unique_ptr<uint32_t[]> owners;
    uint32_t used = 0;
    std::vector<uint32_t> free_slots;  // freed slots below `used`, reused first (last freed first)
    bool listed = false;               // in partial[cls]
  };
  // Bytes and peaks are the ledger's (self->ledger_); the pool counts only its live allocations.
  struct Owner {
    Budget::Account* account;  // its line in the ledger; the account's owner() is the name
    uint64_t allocations = 0;
  };

  using FreeRun = std::pair<uint64_t, uintptr_t>;  // (size, address)

  BlockPool* self;
  uint64_t id = g_pool_ids.fetch_add(1);
  mutable std::mutex mu;
  NodeCache nodes;                                     // before the trees: it outlives them
  std::map<uintptr_t, std::unique_ptr<Block>> blocks;  // by base
  std::set<FreeRun, std::less<FreeRun>, NodeAllocator<FreeRun>> free_runs{NodeAllocator<FreeRun>(&nodes)};
  std::vector<std::vector<Slab*>> partial;  // per class: slabs with a free slot
  std::vector<Owner> owners;
  std::map<std::string, uint32_t, std::less<>> owner_ids;
  size_t empty_blocks = 0;
  PoolStats st;
  // The reuse cache: rounded size -> freed runs of exactly that size (block, offset).
  struct CachedRun {
    Block* block;
    uint64_t offset;
  };
  std::unordered_map<uint64_t, std::vector<CachedRun>> cache;
  static constexpr size_t kCachePerSize = 16;

  // Returns every cached run to the free runs (coalescing).
  void flush_cache() {
    if (st.cached_bytes == 0) return;
    for (auto& [size, runs] : cache) {
      for (const CachedRun& c : runs) release_run(c.block, c.offset);
      runs.clear();
    }
    st.cached_bytes = 0;
  }

  explicit Impl(BlockPool* s) : self(s), partial(kClasses.sizes.size()) {}

  // --- owners ---
  // `account` is the ledger's for `name` (looked up before the pool's lock was taken).
  uint32_t owner_id_locked(std::string_view name, Budget::Account& account) {
    auto it = owner_ids.find(name);
    if (it != owner_ids.end()) return it->second;
    const auto oid = static_cast<uint32_t>(owners.size());
    owner_ids.emplace(std::string(name), oid);
    owners.push_back(Owner{&account});
    return oid;
  }
  void account_alloc(uint32_t oid, uint64_t bytes) {
    ++owners[oid].allocations;
    st.bytes_in_use += bytes;
    st.peak_in_use = std::max(st.peak_in_use, st.bytes_in_use);
    ++st.allocations;
    ++st.total_allocations;
  }
  void account_free(uint32_t oid, uint64_t bytes) {
    --owners[oid].allocations;
    st.bytes_in_use -= bytes;
    --st.allocations;
  }

  // --- blocks and runs ---
  Block* block_of(uintptr_t p) const {
    auto it = blocks.upper_bound(p);
    if (it == blocks.begin()) return nullptr;
    --it;
    Block* b = it->second.get();
    return p < b->base + b->mapping.size ? b : nullptr;
  }

  void unmap_block(Block* b) {
    free_runs.erase({b->mapping.size, b->base});  // an empty block is one free run
    --empty_blocks;
    st.bytes_reserved -= b->mapping.size;
    --st.blocks;
    ++st.blocks_unmapped;
    self->backing_->unmap(b->mapping);
    blocks.erase(b->base);
  }

  // Unmaps empty blocks until at most `keep` remain.
  void release_empty(size_t keep) {
    for (auto it = blocks.begin(); it != blocks.end() && empty_blocks > keep;) {
      Block* b = (it++)->second.get();
      if (b->used_runs == 0) unmap_block(b);
    }
  }

  Status map_block(uint64_t at_least) {
    const uint64_t g = self->backing_->granularity();
    const uint64_t cap = self->options_.capacity;
    uint64_t size = round_up(std::max(at_least, self->options_.block_size), g);
    if (cap) {
      if (st.bytes_reserved + size > cap) release_empty(0);
      if (st.bytes_reserved + size > cap) size = round_up(at_least, g);  // a smaller block may still fit
      if (st.bytes_reserved + size > cap)
        return ResourceExhausted("memory pool on " + self->device() + " cannot grow by " +
                                 format_bytes(size) + ": " + format_bytes(st.bytes_reserved) +
                                 " of its capacity " + format_bytes(cap) + " is reserved, " +
                                 format_bytes(st.bytes_in_use) + " in use");
    }
    auto mapped = self->backing_->map(size);
    if (!mapped.ok()) {
      release_empty(0);
      mapped = self->backing_->map(size);
      if (!mapped.ok()) return mapped.status();
    }
    auto b = std::make_unique<Block>(&nodes);
    b->mapping = *mapped;
    b->base = reinterpret_cast<uintptr_t>(mapped->base);
    b->runs.emplace(0, Run{size, State::kFree, kNoOwner, nullptr});
    free_runs.insert({size, b->base});
    ++empty_blocks;
    st.bytes_reserved += size;
    st.peak_reserved = std::max(st.peak_reserved, st.bytes_reserved);
    ++st.blocks;
    ++st.blocks_mapped;
    blocks.emplace(b->base, std::move(b));
    return Status::Ok();
  }

  // Finds the smallest free run that holds `bytes` at `alignment`; nullptr when none.
  bool find_fit(uint64_t bytes, uint64_t alignment, Block*& block, uint64_t& offset, uintptr_t& at) {
    for (auto it = free_runs.lower_bound({bytes, 0}); it != free_runs.end(); ++it) {
      const uintptr_t a = align_up(it->second, alignment);
      if (a + bytes > it->second + it->first) continue;
      block = block_of(it->second);
      offset = it->second - block->base;
      at = a;
      return true;
    }
    return false;
  }

  // Takes [at, at + bytes) out of the free run at `offset` of `b`; returns the new run.
  Run& carve(Block* b, uint64_t offset, uintptr_t at, uint64_t bytes, State state) {
    auto it = b->runs.find(offset);
    const uint64_t run_size = it->second.size;
    free_runs.erase({run_size, b->base + offset});
    if (b->used_runs++ == 0) --empty_blocks;
    const uint64_t start = at - b->base;
    const uint64_t end = start + bytes;
    if (start > offset) {  // leading padding stays free
      it->second.size = start - offset;
      free_runs.insert({start - offset, b->base + offset});
      it = b->runs.emplace_hint(std::next(it), start, Run{});
    }
    it->second.size = bytes;
    it->second.state = state;
    if (end < offset + run_size) {  // the tail stays free
      b->runs.emplace_hint(std::next(it), end, Run{offset + run_size - end, State::kFree, kNoOwner, nullptr});
      free_runs.insert({offset + run_size - end, b->base + end});
    }
    return it->second;
  }

  // Returns the run at `offset` of `b` to the free runs, merging with free neighbours.
  void release_run(Block* b, uint64_t offset) {
    auto it = b->runs.find(offset);
    it->second.state = State::kFree;
    it->second.owner = kNoOwner;
    it->second.slab.reset();
    if (it != b->runs.begin()) {
      auto prev = std::prev(it);
      if (prev->second.state == State::kFree) {
        free_runs.erase({prev->second.size, b->base + prev->first});
        prev->second.size += it->second.size;
        b->runs.erase(it);
        it = prev;
      }
    }
    auto next = std::next(it);
    if (next != b->runs.end() && next->second.state == State::kFree) {
      free_runs.erase({next->second.size, b->base + next->first});
      it->second.size += next->second.size;
      b->runs.erase(next);
    }
    free_runs.insert({it->second.size, b->base + it->first});
    if (--b->used_runs == 0) {
      ++empty_blocks;
      release_empty(self->options_.keep_empty_blocks);
    }
  }

  // A run of `bytes` at `alignment`, mapping a block when none fits.
  Result<std::pair<Block*, uint64_t>> take_run(uint64_t bytes, uint64_t alignment, State state,
                                               uint32_t oid) {
    Block* b = nullptr;
    uint64_t offset = 0;
    uintptr_t at = 0;
    if (!find_fit(bytes, alignment, b, offset, at) && st.cached_bytes > 0) {
      flush_cache();  // cached runs may coalesce into room
      find_fit(bytes, alignment, b, offset, at);
    }
    if (!b) {
      GANTRY_RETURN_IF_ERROR(map_block(bytes + (alignment > kQuantum ? alignment : 0)));
      if (!find_fit(bytes, alignment, b, offset, at))
        return Internal("memory pool on " + self->device() + ": a fresh block did not fit " +
                        format_bytes(bytes));
    }
    Run& r = carve(b, offset, at, bytes, state);
    r.owner = oid;
    return std::make_pair(b, at - b->base);
  }

  Result<void*> allocate_small(uint64_t bytes, uint32_t oid) {
    const size_t c = kClasses.index(bytes);
    auto& list = partial[c];
    Slab* s = list.empty() ? nullptr : list.back();
    if (!s) {
      const uint32_t slot = kClasses.sizes[c];
      const uint64_t slab_bytes = std::max<uint64_t>(64 * 1024, uint64_t{slot} * 16);
      GANTRY_ASSIGN_OR_RETURN(auto where, take_run(slab_bytes, kQuantum, State::kSlab, kNoOwner));
      auto slab = std::make_unique<Slab>();
      slab->block = where.first;
      slab->offset = where.second;
      slab->start = where.first->base + where.second;
      slab->cls = static_cast<uint32_t>(c);
      slab->slot = slot;
      slab->slots = static_cast<uint32_t>(slab_bytes / slot);
      slab->owners.reset(new uint32_t[slab->slots]);
      s = slab.get();
      where.first->runs.find(where.second)->second.slab = std::move(slab);
      list.push_back(s);
      s->listed = true;
    }
    uint32_t i;
    if (s->free_slots.empty()) {
      i = s->used++;
    } else {
      i = s->free_slots.back();
      s->free_slots.pop_back();
    }
    s->owners[i] = oid;
    if (s->free_slots.empty() && s->used == s->slots) {  // full
      list.pop_back();
      s->listed = false;
    }
    account_alloc(oid, s->slot);
    return reinterpret_cast<void*>(s->start + uint64_t{i} * s->slot);
  }

  Result<void*> allocate_locked(uint64_t bytes, uint64_t alignment, uint32_t oid) {
    if (bytes <= kSmallLimit && alignment <= kQuantum) return allocate_small(bytes, oid);
    const uint64_t size = round_up(bytes, kQuantum);
    if (st.cached_bytes > 0) {
      auto it = cache.find(size);
      // A cached run serves a stricter alignment when its address has it (a pool whose every size is a
      // multiple of its min_alignment keeps every run there).
      if (it != cache.end() && !it->second.empty() &&
          (alignment <= kQuantum ||
           (it->second.back().block->base + it->second.back().offset) % alignment == 0)) {
        const CachedRun c = it->second.back();
        it->second.pop_back();
        st.cached_bytes -= size;
        ++st.cache_hits;
        Run& r = c.block->runs.find(c.offset)->second;
        r.state = State::kUsed;
        r.owner = oid;
        account_alloc(oid, size);
        return reinterpret_cast<void*>(c.block->base + c.offset);
      }
    }
    GANTRY_ASSIGN_OR_RETURN(auto where, take_run(size, alignment, State::kUsed, oid));
    account_alloc(oid, size);
    return reinterpret_cast<void*>(where.first->base + where.second);
  }

  // The rounded size and owner of live allocation `p`; false when `p` is not one.
  bool lookup(uintptr_t p, Block*& b, Runs::iterator& run, uint32_t& slot) const {
    b = block_of(p);
    if (!b) return false;
    const uint64_t off = p - b->base;
    run = b->runs.upper_bound(off);
    if (run == b->runs.begin()) return false;
    --run;
    if (run->second.state == State::kUsed) return run->first == off;
    if (run->second.state != State::kSlab) return false;
    const Slab* s = run->second.slab.get();
    const uint64_t rel = p - s->start;
    if (rel % s->slot != 0 || rel / s->slot >= s->slots) return false;
    slot = static_cast<uint32_t>(rel / s->slot);
    return slot < s->used && s->owners[slot] != kNoOwner;
  }

  // Frees a live allocation; returns its size and owner.
  std::pair<uint64_t, uint32_t> free_locked(Block* b, Runs::iterator run, uint32_t slot) {
    if (run->second.state == State::kUsed) {
      const uint64_t size = run->second.size;
      const uint32_t oid = run->second.owner;
      account_free(oid, size);
      const uint64_t limit = self->options_.reuse_cache_bytes;
      if (limit && st.bytes_in_use > 0 && st.cached_bytes + size <= limit) {
        auto& list = cache[size];
        if (list.size() < kCachePerSize) {
          run->second.state = State::kCached;
          run->second.owner = kNoOwner;
          list.push_back({b, run->first});
          st.cached_bytes += size;
          return {size, oid};
        }
        release_run(b, run->first);
      } else {
        release_run(b, run->first);
      }
      return {size, oid};
    }
    Slab* s = run->second.slab.get();
    const uint32_t oid = s->owners[slot];
    const uint64_t size = s->slot;
    s->owners[slot] = kNoOwner;
    s->free_slots.push_back(slot);
    account_free(oid, size);
    if (s->free_slots.size() == s->used) {  // empty: give the run back to the block
      if (s->listed) {
        auto& list = partial[s->cls];
        list.erase(std::find(list.begin(), list.end(), s));
      }
      release_run(b, run->first);
    } else if (!s->listed) {
      partial[s->cls].push_back(s);
      s->listed = true;
    }
    return {size, oid};
  }
};

BlockPool::BlockPool(std::unique_ptr<Backing> backing, BlockPoolOptions options)
    : impl_(std::make_unique<Impl>(this)), backing_(std::move(backing)), options_(options) {
  size_t a = kMinAlignment;  // a power of two, at least 64
  while (a < options_.min_alignment) a *= 2;
  options_.min_alignment = a;
  // The pool's own ledger is guarded by the pool's lock: charging it takes no second lock.
  if (!options_.budget) own_budget_ = std::make_unique<Budget>(backing_->device(), UINT64_MAX, impl_->mu);
  ledger_ = options_.budget ? options_.budget : own_budget_.get();
}

BlockPool::~BlockPool() {
  std::lock_guard lock(impl_->mu);
  if (impl_->st.allocations)
    GANTRY_LOG_WARN("memory pool on {} destroyed with {} allocation(s) ({}) still live", device(),
                    impl_->st.allocations, format_bytes(impl_->st.bytes_in_use));
  for (auto& [base, b] : impl_->blocks) backing_->unmap(b->mapping);
  impl_->blocks.clear();
}

Result<void*> BlockPool::allocate(uint64_t bytes, size_t alignment) {
  return allocate_as(OwnerScope::current(), true, bytes, alignment);
}

Result<void*> BlockPool::allocate_for(std::string_view owner, uint64_t bytes, size_t alignment) {
  return allocate_as(owner, owner.data() == OwnerScope::current().data(), bytes, alignment);
}

Result<void*> BlockPool::allocate_as(std::string_view owner, bool scoped, uint64_t bytes, size_t alignment) {
  if (bytes == 0) return static_cast<void*>(nullptr);
  if (alignment == 0) alignment = kMinAlignment;
  if ((alignment & (alignment - 1)) != 0) {
    std::lock_guard lock(impl_->mu);
    ++impl_->st.failed;
    return InvalidArgument("alignment " + std::to_string(alignment) + " is not a power of two");
  }
  alignment = std::max({alignment, kMinAlignment, options_.min_alignment});
  // A pool with a stricter minimum rounds every size to it too, so that runs stay on its boundaries.
  if (options_.min_alignment > kMinAlignment) bytes = round_up(bytes, options_.min_alignment);
  const uint64_t charged = bytes <= kSmallLimit && alignment <= kMinAlignment
                               ? kClasses.sizes[kClasses.index(bytes)]
                               : round_up(bytes, kMinAlignment);
  if (options_.capacity && charged > options_.capacity) {
    std::lock_guard lock(impl_->mu);
    ++impl_->st.failed;
    return ResourceExhausted("allocation of " + format_bytes(bytes) + " is larger than the memory pool on " +
                             device() + " (capacity " + format_bytes(options_.capacity) + ")");
  }
  // The owner's account: from this thread's cache when the caller passed the current scope's name, else
  // looked up (before the pool's lock: the pool's and a shared budget's locks never nest).
  OwnerCache& cache = t_owner_cache;
  const uint64_t serial = OwnerScope::current_serial();
  const bool cached = scoped && cache.pool == impl_->id && cache.serial == serial;
  Budget::Account& account = cached ? *cache.account : ledger_->account(owner);
  // A shared budget is charged before the pool's lock is taken (it may ask reclaimers, which free into
  // pools); the pool's own ledger under it.
  const bool own = own_budget_ != nullptr;
  Budget::Receipt receipt;
  if (!own) {
    if (Status s = ledger_->charge(account, charged, receipt); !s.ok()) {
      std::lock_guard lock(impl_->mu);
      ++impl_->st.failed;
      return s;
    }
  }
  std::unique_lock lock(impl_->mu);
  const uint32_t oid = cached ? cache.id : impl_->owner_id_locked(owner, account);
  if (scoped && !cached) cache = {impl_->id, serial, oid, &account};
  if (own) {
    if (Status s = ledger_->charge_held(account, charged, receipt); !s.ok()) {
      ++impl_->st.failed;
      return s;
    }
  }
  Result<void*> r = impl_->allocate_locked(bytes, alignment, oid);
  if (!r.ok()) {
    ++impl_->st.failed;
    if (own) ledger_->refund_held(account, charged, receipt);
    lock.unlock();
    if (!own) ledger_->refund(account, charged, receipt);  // the pool's lock let go: they never nest
  }
  return r;
}

Status BlockPool::free(void* p) {
  if (!p) return Status::Ok();
  Budget::Account* account = nullptr;
  uint64_t size = 0;
  {
    std::lock_guard lock(impl_->mu);
    Impl::Block* b = nullptr;
    Impl::Runs::iterator run;
    uint32_t slot = 0;
    if (!impl_->lookup(reinterpret_cast<uintptr_t>(p), b, run, slot)) {
      const uint64_t n = ++impl_->st.bad_frees;
      GANTRY_LOG_ERROR(
          "memory pool on {}: free of {} which is not a live allocation (double free or foreign "
          "pointer; {} so far)",
          device(), p, n);
      return InvalidArgument(
          "memory pool on " + device() + ": " +
          (b ? "pointer is not a live allocation (double free?)" : "pointer is not from this pool"));
    }
    auto [bytes, oid] = impl_->free_locked(b, run, slot);
    if (impl_->st.bytes_in_use == 0) impl_->flush_cache();  // nothing allocated: everything coalesces
    size = bytes;
    account = impl_->owners[oid].account;
    if (own_budget_) {
      ledger_->credit_held(*account, size);
      return Status::Ok();
    }
  }
  ledger_->credit(*account, size);
  return Status::Ok();
}

uint64_t BlockPool::allocation_size(const void* p) const {
  std::lock_guard lock(impl_->mu);
  Impl::Block* b = nullptr;
  Impl::Runs::iterator run;
  uint32_t slot = 0;
  if (!p || !impl_->lookup(reinterpret_cast<uintptr_t>(p), b, run, slot)) return 0;
  return run->second.state == Impl::State::kUsed ? run->second.size : run->second.slab->slot;
}

void BlockPool::trim() {
  std::lock_guard lock(impl_->mu);
  impl_->flush_cache();
  impl_->release_empty(0);
}

void BlockPool::reset_peaks() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->st.peak_in_use = impl_->st.bytes_in_use;
    impl_->st.peak_reserved = impl_->st.bytes_reserved;
  }
  ledger_->reset_owner_peaks();  // after the pool's lock is let go: the two locks never nest
}

PoolStats BlockPool::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->st;
}

std::vector<OwnerStats> BlockPool::owners() const {
  std::vector<OwnerStats> out;
  {
    std::lock_guard lock(impl_->mu);
    for (const auto& [name, oid] : impl_->owner_ids)
      out.push_back({name, 0, 0, impl_->owners[oid].allocations});
  }
  // Both by name: one merge. The ledger is read after the pool's lock is let go (the locks never nest).
  const std::vector<OwnerUsage> ledger = ledger_->ledger();
  auto u = ledger.begin();
  for (OwnerStats& o : out) {
    while (u != ledger.end() && u->owner < o.owner) ++u;
    if (u != ledger.end() && u->owner == o.owner) {
      o.bytes_in_use = u->in_use;
      o.peak_in_use = u->peak;
    }
  }
  return out;
}

std::optional<OwnerStats> BlockPool::owner(std::string_view name) const {
  OwnerStats o;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->owner_ids.find(name);
    if (it == impl_->owner_ids.end()) return std::nullopt;
    o.owner = it->first;
    o.allocations = impl_->owners[it->second].allocations;
  }
  if (auto u = ledger_->usage(name)) {
    o.bytes_in_use = u->in_use;
    o.peak_in_use = u->peak;
  }
  return o;
}

std::vector<BlockInfo> BlockPool::blocks() const {
  std::lock_guard lock(impl_->mu);
  std::vector<BlockInfo> out;
  for (const auto& [base, b] : impl_->blocks) {
    BlockInfo info;
    info.size = b->mapping.size;
    for (const auto& [off, r] : b->runs) {
      if (r.state == Impl::State::kFree || r.state == Impl::State::kCached) {
        ++info.free_runs;
        info.free_bytes += r.size;
      } else {
        ++info.used_runs;
      }
    }
    out.push_back(info);
  }
  return out;
}

}  // namespace gantry::memory

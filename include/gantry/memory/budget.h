// Budget: one device's memory budget, with a ledger per owner (a loaded model, usually).
//
// An owner's footprint is max(reserved, in_use):
// - reserve() promises bytes before a load, from what the backend's dry run or estimate says;
// - charge()/credit() record real allocations attributed to the owner (the block pool does this);
//   allocations inside a reservation cost nothing extra, beyond it they count.
// A reserve() or charge() that would take the sum of footprints over the capacity fails with
// ResourceExhausted and a message with the numbers (device, asked, capacity, used and by how many
// owners); nothing changes then. The Budget never evicts a model itself: making room is the model
// manager's job, outside any allocation, and the facts that decide it (pinned, last used) are the model
// manager's alone (gantry/runtime/model_manager.h). What it does first is ask the caches other owners
// registered (add_reclaimer: memory they can rebuild, like a prompt cache in host memory) to give bytes back,
// and try once more: caches go before any model. Thread-safe; every operation is atomic.
//
// The ledger is the one record of how many bytes each owner has allocated on the device, and its peak:
// a BlockPool charges every allocation here and reads its per-owner numbers back from here
// (BlockPool::owners()); it keeps no count of its own that could disagree. A pool created without a
// budget makes an unlimited one of its own for this, so every per-owner byte count is a Budget's.
//
// Cost on an allocator's hot path: a caller that charges the same owner often holds its Account (the
// owner's line: no lookup by name), and used() is kept as a running sum, so a charge or credit is O(1)
// under the budget's mutex. A budget can be made over a mutex of its one user's (the pool without a
// budget of its own: its lock guards both); that user calls the *_held operations with it held, so a
// charge takes no second lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::memory {

// One owner's line of the ledger; a snapshot.
struct OwnerUsage {
  std::string owner;
  uint64_t reserved = 0;
  uint64_t in_use = 0;  // charged and not yet credited
  uint64_t peak = 0;    // largest in_use seen (since reset_owner_peaks()); a refund()ed charge not counted
  uint64_t footprint() const { return reserved > in_use ? reserved : in_use; }
};

class Budget {
 public:
  Budget(std::string device, uint64_t capacity_bytes);
  // A budget guarded by `guard` instead of a mutex of its own: every operation below takes `guard`,
  // except the *_held ones, which its user calls with `guard` held. `guard` must outlive the budget.
  Budget(std::string device, uint64_t capacity_bytes, std::mutex& guard);
  Budget(const Budget&) = delete;
  Budget& operator=(const Budget&) = delete;

  const std::string& device() const { return device_; }  // "cpu", "cuda:0"
  uint64_t capacity() const { return capacity_; }
  uint64_t used() const;       // sum of every owner's footprint
  uint64_t available() const;  // capacity - used, 0 when over
  uint64_t peak() const;       // largest used() seen

  // Adds `bytes` to `owner`'s reservation (creating the owner) when it fits.
  Status reserve(std::string_view owner, uint64_t bytes);
  // Lowers `owner`'s reservation by up to `bytes`.
  void unreserve(std::string_view owner, uint64_t bytes);
  // Records an allocation of `bytes` by `owner` when the resulting footprint fits.
  Status charge(std::string_view owner, uint64_t bytes);
  // Records that `owner` freed `bytes` (never below zero; an excess is counted in over_credits()).
  void credit(std::string_view owner, uint64_t bytes);
  // What a charge() raised, to take it back with refund().
  struct Receipt {
    uint64_t owner_peak = 0;  // the owner's peak before the charge
    uint64_t peak = 0;        // peak() before the charge
  };
  // As charge(); on success fills `receipt`.
  Status charge(std::string_view owner, uint64_t bytes, Receipt& receipt);
  // Takes back a charge whose allocation then failed: as credit(), and the owner's peak and peak() go
  // back to what they were before it (or to what is in use now, when that is more), so that a failed
  // allocation leaves no trace. Exact unless another charge of the budget came in between.
  void refund(std::string_view owner, uint64_t bytes, const Receipt& receipt);
  // Forgets `owner` (its reservation and in_use): on unload.
  void release(std::string_view owner);

  // One owner's line of the ledger, for a caller that charges that owner often (a BlockPool keeps one
  // per owner): the operations below are those above without looking the owner up by name. An account
  // is the budget's and lives as long as it; account() makes the line when there is none, but the owner
  // is listed (usage(), ledger()) only once reserved or charged. release() of the owner empties its
  // account, and a later charge through it lists the owner again, as a charge by name would.
  class Account {
   public:
    Account(const Account&) = delete;
    Account& operator=(const Account&) = delete;
    const std::string& owner() const { return usage_.owner; }

   private:
    friend class Budget;
    explicit Account(std::string owner) { usage_.owner = std::move(owner); }
    OwnerUsage usage_;
    bool listed_ = false;
  };
  Account& account(std::string_view owner);
  Status charge(Account& account, uint64_t bytes, Receipt& receipt);
  void credit(Account& account, uint64_t bytes);
  void refund(Account& account, uint64_t bytes, const Receipt& receipt);
  // As those three, for a budget made over its user's `guard`, which the caller holds. charge_held()
  // asks no reclaimer (that would run one under the guard): what does not fit is refused at once.
  // Inline (below): an allocator's hot path.
  Status charge_held(Account& account, uint64_t bytes, Receipt& receipt);
  void credit_held(Account& account, uint64_t bytes);
  void refund_held(Account& account, uint64_t bytes, const Receipt& receipt);

  // A cache `owner` holds in this budget and can give back: asked for `wanted` bytes, it frees what it
  // can (returning those bytes through unreserve()/credit()) and returns how many it gave back. The
  // budget calls it when another owner's reserve() or charge() does not fit, on that caller's thread,
  // without the budget's lock held, one reclaimer at a time. It must not call reserve() or charge(),
  // nor wait for anything that may itself be waiting for this budget.
  using Reclaimer = std::function<uint64_t(uint64_t wanted)>;
  uint64_t add_reclaimer(std::string owner, Reclaimer reclaimer);  // returns its id
  // After this returns the reclaimer is not running and is never called again.
  void remove_reclaimer(uint64_t id);
  // Asks the reclaimers (oldest first), except `except_owner`'s, for `wanted` bytes in all; returns
  // the bytes they gave back. reserve() and charge() do this themselves when a request does not fit.
  uint64_t reclaim(uint64_t wanted, std::string_view except_owner = {});
  uint64_t reclaimed() const;  // bytes reclaimers gave back so far

  std::optional<OwnerUsage> usage(std::string_view owner) const;
  std::vector<OwnerUsage> ledger() const;  // every owner, by name
  // Every owner's peak becomes its in_use now (peak() is left alone): BlockPool::reset_peaks().
  void reset_owner_peaks();
  uint64_t over_credits() const;  // credits beyond what was charged (a bug somewhere)

  // "needs 1.9 GiB on cuda:0, budget 1.5 GiB, 1.2 GiB used by 2 models" (no trailing advice).
  std::string shortfall_message(uint64_t asked) const;

 private:
  std::string shortfall_locked(uint64_t asked) const;
  // One attempt each, with mu_ held: done, or how much the footprint would grow and by how much that
  // would overshoot the capacity.
  struct Attempt {
    uint64_t growth = 0;
    uint64_t over = 0;
    bool fits() const { return over == 0; }
  };
  Attempt try_reserve_locked(Account& a, uint64_t bytes);
  Attempt try_charge_locked(Account& a, uint64_t bytes, Receipt& receipt);  // inline
  void credit_locked(Account& a, uint64_t bytes);                           // inline
  void refund_locked(Account& a, uint64_t bytes, const Receipt& receipt);
  // Sets `a`'s numbers, keeping used_ the sum of every footprint.
  void set_locked(Account& a, uint64_t reserved, uint64_t in_use);
  Account& account_locked(std::string_view owner);
  const Account* listed_locked(std::string_view owner) const;  // nullptr when not listed
  bool has_reclaimers_except(std::string_view owner) const;

  struct ReclaimerEntry {
    uint64_t id;
    std::string owner;
    Reclaimer fn;
  };
  mutable std::mutex reclaim_mu_;           // held while a reclaimer runs; taken before mu_, never inside it
  std::vector<ReclaimerEntry> reclaimers_;  // guarded by both (written with both held)
  uint64_t next_reclaimer_ = 1;
  uint64_t reclaimed_ = 0;  // under mu_

  std::string device_;
  uint64_t capacity_;
  std::mutex own_mu_;  // mu_, unless the budget was made over its user's guard
  std::mutex& mu_;
  // Every account ever made, by owner (never erased: accounts are handed out); those not listed
  // (never reserved or charged, or released since) are all zero.
  std::map<std::string, std::unique_ptr<Account>, std::less<>> accounts_;
  uint64_t used_ = 0;  // the sum of every footprint
  uint64_t peak_ = 0;
  uint64_t over_credits_ = 0;
};

// The ledger's arithmetic that every charge and credit runs, inline so that an allocator's hot path
// (BlockPool: charge_held/credit_held under its own lock) makes no call for it.
inline Budget::Attempt Budget::try_charge_locked(Account& a, uint64_t bytes, Receipt& receipt) {
  OwnerUsage& u = a.usage_;
  receipt = {u.peak, peak_};
  const uint64_t in_use = u.in_use + bytes;
  const uint64_t before = u.footprint();
  const uint64_t after = u.reserved > in_use ? u.reserved : in_use;
  if (after > before) {  // beyond the reservation: it counts
    const uint64_t new_used = used_ - before + after;
    if (new_used > capacity_) return {after - before, new_used - capacity_};
    used_ = new_used;
    if (new_used > peak_) peak_ = new_used;
  }
  u.in_use = in_use;
  if (in_use > u.peak) u.peak = in_use;
  a.listed_ = true;
  return {};
}

inline void Budget::credit_locked(Account& a, uint64_t bytes) {
  OwnerUsage& u = a.usage_;
  if (bytes > u.in_use) {
    over_credits_ += bytes - u.in_use;
    bytes = u.in_use;
  }
  const uint64_t before = u.footprint();
  u.in_use -= bytes;
  used_ = used_ - before + u.footprint();
}

inline Status Budget::charge_held(Account& account, uint64_t bytes, Receipt& receipt) {
  const Attempt a = try_charge_locked(account, bytes, receipt);
  return a.fits() ? Status::Ok() : ResourceExhausted(shortfall_locked(a.growth));
}

inline void Budget::credit_held(Account& account, uint64_t bytes) { credit_locked(account, bytes); }

// "1.5 GiB", "640.0 MiB", "12 B": for messages.
std::string format_bytes(uint64_t bytes);

// Parses a byte size: "4GiB", "512MiB", "1.5GB", "1024" (bytes), "70G" (GiB). Case-insensitive units
// B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB; KB/MB/GB/TB are powers of 1000, the rest of 1024.
Result<uint64_t> parse_byte_size(std::string_view text);

// A --memory-budget value: comma-separated items, each "DEVICE=SIZE", "DEVICE=PCT%" or
// "DEVICE=FRACTION" (0 < f <= 1), or one bare SIZE/PCT/FRACTION applying to every device not named.
// DEVICE is "cpu" (also "cpu:0") or "<family>:<index>" as in the hardware registry ("cuda:0").
// Example: "cpu=4GiB,cuda:0=70GiB", "80%", "cpu=0.5,cuda:0=90%".
struct BudgetLimit {
  std::optional<uint64_t> bytes;   // absolute
  std::optional<double> fraction;  // of the device's free memory
};
struct BudgetSpec {
  std::map<std::string, BudgetLimit> devices;  // by canonical device id ("cpu", "cuda:0")
  BudgetLimit fallback{std::nullopt, 0.9};     // devices not named: 90 % of free by default
  // The capacity for `device` that has `free_bytes` free now.
  uint64_t capacity_for(std::string_view device, uint64_t free_bytes) const;
};
Result<BudgetSpec> parse_budget_spec(std::string_view text);

}  // namespace gantry::memory

#include "gantry/memory/budget.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

namespace gantry::memory {

Budget::Budget(std::string device, uint64_t capacity_bytes)
    : device_(std::move(device)), capacity_(capacity_bytes), mu_(own_mu_) {}

Budget::Budget(std::string device, uint64_t capacity_bytes, std::mutex& guard)
    : device_(std::move(device)), capacity_(capacity_bytes), mu_(guard) {}

uint64_t Budget::used() const {
  std::lock_guard lock(mu_);
  return used_;
}

uint64_t Budget::available() const {
  std::lock_guard lock(mu_);
  return used_ >= capacity_ ? 0 : capacity_ - used_;
}

uint64_t Budget::peak() const {
  std::lock_guard lock(mu_);
  return peak_;
}

namespace {

uint64_t footprint_of(uint64_t reserved, uint64_t in_use) { return reserved > in_use ? reserved : in_use; }

}  // namespace

Budget::Account& Budget::account_locked(std::string_view owner) {
  auto it = accounts_.find(owner);
  if (it == accounts_.end())
    it = accounts_.emplace(std::string(owner), std::unique_ptr<Account>(new Account(std::string(owner))))
             .first;
  return *it->second;
}

const Budget::Account* Budget::listed_locked(std::string_view owner) const {
  auto it = accounts_.find(owner);
  return it != accounts_.end() && it->second->listed_ ? it->second.get() : nullptr;
}

void Budget::set_locked(Account& a, uint64_t reserved, uint64_t in_use) {
  used_ = used_ - a.usage_.footprint() + footprint_of(reserved, in_use);
  a.usage_.reserved = reserved;
  a.usage_.in_use = in_use;
}

Budget::Account& Budget::account(std::string_view owner) {
  std::lock_guard lock(mu_);
  return account_locked(owner);
}

Budget::Attempt Budget::try_reserve_locked(Account& a, uint64_t bytes) {
  const uint64_t before = a.usage_.footprint();
  const uint64_t reserved = a.usage_.reserved + bytes;
  const uint64_t after = footprint_of(reserved, a.usage_.in_use);
  const uint64_t new_used = used_ - before + after;
  if (after > before && new_used > capacity_) return {after - before, new_used - capacity_};
  set_locked(a, reserved, a.usage_.in_use);
  a.listed_ = true;
  peak_ = std::max(peak_, new_used);
  return {};
}

Status Budget::reserve(std::string_view owner, uint64_t bytes) {
  Attempt a;
  {
    std::lock_guard lock(mu_);
    a = try_reserve_locked(account_locked(owner), bytes);
    if (a.fits()) return Status::Ok();
    if (!has_reclaimers_except(owner)) return ResourceExhausted(shortfall_locked(a.growth));
  }
  reclaim(a.over, owner);  // caches other owners can rebuild go first; then one more try
  std::lock_guard lock(mu_);
  a = try_reserve_locked(account_locked(owner), bytes);
  if (a.fits()) return Status::Ok();
  return ResourceExhausted(shortfall_locked(a.growth));
}

void Budget::unreserve(std::string_view owner, uint64_t bytes) {
  std::lock_guard lock(mu_);
  auto it = accounts_.find(owner);
  if (it == accounts_.end()) return;
  Account& a = *it->second;
  set_locked(a, a.usage_.reserved - std::min(bytes, a.usage_.reserved), a.usage_.in_use);
}

Status Budget::charge(std::string_view owner, uint64_t bytes) {
  Receipt unused;
  return charge(owner, bytes, unused);
}

Status Budget::charge(std::string_view owner, uint64_t bytes, Receipt& receipt) {
  return charge(account(owner), bytes, receipt);
}

Status Budget::charge(Account& account, uint64_t bytes, Receipt& receipt) {
  Attempt a;
  {
    std::lock_guard lock(mu_);
    a = try_charge_locked(account, bytes, receipt);
    if (a.fits()) return Status::Ok();
    if (!has_reclaimers_except(account.owner())) return ResourceExhausted(shortfall_locked(a.growth));
  }
  reclaim(a.over, account.owner());  // caches other owners can rebuild go first; then one more try
  std::lock_guard lock(mu_);
  a = try_charge_locked(account, bytes, receipt);
  if (a.fits()) return Status::Ok();
  return ResourceExhausted(shortfall_locked(a.growth));
}

void Budget::refund_locked(Account& a, uint64_t bytes, const Receipt& receipt) {
  credit_locked(a, bytes);
  a.usage_.peak = std::min(a.usage_.peak, std::max(receipt.owner_peak, a.usage_.in_use));
  peak_ = std::min(peak_, std::max(receipt.peak, used_));
}

void Budget::refund(std::string_view owner, uint64_t bytes, const Receipt& receipt) {
  std::lock_guard lock(mu_);
  refund_locked(account_locked(owner), bytes, receipt);
}

void Budget::refund(Account& account, uint64_t bytes, const Receipt& receipt) {
  std::lock_guard lock(mu_);
  refund_locked(account, bytes, receipt);
}

void Budget::refund_held(Account& account, uint64_t bytes, const Receipt& receipt) {
  refund_locked(account, bytes, receipt);
}

void Budget::credit(std::string_view owner, uint64_t bytes) {
  std::lock_guard lock(mu_);
  credit_locked(account_locked(owner), bytes);
}

void Budget::credit(Account& account, uint64_t bytes) {
  std::lock_guard lock(mu_);
  credit_locked(account, bytes);
}

void Budget::release(std::string_view owner) {
  std::lock_guard lock(mu_);
  auto it = accounts_.find(owner);
  if (it == accounts_.end()) return;
  Account& a = *it->second;
  set_locked(a, 0, 0);
  a.usage_.peak = 0;
  a.listed_ = false;
}

bool Budget::has_reclaimers_except(std::string_view owner) const {
  for (const auto& r : reclaimers_)
    if (r.owner != owner) return true;
  return false;
}

uint64_t Budget::add_reclaimer(std::string owner, Reclaimer reclaimer) {
  std::lock_guard reclaiming(reclaim_mu_);
  std::lock_guard lock(mu_);
  const uint64_t id = next_reclaimer_++;
  reclaimers_.push_back({id, std::move(owner), std::move(reclaimer)});
  return id;
}

void Budget::remove_reclaimer(uint64_t id) {
  std::lock_guard reclaiming(reclaim_mu_);  // waits for a running one
  std::lock_guard lock(mu_);
  std::erase_if(reclaimers_, [id](const ReclaimerEntry& r) { return r.id == id; });
}

uint64_t Budget::reclaim(uint64_t wanted, std::string_view except_owner) {
  std::lock_guard reclaiming(reclaim_mu_);
  uint64_t got = 0;
  // reclaimers_ changes only with reclaim_mu_ held too: safe to walk without mu_.
  for (const auto& r : reclaimers_) {
    if (got >= wanted) break;
    if (!except_owner.empty() && r.owner == except_owner) continue;
    got += r.fn(wanted - got);
  }
  std::lock_guard lock(mu_);
  reclaimed_ += got;
  return got;
}

uint64_t Budget::reclaimed() const {
  std::lock_guard lock(mu_);
  return reclaimed_;
}

std::optional<OwnerUsage> Budget::usage(std::string_view owner) const {
  std::lock_guard lock(mu_);
  const Account* a = listed_locked(owner);
  if (a == nullptr) return std::nullopt;
  return a->usage_;
}

std::vector<OwnerUsage> Budget::ledger() const {
  std::lock_guard lock(mu_);
  std::vector<OwnerUsage> out;
  for (const auto& [name, a] : accounts_)
    if (a->listed_) out.push_back(a->usage_);
  return out;
}

void Budget::reset_owner_peaks() {
  std::lock_guard lock(mu_);
  for (auto& [name, a] : accounts_) a->usage_.peak = a->usage_.in_use;
}

uint64_t Budget::over_credits() const {
  std::lock_guard lock(mu_);
  return over_credits_;
}

std::string Budget::shortfall_message(uint64_t asked) const {
  std::lock_guard lock(mu_);
  return shortfall_locked(asked);
}

std::string Budget::shortfall_locked(uint64_t asked) const {
  size_t holders = 0;
  for (const auto& [name, a] : accounts_)
    if (a->usage_.footprint() > 0) ++holders;
  return "needs " + format_bytes(asked) + " on " + device_ + ", budget " + format_bytes(capacity_) + ", " +
         format_bytes(used_) + " used by " + std::to_string(holders) + (holders == 1 ? " model" : " models");
}

std::string format_bytes(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024;
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(kUnits)) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  return buf;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Parses a non-negative decimal number ("1", "1.5", ".5"); consumes what it reads.
bool parse_number(std::string_view& s, double& value, bool& fractional) {
  size_t i = 0;
  bool digits = false, dot = false;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || (s[i] == '.' && !dot))) {
    if (s[i] == '.')
      dot = true;
    else
      digits = true;
    ++i;
  }
  if (!digits) return false;
  value = std::strtod(std::string(s.substr(0, i)).c_str(), nullptr);
  fractional = dot;
  s.remove_prefix(i);
  return true;
}

}  // namespace

Result<uint64_t> parse_byte_size(std::string_view text) {
  std::string_view s = trim(text);
  const std::string quoted = "'" + std::string(text) + "'";
  if (s.empty()) return InvalidArgument("empty byte size; write e.g. 4GiB, 512MiB or 1024 (bytes)");
  double value = 0;
  bool fractional = false;
  if (!parse_number(s, value, fractional))
    return InvalidArgument("byte size " + quoted +
                           " does not start with a number; write e.g. 4GiB or 512MiB");
  const std::string unit = lower(trim(s));
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},        {"b", 1},          {"k", 1024.0},       {"kib", 1024.0},   {"kb", 1e3},
      {"m", 1 << 20}, {"mib", 1 << 20},  {"mb", 1e6},         {"g", 1ull << 30}, {"gib", 1ull << 30},
      {"gb", 1e9},    {"t", 1ull << 40}, {"tib", 1ull << 40}, {"tb", 1e12}};
  for (const auto& [name, mult] : kUnits) {
    if (unit != name) continue;
    const double bytes = value * mult;
    if (bytes >= 18446744073709551615.0) return InvalidArgument("byte size " + quoted + " is too large");
    if (mult == 1 && fractional) return InvalidArgument("byte size " + quoted + " is a fraction of a byte");
    return static_cast<uint64_t>(std::llround(bytes));
  }
  return InvalidArgument("byte size " + quoted + " has unknown unit '" + std::string(trim(s)) +
                         "'; use B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000)");
}

namespace {

Result<BudgetLimit> parse_limit(std::string_view value, std::string_view item) {
  value = trim(value);
  const std::string where = " in budget item '" + std::string(item) + "'";
  BudgetLimit limit;
  if (!value.empty() && value.back() == '%') {
    std::string_view num = trim(value.substr(0, value.size() - 1));
    double pct = 0;
    bool frac = false;
    if (!parse_number(num, pct, frac) || !trim(num).empty())
      return InvalidArgument("bad percentage '" + std::string(value) + "'" + where + "; write e.g. 80%");
    if (pct <= 0 || pct > 100)
      return InvalidArgument("percentage '" + std::string(value) + "'" + where + " is not in (0, 100]");
    limit.fraction = pct / 100;
    return limit;
  }
  // A bare number with a dot and no unit, or "1" / "0": a fraction when <= 1.
  {
    std::string_view num = value;
    double f = 0;
    bool frac = false;
    if (parse_number(num, f, frac) && trim(num).empty() && (frac || f <= 1)) {
      if (f <= 0 || f > 1)
        return InvalidArgument("fraction '" + std::string(value) + "'" + where +
                               " is not in (0, 1]; write a size (4GiB) or a percentage (80%)");
      limit.fraction = f;
      return limit;
    }
  }
  auto bytes = parse_byte_size(value);
  if (!bytes.ok()) return bytes.status().with_context("budget item '" + std::string(item) + "'");
  if (*bytes == 0) return InvalidArgument("budget of 0 bytes" + where);
  limit.bytes = *bytes;
  return limit;
}

// "cpu", "cpu:0" -> "cpu"; "cuda:0" -> "cuda:0"; anything else is an error.
Result<std::string> canonical_device(std::string_view text, std::string_view item) {
  const std::string d = lower(trim(text));
  if (d == "cpu" || d == "cpu:0") return std::string("cpu");
  const size_t colon = d.find(':');
  bool ok = colon != std::string::npos && colon > 0 && colon + 1 < d.size();
  for (size_t i = 0; ok && i < colon; ++i) ok = std::isalpha(static_cast<unsigned char>(d[i])) || d[i] == '_';
  for (size_t i = colon + 1; ok && i < d.size(); ++i) ok = std::isdigit(static_cast<unsigned char>(d[i]));
  if (!ok)
    return InvalidArgument("bad device '" + std::string(trim(text)) + "' in budget item '" +
                           std::string(item) + "'; write cpu or <family>:<index> such as cuda:0");
  return d.substr(0, colon) + ":" + std::to_string(std::stoul(d.substr(colon + 1)));
}

}  // namespace

Result<BudgetSpec> parse_budget_spec(std::string_view text) {
  BudgetSpec spec;
  if (trim(text).empty())
    return InvalidArgument("empty memory budget; write e.g. 80% or cpu=4GiB,cuda:0=70GiB");
  bool have_fallback = false;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = trim(text.substr(start, end - start));
    start = end + 1;
    if (item.empty()) return InvalidArgument("empty item in memory budget '" + std::string(text) + "'");
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      if (have_fallback)
        return InvalidArgument("memory budget '" + std::string(text) +
                               "' has two items without a device; name the device as DEVICE=SIZE");
      GANTRY_ASSIGN_OR_RETURN(spec.fallback, parse_limit(item, item));
      have_fallback = true;
      continue;
    }
    GANTRY_ASSIGN_OR_RETURN(std::string device, canonical_device(item.substr(0, eq), item));
    if (spec.devices.count(device)) return InvalidArgument("memory budget names device " + device + " twice");
    GANTRY_ASSIGN_OR_RETURN(BudgetLimit limit, parse_limit(item.substr(eq + 1), item));
    spec.devices.emplace(std::move(device), limit);
    if (end == text.size()) break;
  }
  return spec;
}

uint64_t BudgetSpec::capacity_for(std::string_view device, uint64_t free_bytes) const {
  auto it = devices.find(std::string(device));
  const BudgetLimit& l = it == devices.end() ? fallback : it->second;
  if (l.bytes) return *l.bytes;
  if (l.fraction) return static_cast<uint64_t>(static_cast<double>(free_bytes) * *l.fraction);
  return free_bytes;
}

}  // namespace gantry::memory

#include "backend/llama/host_prompt_cache.h"

#include <llama.h>

#include <algorithm>
#include <new>

#include "gantry/backend/llama/options.h"
#include "gantry/core/log.h"
#include "gantry/memory/budget.h"

namespace gantry::llama {
namespace {

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  return static_cast<size_t>(
      std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin()).first - a.begin());
}

}  // namespace

HostPromptCache::HostPromptCache(uint64_t limit, memory::Budget* budget, std::string owner)
    : limit_(limit), budget_(budget), owner_(std::move(owner)) {
  if (budget_)
    reclaimer_id_ = budget_->add_reclaimer(owner_, [this](uint64_t wanted) { return shed(wanted); });
}

HostPromptCache::~HostPromptCache() {
  if (budget_) budget_->remove_reclaimer(reclaimer_id_);  // before the entries go: no call runs after this
  clear();
}

void HostPromptCache::give_back(uint64_t bytes) {
  if (budget_ && bytes > 0) budget_->unreserve(owner_, bytes);
}

void HostPromptCache::erase_locked(std::deque<Entry>::iterator it) {
  const uint64_t bytes = it->state.size();
  stats_.bytes -= bytes;
  stats_.tokens -= it->tokens.size();
  --stats_.entries;
  entries_.erase(it);
  give_back(bytes);
}

void HostPromptCache::drop_front_locked() { erase_locked(entries_.begin()); }

HostPromptCache::Match HostPromptCache::best(const std::vector<int32_t>& prompt) const {
  std::lock_guard lock(mu_);
  Match m;
  for (const auto& e : entries_) {
    const size_t prefix = common_prefix(e.tokens, prompt);
    if (prefix == 0 || prefix * 4 < e.tokens.size()) continue;
    if (prefix >= m.prefix) m = {e.id, prefix, e.tokens.size()};  // later entries are newer
  }
  return m;
}

bool HostPromptCache::save(llama_context* ctx, int32_t seq, const std::vector<int32_t>& tokens) {
  if (tokens.empty()) return false;
  {
    std::lock_guard lock(mu_);
    for (const auto& e : entries_)
      if (common_prefix(e.tokens, tokens) == tokens.size()) return false;  // held already
  }
  const size_t size = llama_state_seq_get_size(ctx, seq);
  if (size == 0 || (limit_ != EngineOptions::kUnlimited && size > limit_)) return false;
  {
    std::lock_guard lock(mu_);
    // Entries this state extends are part of it; then room under the limit, oldest first.
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (common_prefix(it->tokens, tokens) == it->tokens.size()) {
        const auto i = it - entries_.begin();
        erase_locked(it);
        it = entries_.begin() + i;
      } else {
        ++it;
      }
    }
    if (limit_ != EngineOptions::kUnlimited)
      while (!entries_.empty() && stats_.bytes + size > limit_) drop_front_locked();
  }
  if (budget_) {
    // The budget may take other owners' caches first; our own older entries are ours to give up.
    while (!budget_->reserve(owner_, size).ok()) {
      std::lock_guard lock(mu_);
      if (entries_.empty()) {
        GANTRY_LOG_DEBUG("host prompt cache of '{}': no room in the {} budget for a {}-token state ({})",
                         owner_, budget_->device(), tokens.size(), memory::format_bytes(size));
        return false;
      }
      drop_front_locked();
    }
  }
  Entry e;
  e.tokens = tokens;
  try {
    e.state.resize(size);
  } catch (const std::bad_alloc&) {
    give_back(size);
    return false;
  }
  if (llama_state_seq_get_data(ctx, e.state.data(), size, seq) != size) {
    give_back(size);
    return false;
  }
  std::lock_guard lock(mu_);
  e.id = next_id_++;
  stats_.bytes += size;
  stats_.tokens += e.tokens.size();
  ++stats_.entries;
  ++stats_.saves;
  entries_.push_back(std::move(e));
  return true;
}

HostPromptCache::Taken::Taken(HostPromptCache* cache, std::vector<int32_t> tokens, std::vector<uint8_t> state)
    : cache_(cache), tokens_(std::move(tokens)), state_(std::move(state)) {}

HostPromptCache::Taken::Taken(Taken&& o) noexcept
    : cache_(o.cache_), tokens_(std::move(o.tokens_)), state_(std::move(o.state_)) {
  o.cache_ = nullptr;
}

HostPromptCache::Taken::~Taken() {
  if (cache_) cache_->give_back(state_.size());
}

Result<HostPromptCache::Taken> HostPromptCache::take(uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = std::find_if(entries_.begin(), entries_.end(), [id](const Entry& x) { return x.id == id; });
  if (it == entries_.end()) return NotFound("host prompt cache entry " + std::to_string(id) + " is gone");
  Taken t(this, std::move(it->tokens), std::move(it->state));
  stats_.bytes -= t.state_.size();
  stats_.tokens -= t.tokens_.size();
  --stats_.entries;
  entries_.erase(it);
  return t;
}

Result<std::vector<int32_t>> HostPromptCache::restore(llama_context* ctx, int32_t seq, Taken entry) {
  const size_t size = entry.state_.size();
  const size_t n = llama_state_seq_set_data(ctx, entry.state_.data(), size, seq);
  if (n != size) {
    llama_memory_seq_rm(llama_get_memory(ctx), seq, -1, -1);
    return Internal("llama.cpp could not restore a " + std::to_string(entry.tokens_.size()) +
                    "-token sequence state from the host prompt cache");
  }
  {
    std::lock_guard lock(mu_);
    ++stats_.restores;
  }
  return std::move(entry.tokens_);  // `entry` gives its bytes back as it goes
}

uint64_t HostPromptCache::shed(uint64_t wanted) {
  std::lock_guard lock(mu_);
  uint64_t freed = 0;
  while (freed < wanted && !entries_.empty()) {
    freed += entries_.front().state.size();
    drop_front_locked();
  }
  stats_.shed_bytes += freed;
  if (freed > 0)
    GANTRY_LOG_DEBUG("host prompt cache of '{}': gave back {} under memory pressure", owner_,
                     memory::format_bytes(freed));
  return freed;
}

void HostPromptCache::clear() {
  std::lock_guard lock(mu_);
  while (!entries_.empty()) drop_front_locked();
}

HostPromptCache::Stats HostPromptCache::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace gantry::llama

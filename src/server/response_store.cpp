#include "gantry/server/response_store.h"

namespace gantry::server {

size_t StoredResponse::bytes() const {
  constexpr size_t kPerMessage = sizeof(backend::ChatMessage);
  size_t n = sizeof(StoredResponse) + id.size() + body.size() + input_items.size();
  for (const auto& m : conversation) {
    n += kPerMessage + m.role.size() + m.content.size() + m.tool_call_id.size() + m.tool_name.size() +
         m.reasoning_content.size();
    for (const auto& c : m.tool_calls) n += sizeof(c) + c.id.size() + c.name.size() + c.arguments.size();
  }
  return n;
}

void ResponseStore::erase_locked(Order::iterator it) {
  bytes_ -= (*it)->bytes();
  index_.erase((*it)->id);
  order_.erase(it);
}

void ResponseStore::put(std::shared_ptr<const StoredResponse> response) {
  if (capacity_ == 0 || !response) return;
  const size_t size = response->bytes();
  std::lock_guard lock(mu_);
  if (auto it = index_.find(response->id); it != index_.end()) erase_locked(it->second);
  if (size > max_bytes_) return;
  while (!order_.empty() && (order_.size() >= capacity_ || bytes_ + size > max_bytes_)) {
    erase_locked(std::prev(order_.end()));
  }
  order_.push_front(std::move(response));
  index_.emplace(order_.front()->id, order_.begin());
  bytes_ += size;
}

std::shared_ptr<const StoredResponse> ResponseStore::get(std::string_view id, size_t owner) {
  std::lock_guard lock(mu_);
  auto it = index_.find(std::string(id));
  if (it == index_.end() || (*it->second)->owner != owner) return nullptr;
  order_.splice(order_.begin(), order_, it->second);  // iterators stay valid
  return order_.front();
}

bool ResponseStore::erase(std::string_view id, size_t owner) {
  std::lock_guard lock(mu_);
  auto it = index_.find(std::string(id));
  if (it == index_.end() || (*it->second)->owner != owner) return false;
  erase_locked(it->second);
  return true;
}

std::vector<std::shared_ptr<const StoredResponse>> ResponseStore::list(size_t owner) const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<const StoredResponse>> out;
  for (const auto& r : order_)
    if (r->owner == owner) out.push_back(r);
  return out;
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mu_);
  return order_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

}  // namespace gantry::server

#include "gantry/server/response_store.h"

namespace gantry::server {

void ResponseStore::put(std::shared_ptr<const StoredResponse> response) {
  if (capacity_ == 0 || !response) return;
  std::lock_guard lock(mu_);
  if (auto it = index_.find(response->id); it != index_.end()) {
    order_.erase(it->second);
    index_.erase(it);
  }
  order_.push_front(std::move(response));
  index_.emplace(order_.front()->id, order_.begin());
  while (order_.size() > capacity_) {
    index_.erase(order_.back()->id);
    order_.pop_back();
  }
}

std::shared_ptr<const StoredResponse> ResponseStore::get(std::string_view id) {
  std::lock_guard lock(mu_);
  auto it = index_.find(std::string(id));
  if (it == index_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second);  // iterators stay valid
  return order_.front();
}

bool ResponseStore::erase(std::string_view id) {
  std::lock_guard lock(mu_);
  auto it = index_.find(std::string(id));
  if (it == index_.end()) return false;
  order_.erase(it->second);
  index_.erase(it);
  return true;
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mu_);
  return order_.size();
}

}  // namespace gantry::server

// ResponseStore: the responses `gantry serve` keeps for the Responses API (previous_response_id,
// GET and DELETE /v1/responses/{id}), in memory, bounded.
//
// Contract:
// - Holds at most `capacity` responses; putting one more evicts the least recently used (a get
//   counts as a use). Capacity 0 keeps nothing (every get misses).
// - Each entry is immutable once put and shared: get() returns a pointer that stays valid however
//   the store changes afterwards.
// - put() of an id already held replaces it. erase() says whether the id was held.
// - Thread-safe: every method may be called from many threads at once.
// - Nothing survives the process (a restarted server answers 404 for earlier ids).
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gantry/backend/chat.h"

namespace gantry::server {

struct StoredResponse {
  std::string id;
  std::string body;  // the Response object as GET /v1/responses/{id} returns it (JSON)
  // The conversation up to and including this response's answer (its input items after the
  // history it continued, then the assistant turn), without its instructions: what a request with
  // previous_response_id = id continues.
  std::vector<backend::ChatMessage> conversation;
};

class ResponseStore {
 public:
  explicit ResponseStore(size_t capacity) : capacity_(capacity) {}

  void put(std::shared_ptr<const StoredResponse> response);
  std::shared_ptr<const StoredResponse> get(std::string_view id);  // nullptr: not held
  bool erase(std::string_view id);
  size_t size() const;
  size_t capacity() const { return capacity_; }

 private:
  using Order = std::list<std::shared_ptr<const StoredResponse>>;  // most recently used first
  const size_t capacity_;
  mutable std::mutex mu_;
  Order order_;
  std::unordered_map<std::string, Order::iterator> index_;
};

}  // namespace gantry::server

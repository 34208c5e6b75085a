// ResponseStore: the responses `gantry serve` keeps for the Responses API (previous_response_id,
// GET and DELETE /v1/responses/{id}) and the chat completions made with store: true (GET
// /v1/chat/completions[/{id}[/messages]], DELETE), one store each, in memory, bounded.
//
// Contract:
// - Holds at most `capacity` responses and at most `max_bytes` of them (StoredResponse::bytes(): its
//   body and conversation text); putting one more evicts the least recently used (a get counts as a
//   use) until both hold. Capacity 0 keeps nothing (every get misses); a response larger than
//   max_bytes alone is not kept.
// - Each entry is immutable once put and shared: get() returns a pointer that stays valid however
//   the store changes afterwards.
// - put() of an id already held replaces it. erase() says whether the id was held.
// - Each response has an owner (ApiKeys::owner(): which API key made it, never the key itself): get()
//   and erase() with another owner act as if the id were not held (a miss, nothing erased, no use
//   counted), so one key cannot read, delete or continue another key's responses even with the id.
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
  size_t owner = 0;  // ApiKeys::owner() of the request that made it
  std::string body;  // the Response object as GET /v1/responses/{id} returns it (JSON)
  // The conversation up to and including this response's answer (its input items after the
  // history it continued, then the assistant turn), without its instructions: what a request with
  // previous_response_id = id continues.
  std::vector<backend::ChatMessage> conversation;
  // Its request's input items as GET /v1/responses/{id}/input_items lists them (a JSON array).
  std::string input_items;

  size_t bytes() const;  // what it costs the store: its strings' sizes plus a fixed overhead per message
};

class ResponseStore {
 public:
  static constexpr size_t kDefaultMaxBytes = size_t{256} << 20;
  explicit ResponseStore(size_t capacity, size_t max_bytes = kDefaultMaxBytes)
      : capacity_(capacity), max_bytes_(max_bytes) {}

  void put(std::shared_ptr<const StoredResponse> response);
  // nullptr: not held, or held for another owner.
  std::shared_ptr<const StoredResponse> get(std::string_view id, size_t owner);
  bool erase(std::string_view id, size_t owner);  // false: not held, or held for another owner
  // The responses `owner` holds, most recently put or used first (listing counts as no use).
  std::vector<std::shared_ptr<const StoredResponse>> list(size_t owner) const;
  size_t size() const;
  size_t capacity() const { return capacity_; }
  size_t bytes() const;  // of the responses held

 private:
  using Order = std::list<std::shared_ptr<const StoredResponse>>;  // most recently used first
  void erase_locked(Order::iterator it);

  const size_t capacity_;
  const size_t max_bytes_;
  mutable std::mutex mu_;
  Order order_;
  size_t bytes_ = 0;
  std::unordered_map<std::string, Order::iterator> index_;
};

}  // namespace gantry::server

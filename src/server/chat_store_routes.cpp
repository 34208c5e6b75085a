// Stored chat completions (OpenAI's store: true): GET /v1/chat/completions (the caller's, listed),
// GET / DELETE /v1/chat/completions/{id} and GET /v1/chat/completions/{id}/messages, over a bounded
// ResponseStore of their own (--responses-store entries, like the Responses API's). Updating one's
// metadata (POST /v1/chat/completions/{id}) is not offered: it answers 405. Another key's completion
// answers as one never made.
#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "gantry/protocol/openai_codec.h"
#include "route_table.h"
#include "server_state.h"

namespace gantry::server {

void keep_chat_completion(Server::State& s, size_t owner, std::string id, std::string body,
                          const std::vector<backend::ChatMessage>& messages) {
  auto stored = std::make_shared<StoredResponse>();
  stored->input_items = openai::stored_messages(id, messages);
  stored->id = std::move(id);
  stored->owner = owner;
  stored->body = std::move(body);
  s.chat_completions.put(std::move(stored));
}

namespace {

// The value of `key` in a query string ("" when absent; not percent-decoded: ids and numbers only).
std::string query_value(std::string_view query, std::string_view key) {
  size_t i = 0;
  while (i <= query.size()) {
    size_t amp = query.find('&', i);
    if (amp == std::string_view::npos) amp = query.size();
    const std::string_view pair = query.substr(i, amp - i);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == key)
      return eq == std::string_view::npos ? "" : std::string(pair.substr(eq + 1));
    i = amp + 1;
  }
  return "";
}

// limit (1..100, default 20), order (asc by creation, OpenAI's default, or desc), after (an id).
struct Page {
  size_t limit = 20;
  bool desc = false;
  std::string after;
};

std::optional<Page> page_of(Reply& reply, std::string_view query) {
  Page p;
  if (auto l = query_value(query, "limit"); !l.empty()) {
    int n = 0;
    auto [end, ec] = std::from_chars(l.data(), l.data() + l.size(), n);
    if (ec != std::errc() || end != l.data() + l.size() || n < 1 || n > 100) {
      reply.error(400, "'limit' must be an integer from 1 to 100", "limit");
      return std::nullopt;
    }
    p.limit = static_cast<size_t>(n);
  }
  const std::string order = query_value(query, "order");
  if (!order.empty() && order != "asc" && order != "desc") {
    reply.error(400, "'order' must be \"asc\" or \"desc\"", "order");
    return std::nullopt;
  }
  p.desc = order == "desc";
  p.after = query_value(query, "after");
  return p;
}

// The items from just after `after` (all when empty), at most `limit`; has_more when some are left.
std::string page(const std::vector<std::string>& ids, const std::vector<std::string>& items, const Page& p) {
  size_t start = 0;  // ids and items are as long
  if (!p.after.empty()) {
    auto it = std::find(ids.begin(), ids.end(), p.after);
    start = it == ids.end() ? ids.size() : static_cast<size_t>(it - ids.begin()) + 1;
  }
  const size_t end = std::min(items.size(), start + p.limit);  // start <= items.size()
  const std::vector<std::string> shown(items.begin() + static_cast<std::ptrdiff_t>(start),
                                       items.begin() + static_cast<std::ptrdiff_t>(end));
  return openai::stored_list(shown, end < items.size());
}

void not_found(Reply& reply, const std::string& id) {
  reply.error(404,
              "chat completion '" + id.substr(0, 80) +
                  "' not found (never made, made without store: true, deleted, or evicted; the server keeps "
                  "the last --responses-store)",
              "completion_id", "not_found");
}

void list(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams&) {
  auto p = page_of(*reply, request.query);
  if (!p) return;
  // The store lists by use; the order asked for is by creation (the completion's "created", then its
  // place in the store for completions of the same second).
  auto all = s.chat_completions.list(s.owner(request));
  std::vector<std::pair<int64_t, size_t>> order;
  for (size_t i = 0; i < all.size(); ++i) {
    const auto body = nlohmann::json::parse(all[i]->body, nullptr, false);
    const int64_t created = body.is_object() ? body.value("created", int64_t{0}) : 0;
    order.emplace_back(-created, i);  // newest first
  }
  std::sort(order.begin(), order.end());
  std::vector<std::string> ids, items;
  for (const auto& [created, i] : order) {
    ids.push_back(all[i]->id);
    items.push_back(all[i]->body);
  }
  if (!p->desc) {
    std::reverse(ids.begin(), ids.end());
    std::reverse(items.begin(), items.end());
  }
  reply->json(200, page(ids, items, *p));
}

void get(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams& params) {
  auto stored = s.chat_completions.get(params.id, s.owner(request));
  if (!stored) return not_found(*reply, params.id);
  reply->json(200, stored->body);
}

void erase(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams& params) {
  if (!s.chat_completions.erase(params.id, s.owner(request))) return not_found(*reply, params.id);
  reply->json(200, openai::stored_deleted(params.id));
}

void messages(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request,
              const RouteParams& params) {
  auto p = page_of(*reply, request.query);
  if (!p) return;
  auto stored = s.chat_completions.get(params.id, s.owner(request));
  if (!stored) return not_found(*reply, params.id);
  const nlohmann::json all = nlohmann::json::parse(stored->input_items, nullptr, false);
  std::vector<std::string> ids, items;
  if (all.is_array()) {
    for (const auto& m : all) {
      ids.push_back(m.value("id", ""));
      items.push_back(m.dump());
    }
  }
  if (p->desc) {
    std::reverse(ids.begin(), ids.end());
    std::reverse(items.begin(), items.end());
  }
  reply->json(200, page(ids, items, *p));
}

constexpr Protocol kOpenai = Protocol::kOpenai;
const Route kRoutes[] = {
    {.method = "GET",
     .pattern = "/v1/chat/completions",
     .protocol = kOpenai,
     .runs = Route::Runs::kControl,
     .handle = list},
    {.method = "GET",
     .pattern = "/v1/chat/completions/{id}",
     .protocol = kOpenai,
     .runs = Route::Runs::kControl,
     .handle = get},
    {.method = "DELETE",
     .pattern = "/v1/chat/completions/{id}",
     .protocol = kOpenai,
     .runs = Route::Runs::kControl,
     .handle = erase},
    {.method = "GET",
     .pattern = "/v1/chat/completions/{id}/messages",
     .protocol = kOpenai,
     .runs = Route::Runs::kControl,
     .handle = messages},
};

}  // namespace

std::span<const Route> chat_store_routes() { return kRoutes; }

}  // namespace gantry::server

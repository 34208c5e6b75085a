// Route tables (private to src/server/). Each protocol's routes file lists its routes as one small table
// — method, path pattern, where the handler runs, the handler — and exposes it through a function below;
// find_route() composes the tables. A request's route is found from its method and path alone, before
// its body is read, so the header decides keys, 405, 429 and the body limit (server.cpp).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "server_state.h"

namespace gantry::server {

// What a route's pattern captured from the (percent-decoded) path.
struct RouteParams {
  std::string model;    // {model}: also the request's metrics label
  std::string version;  // {version}: "" when the path names none
  std::string asset;    // {asset}
  std::string id;       // {id} (a stored response's; not a label)
};

struct Route {
  // Called once per request, on the thread `runs` names; answers through `reply`.
  using Handler = void (*)(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request,
                           const RouteParams& params);
  enum class Runs {
    kInline,    // on the I/O thread, at once: answers that compute nothing (probes, embedded files)
    kControl,   // Server::State::control: reads the server's state, never waits behind inference
    kMetadata,  // Server::State::metadata_pool(): control, or the workers when answering may load a model
    kWorkers,   // Server::State::workers: inference, loading
  };
  enum class Access {
    kKey,         // an API key (when the server has keys)
    kProbe,       // any method, no key, answered while draining: liveness and readiness probes
    kPublicPage,  // GET/HEAD without a key (the dashboard's files hold no data); other methods need one
  };

  std::string_view method;   // the method it takes: "GET" (HEAD too), "POST" or "DELETE"
  std::string_view pattern;  // "/v2/models/{model}/infer": literal segments, and {model}, {version},
                             // {asset} or {id} capture one segment each; a final "**" matches the rest
  Protocol protocol;         // the shape of its errors and its metrics label
  Runs runs;
  Handler handle;  // null: not a route (answered 404) though the pattern captured labels
  Access access = Access::kKey;
  bool inference = false;       // bounded by the server's queue: 429 when it is full
  bool batched = false;         // 429 also when the model's queue is full; a small request for a loaded
                                // model that batches runs on the I/O thread (parse and queue)
  bool versioned = false;       // a {version} other than "1" is answered 404
  bool while_draining = false;  // answered while draining (others: 503)
};

// One table per protocol, in its routes file.
std::span<const Route> kserve_routes();      // kserve_routes.cpp: /v2 (health, metadata, infer, repository)
std::span<const Route> openai_routes();      // openai_routes.cpp: /v1/models, chat, completions, embeddings
std::span<const Route> anthropic_routes();   // anthropic_routes.cpp: /v1/messages
std::span<const Route> responses_routes();   // responses_routes.cpp: /v1/responses
std::span<const Route> chat_store_routes();  // chat_store_routes.cpp: stored /v1/chat/completions
std::span<const Route> rerank_routes();      // rerank_routes.cpp: /v1/rerank, /rerank
std::span<const Route> ollama_routes();      // ollama_routes.cpp: /api
// llama_server_routes.cpp: llama-server's own API (/health, /props, /completion, /tokenize, ...)
std::span<const Route> llama_server_routes();
std::span<const Route> dashboard_routes();  // dashboard_routes.cpp: /, /dashboard, /gantry
std::span<const Route> metrics_routes();    // metrics_routes.cpp: /metrics

struct RouteMatch {
  const Route* route = nullptr;  // null: no route (404)
  RouteParams params;
  Protocol protocol = Protocol::kHttp;  // the route's; else by the path's first segment (v2, v1, api)
};
// The route of `method` and `path`: of the routes whose pattern matches, the first that takes `method`
// (HEAD as GET), else the first (which answers 405).
RouteMatch find_route(std::string_view path, std::string_view method);

}  // namespace gantry::server

// POST /v1/rerank, /rerank, /v1/reranking, /reranking and /v2/rerank: a reranking model's (pooling "rank")
// relevance scores for documents against a query, in llama-server's shape (gantry/protocol/rerank_codec.h).
#include "gantry/protocol/rerank_codec.h"
#include "gantry/runtime/model_queue.h"
#include "route_table.h"
#include "server_state.h"

namespace gantry::server {
namespace {}  // namespace

void rerank_documents(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest request) {
  auto parsed = rerank::parse_rerank_request(request.body, s.options.any_model_name);
  if (auto* e = std::get_if<openai::ApiError>(&parsed)) return send_api_error(*reply, *e);
  const auto& req = std::get<rerank::RerankRequest>(parsed);
  reply->set_model(req.model);
  auto handle = s.model(req.model);
  if (!handle.ok()) {
    const int code = http_status_for(handle.status());
    reply->error(code, handle.status().message(), "model", code == 404 ? "model_not_found" : "");
    return;
  }
  backend::TextModel* text = handle->model().text();
  if (!text || text->text_info().pooling != "rank") {
    reply->error(
        400,
        "model '" + req.model + "' is not a reranking model: " +
            (text ? "its pooling is " + text->text_info().pooling : std::string("it takes no text")) +
            " (rerankers are GGUF models whose pooling is rank)",
        "model", "model_not_reranker");
    return;
  }
  auto ranked = handle->queue().rerank(req.query, req.documents, work_cancel(s, *reply), reply->admission());
  if (!ranked.ok()) {
    if (ranked.status().code() == StatusCode::kCancelled)
      GANTRY_LOG_INFO("rerank on '{}' cancelled after its client left or the server stopped ({} documents)",
                      req.model, req.documents.size());
    const bool too_long = backend::is_context_length_exceeded(ranked.status());
    return send_api_error(*reply, openai::api_error(ranked.status(), too_long ? "documents" : ""));
  }
  reply->json(200, rerank::rerank_response(req, ranked->scores, ranked->prompt_tokens));
}

// Rerank, at llama-server's four paths and Cohere's current one (/v2/rerank).
namespace {
void rerank(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams&) {
  rerank_documents(s, std::move(reply), std::move(request));
}

const Route kRoutes[] = {
    {.method = "POST",
     .pattern = "/v1/rerank",
     .protocol = Protocol::kOpenai,
     .runs = Route::Runs::kWorkers,
     .handle = rerank,
     .inference = true},
    {.method = "POST",
     .pattern = "/rerank",
     .protocol = Protocol::kOpenai,
     .runs = Route::Runs::kWorkers,
     .handle = rerank,
     .inference = true},
    {.method = "POST",
     .pattern = "/v1/reranking",
     .protocol = Protocol::kOpenai,
     .runs = Route::Runs::kWorkers,
     .handle = rerank,
     .inference = true},
    {.method = "POST",
     .pattern = "/reranking",
     .protocol = Protocol::kOpenai,
     .runs = Route::Runs::kWorkers,
     .handle = rerank,
     .inference = true},
    {.method = "POST",
     .pattern = "/v2/rerank",
     .protocol = Protocol::kOpenai,
     .runs = Route::Runs::kWorkers,
     .handle = rerank,
     .inference = true},
};
}  // namespace

std::span<const Route> rerank_routes() { return kRoutes; }

}  // namespace gantry::server

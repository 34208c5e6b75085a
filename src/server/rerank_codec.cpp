#include "gantry/server/rerank_codec.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>

#include "gantry/core/json.h"

namespace gantry::server::rerank {
namespace {

using nlohmann::json;

openai::ApiError bad(std::string param, std::string message) {
  openai::ApiError e;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}

}  // namespace

std::variant<RerankRequest, openai::ApiError> parse_rerank_request(std::string_view body) {
  auto parsed = parse_json(body, "the request body");
  if (!parsed.ok()) return bad("", parsed.status().message());
  const json& j = *parsed;
  if (!j.is_object())
    return bad("", std::string("the request body must be a JSON object, got ") + j.type_name());
  RerankRequest r;
  const json* model = json_field(j, "model");
  if (!model) return bad("model", "'model' is required: the name of a reranking model");
  if (!model->is_string())
    return bad("model", std::string("'model' must be a string, got ") + model->type_name());
  r.model = model->get<std::string>();
  const json* query = json_field(j, "query");
  if (!query) return bad("query", "'query' is required: the text the documents are ranked against");
  if (!query->is_string())
    return bad("query", std::string("'query' must be a string, got ") + query->type_name());
  r.query = query->get<std::string>();
  const json* docs = json_field(j, "documents");
  if (!docs) return bad("documents", "'documents' is required: a non-empty array of strings");
  if (!docs->is_array() || docs->empty())
    return bad("documents", "'documents' must be a non-empty array of strings");
  for (size_t i = 0; i < docs->size(); ++i) {
    const json& d = (*docs)[i];
    if (!d.is_string()) {
      return bad("documents",
                 "'documents[" + std::to_string(i) + "]' must be a string, got " + d.type_name());
    }
    r.documents.push_back(d.get<std::string>());
  }
  if (const json* top = json_field(j, "top_n")) {
    if (!top->is_number_integer())
      return bad("top_n", std::string("'top_n' must be an integer, got ") + top->type_name());
    if (!top->is_number_unsigned() && top->get<int64_t>() < 0)
      return bad("top_n", "'top_n' must be >= 0, got " + top->dump());
    r.top_n = static_cast<size_t>(std::min<uint64_t>(top->get<uint64_t>(), r.documents.size()));
    r.has_top_n = true;
  }
  if (const json* ret = json_field(j, "return_documents")) {
    if (!ret->is_boolean())
      return bad("return_documents",
                 std::string("'return_documents' must be a boolean, got ") + ret->type_name());
    r.return_documents = ret->get<bool>();
  }
  return r;
}

std::string rerank_response(const RerankRequest& request, const std::vector<float>& scores,
                            int prompt_tokens) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  if (request.has_top_n && request.top_n < order.size()) order.resize(request.top_n);
  json results = json::array();
  for (size_t i : order) {
    json r = {{"index", i}, {"relevance_score", scores[i]}};
    if (request.return_documents && i < request.documents.size())
      r["document"] = {{"text", request.documents[i]}};
    results.push_back(std::move(r));
  }
  json out = {{"model", request.model},
              {"object", "list"},
              {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}},
              {"results", std::move(results)}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gantry::server::rerank

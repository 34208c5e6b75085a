#include "gantry/protocol/rerank_codec.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>

#include "gantry/core/json.h"
#include "gantry/core/json_reader.h"

namespace gantry::protocol::rerank {
namespace {

using nlohmann::json;

openai::ApiError bad(std::string param, std::string message) {
  openai::ApiError e;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}

}  // namespace

std::variant<RerankRequest, openai::ApiError> parse_rerank_request(std::string_view body,
                                                                   bool model_optional) {
  auto parsed = parse_json_unique_keys(body, "the request body", client_json_limits(body));
  if (!parsed.ok()) return bad("", parsed.status().message());
  const json& j = *parsed;
  if (!j.is_object())
    return bad("", std::string("the request body must be a JSON object, got ") + j.type_name());
  RerankRequest r;
  auto field = [](const JsonFieldCheck& c) { return bad(c->field, c->quoted()); };
  if (!model_optional && !json_field(j, "model"))
    return bad("model", "'model' is required: the name of a reranking model");
  if (auto e = read_json_string(j, "model", "", r.model)) return field(e);
  if (!json_field(j, "query"))
    return bad("query", "'query' is required: the text the documents are ranked against");
  if (auto e = read_json_string(j, "query", "", r.query)) return field(e);
  const json* docs = json_field(j, "documents");
  const char* docs_name = "documents";
  if (!docs && (docs = json_field(j, "texts"))) {
    r.tei = true;
    docs_name = "texts";
  }
  if (!docs) return bad("documents", "'documents' is required: a non-empty array of strings");
  if (!docs->is_array() || docs->empty())
    return bad(docs_name, std::string("'") + docs_name + "' must be a non-empty array of strings");
  for (size_t i = 0; i < docs->size(); ++i) {
    const json& d = (*docs)[i];
    if (!d.is_string()) {
      return bad(docs_name, std::string("'") + docs_name + "[" + std::to_string(i) +
                                "]' must be a string, got " + d.type_name());
    }
    r.documents.push_back(d.get<std::string>());
  }
  if (const json* top = json_field(j, "top_n")) {  // any count >= 0; beyond the documents means all
    if (!top->is_number_integer())
      return bad("top_n", std::string("'top_n' must be an integer, got ") + top->type_name());
    if (!top->is_number_unsigned() && top->get<int64_t>() < 0)
      return bad("top_n", "'top_n' must be >= 0, got " + top->dump());
    r.top_n = static_cast<size_t>(std::min<uint64_t>(top->get<uint64_t>(), r.documents.size()));
    r.has_top_n = true;
  }
  if (auto e = read_json_bool(j, r.tei ? "return_text" : "return_documents", "", r.return_documents))
    return field(e);
  return r;
}

std::string rerank_response(const RerankRequest& request, const std::vector<float>& scores,
                            int prompt_tokens) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  if (request.has_top_n && request.top_n < order.size()) order.resize(request.top_n);
  json results = json::array();
  if (request.tei) {
    for (size_t i : order) {
      json r = {{"index", i}, {"score", scores[i]}};
      if (request.return_documents && i < request.documents.size()) r["text"] = request.documents[i];
      results.push_back(std::move(r));
    }
    return results.dump(-1, ' ', false, json::error_handler_t::replace);
  }
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

}  // namespace gantry::protocol::rerank

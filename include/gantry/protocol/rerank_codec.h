// The rerank API's bodies (POST /v1/rerank and /rerank), in llama-server's shape (the Jina/Cohere one):
//   request  {"model", "query": string, "documents": [string, ...], "top_n"?: int, "return_documents"?: bool}
//   answer   {"model", "object": "list", "usage": {"prompt_tokens", "total_tokens"},
//             "results": [{"index", "relevance_score", "document"?: {"text"}}, ...]}
// results are sorted by relevance_score, highest first (ties keep the documents' order), and cut to top_n
// (default: all). Documents come back only with return_documents true (llama-server never sends them).
// Text Embeddings Inference's shape is taken too (llama-server's): "texts" instead of "documents" (and
// "return_text" for return_documents) answers a plain array [{"index", "score", "text"?}, ...], sorted and
// cut the same way.
// Unknown fields are ignored; known ones of the wrong type are a 400 naming the field. Pure functions:
// no I/O, no model.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gantry/protocol/openai_codec.h"

namespace gantry::protocol::rerank {

struct RerankRequest {
  std::string model;                   // required unless the parser was told it is optional
  bool tei = false;                    // the request gave "texts": TEI's shape in and out
  std::string query;                   // required (may be empty text)
  std::vector<std::string> documents;  // required: a non-empty array of strings
  size_t top_n = 0;                    // how many results to answer; all when the request gives none
  bool has_top_n = false;
  bool return_documents = false;
};

// `model_optional`: a request without "model" is taken (the server serves one model whatever the name).
std::variant<RerankRequest, openai::ApiError> parse_rerank_request(std::string_view body,
                                                                   bool model_optional = false);

// `scores[i]` is documents[i]'s; `prompt_tokens` the tokens evaluated for all pairs.
std::string rerank_response(const RerankRequest& request, const std::vector<float>& scores,
                            int prompt_tokens);

}  // namespace gantry::protocol::rerank

// libFuzzer target: OpenAI request bodies (chat, completions, embeddings) as a client may send them.
// Any bytes must give a TextRequest/EmbeddingRequest or an ApiError with a 4xx status — never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gantry/protocol/openai_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gantry::protocol::openai;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (Endpoint e : {Endpoint::kChat, Endpoint::kCompletion}) {
    auto r = parse_text_request(body, e);
    if (auto* err = std::get_if<ApiError>(&r)) {
      if (err->http_status < 400 || err->http_status >= 500 || err->message.empty()) std::abort();
      (void)error_body(*err);
    }
  }
  auto emb = parse_embedding_request(body);
  if (auto* err = std::get_if<ApiError>(&emb)) {
    if (err->http_status < 400 || err->http_status >= 500) std::abort();
  }
  return 0;
}

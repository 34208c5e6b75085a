// libFuzzer target: Ollama request bodies (/api/generate, /api/chat, /api/embed, /api/embeddings,
// /api/show) and keep_alive durations as a client may send them. Any bytes must give a request or an
// ApiError with a 4xx status and a message — never a crash; what parses must encode back to JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gantry/protocol/ollama_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gantry::protocol::ollama;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto check = [](const ApiError& e) {
    if (e.http_status < 400 || e.http_status >= 500 || e.message.empty()) std::abort();
    (void)error_body(e.message);
  };
  for (Endpoint e : {Endpoint::kGenerate, Endpoint::kChat}) {
    auto r = parse_text_request(body, e);
    if (auto* err = std::get_if<ApiError>(&r)) {
      check(*err);
      continue;
    }
    const TextRequest& req = std::get<TextRequest>(r);
    if (req.model.empty()) std::abort();
    if (req.num_predict && *req.num_predict == 0) std::abort();
    if (req.keep_alive && req.keep_alive->count() < -1) std::abort();
    (void)is_load_only(req);
    (void)tagged_name(req.model);
    (void)untagged_name(req.model);
    (void)load_response(e, req.model, "t", "load");
  }
  for (bool legacy : {false, true}) {
    auto r = parse_embed_request(body, legacy);
    if (auto* err = std::get_if<ApiError>(&r)) check(*err);
  }
  auto show = parse_show_request(body);
  if (auto* err = std::get_if<ApiError>(&show)) check(*err);
  auto d = parse_duration(body);
  if (d.ok() && d->count() < -1) std::abort();
  if (!d.ok() && d.status().message().empty()) std::abort();
  return 0;
}

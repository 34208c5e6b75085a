// libFuzzer target: Anthropic Messages request bodies (/v1/messages, /v1/messages/count_tokens) as a client may
// send them. Any bytes must give a MessagesRequest or an ApiError with a 4xx status — never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gantry/protocol/anthropic_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gantry::protocol::anthropic;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (Endpoint e : {Endpoint::kMessages, Endpoint::kCountTokens}) {
    auto r = parse_messages_request(body, e);
    if (auto* err = std::get_if<ApiError>(&r)) {
      if (err->http_status < 400 || err->http_status >= 500 || err->message.empty()) std::abort();
    }
  }
  return 0;
}

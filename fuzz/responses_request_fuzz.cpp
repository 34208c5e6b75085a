// libFuzzer target: OpenAI Responses request bodies (/v1/responses) as a client may send them. Any bytes must
// give a ResponsesRequest or an ApiError with a 4xx status — never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gantry/protocol/responses_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gantry::protocol;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto r = responses::parse_request(body);
  if (auto* err = std::get_if<openai::ApiError>(&r)) {
    if (err->http_status < 400 || err->http_status >= 500 || err->message.empty()) std::abort();
  }
  return 0;
}

// What a URL source makes of an HTTP server's answer — bytes from the network, untrusted — apart from the
// transfer itself: http_client.cpp runs libcurl and hands these functions the header lines, status code and
// body it received. Pure functions (internal to src/weights), fuzzed by fuzz/url_fetch_fuzz.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry::weights {

// "bytes FIRST-LAST/TOTAL" (RFC 9110 14.4) with first <= last < total. nullopt for anything else: an
// unsatisfied range ("bytes */1234"), an unknown total ("bytes 0-0/*"), a missing part, signs or blanks
// inside, a number over 2^64 - 1, a range that is empty or ends past the total.
struct ContentRange {
  uint64_t first = 0, last = 0, total = 0;
  bool operator==(const ContentRange&) const = default;
};
std::optional<ContentRange> parse_content_range(std::string_view value);

// One header line as libcurl hands it over, line ending included, for every response of a transfer (also
// the redirects before the last): a status line ("HTTP/...") begins a new response and clears
// `content_range`; a "Content-Range:" line (the name in any case) sets it to its value without the blanks
// (spaces, tabs) and line ending around it; any other line leaves it as it is.
void take_header_line(std::string_view line, std::string& content_range);

// A finished transfer: the status code (200 or 206: the transfer refuses every other one before these
// functions see it), the last response's Content-Range value ("" when it had none) and the body.
struct HttpAnswer {
  long code = 0;
  std::string content_range;
  std::string body;
};

struct HttpProbe {
  uint64_t size = 0;
  // Set when the server ignored the Range request and sent the whole file (then held here).
  std::optional<std::string> whole;
};

// The answer to "Range: bytes=0-0" on `url`: a 200 is the whole file (its body); a 206 must carry exactly
// byte 0 with "Content-Range: bytes 0-0/TOTAL", and TOTAL is the file's size, at most `max_bytes`
// (ResourceExhausted above it). Corrupt, naming the url and what the server sent, for any other answer.
Result<HttpProbe> probe_answer(const std::string& url, HttpAnswer answer, uint64_t max_bytes);

// The answer to a request for bytes [offset, offset + n) (n > 0) of a file of `total` bytes: it must be a 206
// with exactly that Content-Range and n body bytes, which are returned. Corrupt (a 200, another range) or
// IoError (a short body), naming the url and the range.
Result<std::string> range_answer(const std::string& url, uint64_t offset, uint64_t n, uint64_t total,
                                 HttpAnswer answer);

}  // namespace gantry::weights

// libFuzzer target: what a URL model fetch (weights::fetch_model_source, WeightSource::url) makes of an
// HTTP server's answers (src/weights/http_answer.h): header lines across redirects, Content-Range, the
// probe's answer to "bytes=0-0" and a range read's answer. Input: byte 0 picks the status code (200 or
// 206) and the probe's size limit, bytes 1-2 the range asked for; then header lines up to an empty line,
// then the body. Any input must end in an answer or an error naming the URL, and an accepted answer must be
// exactly what was asked: never a size the server did not state, never bytes of another range.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "weights/http_answer.h"

namespace {

namespace w = gantry::weights;

const std::string kUrl = "http://fuzz.invalid/m.gguf";

bool names_url(const gantry::Status& s) { return !s.ok() && s.message().find(kUrl) != std::string::npos; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const long code = (data[0] & 1) ? 206 : 200;
  static constexpr uint64_t kLimits[] = {0, 1, 4096, UINT64_MAX};
  const uint64_t max_bytes = kLimits[(data[0] >> 1) % 4];
  std::string_view rest(reinterpret_cast<const char*>(data + 3), size - 3);

  // Header lines as libcurl hands them over: each with its line ending; an empty line ends the headers.
  std::string content_range;
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl == std::string_view::npos ? rest.size() : nl + 1);
    rest.remove_prefix(line.size());
    if (line == "\n" || line == "\r\n") break;
    w::take_header_line(line, content_range);
    // The value is kept without the blanks (SP, HTAB) and the line ending around it; a bare CR inside a
    // line stays (and fails to parse).
    if (!content_range.empty() &&
        (std::string_view(" \t").find(content_range.front()) != std::string_view::npos ||
         std::string_view(" \t\r\n").find(content_range.back()) != std::string_view::npos))
      std::abort();
  }
  const std::string body(rest);

  // Content-Range: what parses is a range inside the file, and its numbers printed back parse to the same
  // range (leading zeros are digits too: "bytes 0-0/007" is 0-0/7).
  const auto cr = w::parse_content_range(content_range);
  if (cr) {
    if (cr->first > cr->last || cr->last >= cr->total) std::abort();
    const std::string printed = "bytes " + std::to_string(cr->first) + "-" + std::to_string(cr->last) + "/" +
                                std::to_string(cr->total);
    if (w::parse_content_range(printed) != cr) std::abort();
  }

  // The probe.
  auto probe = w::probe_answer(kUrl, w::HttpAnswer{code, content_range, body}, max_bytes);
  if (probe.ok()) {
    if (code == 200 && (!probe->whole || *probe->whole != body || probe->size != body.size())) std::abort();
    if (code == 206 && (probe->whole || !cr || cr->first != 0 || cr->last != 0 || body.size() != 1 ||
                        probe->size != cr->total || probe->size > max_bytes || probe->size == 0))
      std::abort();
  } else if (!names_url(probe.status())) {
    std::abort();
  }

  // A range read: the range the server states when it states one, moved by bytes 1-2 (0: that range), so
  // that both the matching and the mismatching answers are reached.
  uint64_t offset = cr ? cr->first : data[1], total = cr ? cr->total : data[1] + data[2] + 1u;
  uint64_t n = cr ? cr->last - cr->first + 1 : data[2] + 1u;
  if (data[1] & 0x80) offset += data[1] & 0x7f;
  if (data[2] & 0x80) n += data[2] & 0x7f;
  if (n == 0 || offset > UINT64_MAX - n) return 0;  // http_get_range never asks for these
  auto got = w::range_answer(kUrl, offset, n, total, w::HttpAnswer{code, content_range, body});
  if (got.ok()) {
    if (code != 206 || !cr || cr->first != offset || cr->last != offset + n - 1 || cr->total != total ||
        *got != body || got->size() != n)
      std::abort();
  } else if (!names_url(got.status())) {
    std::abort();
  }
  return 0;
}

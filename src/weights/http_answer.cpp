#include "weights/http_answer.h"

#include <cctype>
#include <charconv>
#include <utility>

namespace gantry::weights {
namespace {

// Decimal digits only: no sign, no blanks, nothing after.
std::optional<uint64_t> parse_u64(std::string_view s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<ContentRange> parse_content_range(std::string_view s) {
  if (!s.starts_with("bytes ")) return std::nullopt;
  s.remove_prefix(6);
  const auto dash = s.find('-'), slash = s.find('/');
  if (dash == std::string_view::npos || slash == std::string_view::npos || dash > slash) return std::nullopt;
  auto a = parse_u64(s.substr(0, dash)), b = parse_u64(s.substr(dash + 1, slash - dash - 1)),
       t = parse_u64(s.substr(slash + 1));
  if (!a || !b || !t) return std::nullopt;
  // A range the file cannot hold ("bytes 0-0/0", "bytes 5-2/9"): a server that sends it does not honour
  // Range requests, whatever the bytes it sent with it.
  if (*a > *b || *b >= *t) return std::nullopt;
  return ContentRange{*a, *b, *t};
}

void take_header_line(std::string_view line, std::string& content_range) {
  if (line.starts_with("HTTP/")) content_range.clear();  // a new response (after a redirect)
  constexpr std::string_view kKey = "content-range:";
  if (line.size() <= kKey.size()) return;
  std::string lower(line.substr(0, kKey.size()));
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower != kKey) return;
  auto v = line.substr(kKey.size());
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ' || v.back() == '\t'))
    v.remove_suffix(1);
  content_range = std::string(v);
}

Result<HttpProbe> probe_answer(const std::string& url, HttpAnswer answer, uint64_t max_bytes) {
  HttpProbe p;
  if (answer.code == 200) {  // Range ignored: this is the whole file
    p.size = answer.body.size();
    p.whole = std::move(answer.body);
    return p;
  }
  const auto cr = parse_content_range(answer.content_range);
  if (!cr || cr->first != 0 || cr->last != 0 || answer.body.size() != 1)
    return Corrupt(url + ": the server answered a request for byte 0 with Content-Range \"" +
                   answer.content_range + "\" and " + std::to_string(answer.body.size()) +
                   " bytes: it does not honour Range requests correctly");
  if (cr->total > max_bytes)
    return ResourceExhausted(url + ": " + std::to_string(cr->total) + " bytes is more than the limit of " +
                             std::to_string(max_bytes));
  p.size = cr->total;
  return p;
}

Result<std::string> range_answer(const std::string& url, uint64_t offset, uint64_t n, uint64_t total,
                                 HttpAnswer answer) {
  const std::string range = std::to_string(offset) + "-" + std::to_string(offset + n - 1);
  if (answer.code != 206)
    return Corrupt(url + ": asked for bytes " + range + ", the server answered HTTP " +
                   std::to_string(answer.code) + " without a range (it stopped honouring Range requests)");
  const auto cr = parse_content_range(answer.content_range);
  if (!cr || cr->first != offset || cr->last != offset + n - 1 || cr->total != total)
    return Corrupt(url + ": asked for bytes " + range + "/" + std::to_string(total) +
                   ", the server answered Content-Range \"" + answer.content_range + "\"");
  if (answer.body.size() != n)
    return IoError(url + ": truncated download: got " + std::to_string(answer.body.size()) + " of " +
                   std::to_string(n) + " bytes for range " + range);
  return std::move(answer.body);
}

}  // namespace gantry::weights

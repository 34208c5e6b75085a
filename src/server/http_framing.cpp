#include "http_framing.h"

#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <limits>
#include <string_view>
#include <vector>

namespace gantry::server::framing {
namespace {

namespace http = boost::beast::http;

bool is_ows(char c) { return c == ' ' || c == '\t'; }

// The codings of every Transfer-Encoding field, in order; empty list elements are skipped (RFC 9110
// §5.6.1).
std::vector<std::string_view> transfer_codings(const RequestParser::value_type& h) {
  std::vector<std::string_view> out;
  auto [first, last] = h.equal_range(http::field::transfer_encoding);
  for (auto it = first; it != last; ++it) {
    std::string_view v(it->value().data(), it->value().size());
    size_t i = 0;
    while (i <= v.size()) {
      size_t j = v.find(',', i);
      if (j == std::string_view::npos) j = v.size();
      std::string_view item = v.substr(i, j - i);
      while (!item.empty() && is_ows(item.front())) item.remove_prefix(1);
      while (!item.empty() && is_ows(item.back())) item.remove_suffix(1);
      if (!item.empty()) out.push_back(item);
      i = j + 1;
    }
  }
  return out;
}

bool is_chunked(std::string_view coding) {
  return boost::beast::iequals(boost::beast::string_view(coding.data(), coding.size()), "chunked");
}

}  // namespace

uint32_t header_limit(const HttpLimits& limits) {
  return std::min(limits.max_header_bytes, kMaxHeaderSection);
}

boost::beast::flat_buffer make_read_buffer(const HttpLimits& limits) {
  return boost::beast::flat_buffer(header_limit(limits));
}

void prepare_for_header(RequestParser& p, const HttpLimits& limits) {
  p.header_limit(header_limit(limits));
  p.body_limit(std::numeric_limits<std::uint64_t>::max());
}

void prepare_for_body(RequestParser& p, uint64_t max_body_bytes) { p.body_limit(max_body_bytes); }

std::optional<Refusal> check_framing(const RequestParser& p) {
  const auto& h = p.get();
  if (h.find(http::field::transfer_encoding) == h.end()) return std::nullopt;
  if (h.version() < 11) {
    // RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 message is faulty framing.
    return Refusal{400, "Transfer-Encoding is not allowed in an HTTP/1.0 request"};
  }
  const auto codings = transfer_codings(h);
  if (codings.empty()) return Refusal{400, "empty Transfer-Encoding"};
  if (!is_chunked(codings.back())) {
    return Refusal{400, "Transfer-Encoding '" + std::string(codings.back()) +
                            "' does not end in 'chunked': the length of the body cannot be determined"};
  }
  if (std::count_if(codings.begin(), codings.end(), is_chunked) > 1)
    return Refusal{400, "Transfer-Encoding applies 'chunked' more than once"};
  if (codings.size() > 1) {
    return Refusal{501, "transfer coding '" + std::string(codings.front()) +
                            "' is not supported (only 'Transfer-Encoding: chunked')"};
  }
  // Beast agrees (it frames the body by the same rule); a disagreement would be a smuggling hole.
  if (!p.chunked()) return Refusal{400, "Transfer-Encoding could not be applied"};
  return std::nullopt;
}

Opening classify_opening(std::string_view head) {
  const size_t n = std::min(head.size(), kHttp2Preface.size());
  if (head.substr(0, n) != kHttp2Preface.substr(0, n)) return Opening::kHttp1;
  return n == kHttp2Preface.size() ? Opening::kHttp2 : Opening::kUndecided;
}

}  // namespace gantry::server::framing

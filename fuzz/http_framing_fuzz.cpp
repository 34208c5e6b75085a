// libFuzzer target: HTTP/1.1 request framing as HttpServer reads it — Beast's request parser behind
// the server's own limits and Transfer-Encoding rules (src/server/http_framing.h, the one definition
// both use) — over arbitrary bytes arriving in arbitrary pieces, several requests per connection.
// Input: byte 0 picks the header and body limits, byte 1 the size of the pieces reads return; the
// rest is what the client sends. Any input must end in requests, refusals or error codes: never an
// exception (one escaping here is a crash, as it was on an I/O thread), never a body over its limit,
// never more buffered than the read buffer's bound.
#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/http/read.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "server/http_framing.h"

namespace {

namespace http = boost::beast::http;
using gantry::server::HttpLimits;
namespace framing = gantry::server::framing;

// A SyncReadStream handing out the input `piece` bytes at a time, then end of stream.
struct PieceStream {
  const uint8_t* data;
  size_t size;
  size_t piece;
  size_t pos = 0;

  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers, boost::system::error_code& ec) {
    if (pos == size) {
      ec = boost::asio::error::eof;
      return 0;
    }
    ec = {};
    size_t n = 0;
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers); ++it) {
      const size_t want = std::min({it->size(), size - pos, piece - n});
      std::memcpy(it->data(), data + pos, want);
      pos += want;
      n += want;
      if (n == piece || pos == size) break;
    }
    return n;
  }
  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers) {
    boost::system::error_code ec;
    size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // HTTP/2 detection (--grpc-port same): HTTP/2 exactly when the bytes begin with the whole preface,
  // undecided exactly when they are a proper prefix of it, else HTTP/1.1.
  {
    const std::string_view head(reinterpret_cast<const char*>(data), size);
    const auto p = framing::kHttp2Preface;
    const auto want = head.starts_with(p)                               ? framing::Opening::kHttp2
                      : (head.size() < p.size() && p.starts_with(head)) ? framing::Opening::kUndecided
                                                                        : framing::Opening::kHttp1;
    if (framing::classify_opening(head) != want) std::abort();
  }
  if (size < 2) return 0;
  HttpLimits limits;
  // Header limits: tiny, the default, and one above what Beast can hold (the server clamps it).
  static constexpr uint32_t kHeaderLimits[] = {256, 64 * 1024, std::numeric_limits<uint32_t>::max()};
  // Body limits: none allowed, the server's small routes (4 KiB), and its default --max-body-size.
  static constexpr uint64_t kBodyLimits[] = {0, 4096, 64ull << 20};
  limits.max_header_bytes = kHeaderLimits[data[0] % 3];
  const uint64_t body_limit = kBodyLimits[(data[0] / 3) % 3];
  PieceStream stream{data + 2, size - 2, static_cast<size_t>(data[1]) + 1};

  auto buffer = framing::make_read_buffer(limits);
  if (buffer.max_size() > framing::kMaxHeaderSection) std::abort();
  for (int request = 0; request < 64; ++request) {
    framing::RequestParser parser;
    framing::prepare_for_header(parser, limits);
    boost::system::error_code ec;
    http::read_header(stream, buffer, parser, ec);
    if (buffer.size() > buffer.max_size()) std::abort();
    if (ec) return 0;  // the server: 431, 408, 400 or a silent close; the connection ends
    if (auto refused = framing::check_framing(parser)) {
      if ((refused->status != 400 && refused->status != 501) || refused->message.empty()) std::abort();
      return 0;
    }
    // What check_framing lets through has one framing: a Transfer-Encoding means chunked.
    if (parser.get().find(http::field::transfer_encoding) != parser.get().end() && !parser.chunked())
      std::abort();
    if (auto cl = parser.content_length(); cl && *cl > body_limit) return 0;  // the server: 413
    if (!parser.is_done()) {
      framing::prepare_for_body(parser, body_limit);
      http::read(stream, buffer, parser, ec);
      if (buffer.size() > buffer.max_size()) std::abort();
      if (ec) return 0;  // the server: 413, 431, 400, 408 or a silent close
    }
    if (!parser.is_done() || parser.get().body().size() > body_limit) std::abort();
    if (!parser.get().keep_alive()) return 0;
  }
  return 0;
}

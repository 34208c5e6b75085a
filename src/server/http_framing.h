// How HttpServer frames HTTP/1.1 requests, in one place: how Beast's request parser and the read
// buffer behind it are bounded, and which Transfer-Encoding a request may use (RFC 9112 §6). The
// server and fuzz/http_framing_fuzz.cpp both use these, so the fuzzer runs the server's real limits.
// Private to src/server (and the fuzz target).
#pragma once

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gantry/server/http_server.h"

namespace gantry::server::framing {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// Beast keeps a field's name and value lengths in 16 bits and throws std::length_error for one longer
// than 65533 bytes. No header section (nor trailer) larger than this is ever buffered, so none can.
inline constexpr uint32_t kMaxHeaderSection = 64 * 1024;

// HttpLimits::max_header_bytes, at most kMaxHeaderSection.
uint32_t header_limit(const HttpLimits& limits);

// A connection's read buffer, at most header_limit() bytes. Beyond the header it bounds, while a body
// is read, each chunk header (with its extensions) and the trailer: Beast puts no limit of its own on
// those, so a large trailer grew until one field overflowed (std::length_error on an I/O thread). A
// read that would need more fails with http::error::buffer_overflow.
boost::beast::flat_buffer make_read_buffer(const HttpLimits& limits);

// Readies `p` (freshly constructed) for a request's header: header_limit(), no body limit yet (the
// request's limit is known once its header is seen).
void prepare_for_header(RequestParser& p, const HttpLimits& limits);

// Bounds the body to `max_body_bytes`: a Content-Length above it, or a chunk whose size takes the total
// above it, fails with http::error::body_limit before those bytes are read.
void prepare_for_body(RequestParser& p, uint64_t max_body_bytes);

struct Refusal {
  int status = 400;
  std::string message;
};

// Once the header is parsed: a request whose body length we could misjudge is refused. A
// Transfer-Encoding must be exactly `chunked` (one coding, once, in one or more fields): `xchunked`,
// `chunked, identity` or `gzip` leave the length to whoever reads it (an intermediary that frames it
// otherwise lets a second request hide in the body) -> 400; a known coding we do not decode (`gzip,
// chunked`) -> 501. Content-Length together with Transfer-Encoding is refused by Beast already.
std::optional<Refusal> check_framing(const RequestParser& p);

// HTTP/2's connection preface (RFC 9113 §3.4): how a client that knows the server speaks HTTP/2 without
// an upgrade ("prior knowledge", as every cleartext gRPC client does) opens the connection.
inline constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

enum class Opening { kHttp2, kHttp1, kUndecided };

// What a connection whose first bytes are `head` speaks: kHttp2 once the whole preface has arrived,
// kHttp1 as soon as a byte differs from it (an HTTP/1.x request line does by its second byte, "PRI"
// being no method we serve; garbage is HTTP/1's to refuse), kUndecided while `head` is a proper prefix
// of the preface, the empty one included (more bytes are needed).
Opening classify_opening(std::string_view head);

}  // namespace gantry::server::framing

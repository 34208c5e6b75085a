// HttpServer: HTTP/1.1 on Boost.Beast/Asio. A few I/O threads drive every connection asynchronously,
// so an idle keep-alive connection or a slow SSE reader costs a socket and a buffer, never a thread.
//
// Per connection: at most HttpServerOptions::max_connections are open; one more is answered 503 with
// Retry-After and closed without its request being read.
// Per request:
//   1. the header is read (header timeout: 408 when part of a request came, a silent close on an idle
//      connection; larger than HttpLimits::max_header_bytes -> 431);
//   2. its framing is checked (RFC 9112): a Transfer-Encoding other than exactly `chunked` is 400 (501
//      for a coding we do not decode);
//   3. `HttpHooks::on_header` sees it before the body is read and either answers at once (auth 401,
//      queue full 429) or names this request's body limit; a Content-Length above the limit is
//      answered 413 here too, without reading on;
//   4. `Expect: 100-continue` gets its 100 now, and the body is read (body timeout: 408; over the limit,
//      counted as chunks arrive: 413; a chunk header or trailer over the header limit: 431; bad framing:
//      400); `HttpHooks::on_request` gets it with an Exchange.
// The handler answers through the Exchange, from any thread, once: respond() a whole response, or
// start_stream() + write()... + finish() a chunked one (SSE). While it works, the connection watches
// for the client going away and tells the Exchange (on_client_gone), so generation can be cancelled.
// Every answer says whether the connection stays open, truthfully: one sent before the body was read
// (or instead of it) says `Connection: close` and closes (the unread body cannot be skipped). A HEAD
// request's answer carries the header only. No exception escapes an I/O thread: a hook that throws
// gets a 500, anything else closes that one connection (logged).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::server {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;  // names in lower case

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query, not decoded
  std::string query;   // after '?', "" when none
  HttpHeaders headers;
  std::string body;
  std::string remote;                              // peer address
  std::chrono::steady_clock::time_point received;  // when the header was complete

  // The first header called `name` (lower case), if any.
  std::optional<std::string_view> header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  HttpHeaders headers;
  std::string body;
};

// One request's way back to its client. Thread-safe. Exactly one of respond() or start_stream() is
// used; later calls are ignored. Dropping the last reference without answering sends a 500, so every
// accepted request gets exactly one complete response.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual void respond(HttpResponse response) = 0;
  // A chunked response: the header now, the body in write() pieces, finish() ends it.
  virtual void start_stream(int status, std::string content_type, HttpHeaders headers = {}) = 0;
  // Queues a piece of a streamed body; false once the client is gone (stop producing).
  virtual bool write(std::string data) = 0;
  virtual void finish() = 0;
  virtual bool client_gone() const = 0;
  // `fn` runs once, on an I/O thread, if the client disconnects before the response is complete (at
  // once if it already has). Keep it short: cancel work, do not block.
  virtual void on_client_gone(std::function<void()> fn) = 0;
};

struct HttpLimits {
  uint64_t max_body_bytes = 64ull << 20;  // the largest a hook may allow (HeaderDecision::max_body_bytes)
  uint32_t max_header_bytes = 64 * 1024;  // at most 64 KiB (Beast cannot hold a larger field)
  std::chrono::milliseconds header_timeout{30'000};  // the whole header; also the keep-alive idle timeout
  std::chrono::milliseconds body_timeout{60'000};    // the whole body
  std::chrono::milliseconds write_timeout{60'000};   // a client that stops reading is dropped
};

// What HttpHooks::on_header decides from a request's header alone.
struct HeaderDecision {
  // Set: answer at once; the body is never read (when one was coming, the connection then closes).
  std::optional<HttpResponse> answer;
  // This request's body limit, at most HttpLimits::max_body_bytes (unset: that). A larger body is 413,
  // refused as its bytes arrive, never buffered.
  std::optional<uint64_t> max_body_bytes;
};

struct HttpHooks {
  // Before the body. Runs on an I/O thread: keep it cheap.
  std::function<HeaderDecision(const HttpRequest& header_only)> on_header;
  // The complete request. Runs on an I/O thread: answer cheap requests inline, hand heavy ones off.
  std::function<void(HttpRequest&&, std::shared_ptr<Exchange>)> on_request;
  // Optional: HTTP/2 on the same port. When set, each new connection's opening bytes are peeked (not
  // consumed) before anything is read: one that opens with HTTP/2's connection preface (a cleartext
  // gRPC client's "prior knowledge" h2c) is handed over here, its descriptor released from this server
  // (the hook owns it and must close it; it no longer counts against max_connections). Others are
  // served as HTTP/1.1. The header timeout bounds the wait for the opening bytes. Runs on an I/O
  // thread; it must not throw (if it does, the descriptor is closed).
  std::function<void(int fd)> on_http2;
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // an IP address, or several as a comma list ("127.0.0.1,::1")
  uint16_t port = 8080;            // 0: any free port (see HttpServer::port())
  int io_threads = 2;
  // Open connections at most; 0: default_max_connections().
  size_t max_connections = 0;
  HttpLimits limits;
};

// The connection limit when none is given, from the open-file limit (raised to its hard limit first),
// leaving room for the process's other descriptors; see http_server.cpp for the numbers.
size_t default_max_connections();

class HttpServer {
 public:
  // Binds and starts serving. Errors name the address ("127.0.0.1:8080: address already in use").
  static Result<std::unique_ptr<HttpServer>> start(HttpServerOptions options, HttpHooks hooks);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const;
  // Closes the listening socket; open connections finish their current request and then close. Called
  // outside the I/O threads, returns once the socket is closed: a connect after it is refused.
  void stop_accepting();
  // Closes every connection and joins the I/O threads (pending responses are dropped).
  void stop();
  size_t open_connections() const;
  size_t max_connections() const;  // the limit in force
  uint64_t requests_served() const;
  // Answers started and not yet fully written (a drain waits for 0 before stop()).
  size_t answers_in_progress() const;

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "Reason phrase" of a status code ("Not Found"); "" for unknown codes.
std::string_view http_reason(int status);

}  // namespace gantry::server

// HttpServer: HTTP/1.1 on Boost.Beast/Asio. A few I/O threads drive every connection asynchronously,
// so an idle keep-alive connection or a slow SSE reader costs a socket and a buffer, never a thread.
//
// Per request:
//   1. the header is read (header timeout; larger than HttpLimits::max_header_bytes -> 431);
//   2. `HttpHooks::on_header` sees it before the body is read and may answer at once (auth 401, queue
//      full 429); a Content-Length above max_body_bytes is answered 413 here too, without reading on;
//   3. the body is read (body timeout) and `HttpHooks::on_request` gets it with an Exchange.
// The handler answers through the Exchange, from any thread, once: respond() a whole response, or
// start_stream() + write()... + finish() a chunked one (SSE). While it works, the connection watches
// for the client going away and tells the Exchange (on_client_gone), so generation can be cancelled.
// A response sent before the body was read closes the connection (the unread body cannot be skipped).
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
  uint64_t max_body_bytes = 64ull << 20;
  uint32_t max_header_bytes = 64 * 1024;
  std::chrono::milliseconds header_timeout{30'000};  // also the keep-alive idle timeout
  std::chrono::milliseconds body_timeout{60'000};
  std::chrono::milliseconds write_timeout{60'000};  // a client that stops reading is dropped
};

struct HttpHooks {
  // Before the body: return a response to answer at once (the body is then never read).
  std::function<std::optional<HttpResponse>(const HttpRequest& header_only)> on_header;
  // The complete request. Runs on an I/O thread: answer cheap requests inline, hand heavy ones off.
  std::function<void(HttpRequest&&, std::shared_ptr<Exchange>)> on_request;
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: any free port (see HttpServer::port())
  int io_threads = 2;
  HttpLimits limits;
};

class HttpServer {
 public:
  // Binds and starts serving. Errors name the address ("127.0.0.1:8080: address already in use").
  static Result<std::unique_ptr<HttpServer>> start(HttpServerOptions options, HttpHooks hooks);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const;
  // Closes the listening socket; open connections finish their current request and then close.
  void stop_accepting();
  // Closes every connection and joins the I/O threads (pending responses are dropped).
  void stop();
  size_t open_connections() const;
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

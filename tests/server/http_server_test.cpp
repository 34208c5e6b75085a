// HttpServer over real loopback sockets: keep-alive, limits answered before the body, hooks, chunked
// streaming, client-gone detection and many idle connections; then, with raw bytes both ways, what a
// hostile or careless client may send (issue 21): RFC 9112 framing, timeouts, limits, exceptions.
#include "gantry/server/http_server.h"

#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <future>
#include <map>
#include <stdexcept>
#include <thread>

namespace gantry::server {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

struct Client {
  net::io_context ioc;
  tcp::socket socket{ioc};
  beast::flat_buffer buffer;

  explicit Client(uint16_t port) { socket.connect({net::ip::make_address("127.0.0.1"), port}); }

  http::response<http::string_body> request(http::verb verb, std::string target, std::string body = {},
                                            std::vector<std::pair<std::string, std::string>> headers = {}) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1");
    for (auto& [k, v] : headers) req.set(k, v);
    req.body() = std::move(body);
    req.prepare_payload();
    http::write(socket, req);
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    return res;
  }
};

std::unique_ptr<HttpServer> start(HttpHooks hooks, HttpLimits limits = {}) {
  HttpServerOptions o;
  o.port = 0;
  o.limits = limits;
  auto s = HttpServer::start(o, std::move(hooks));
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(*s);
}

HttpHooks echo_hooks() {
  HttpHooks h;
  h.on_request = [](HttpRequest&& req, std::shared_ptr<Exchange> ex) {
    HttpResponse r;
    r.content_type = "text/plain";
    r.body = req.method + " " + req.path + "?" + req.query + " " + std::to_string(req.body.size());
    ex->respond(std::move(r));
  };
  return h;
}

TEST(HttpServer, ServesManyRequestsOnOneKeepAliveConnection) {
  auto server = start(echo_hooks());
  Client c(server->port());
  for (int i = 0; i < 50; ++i) {
    auto res = c.request(http::verb::post, "/x/y?i=" + std::to_string(i), std::string(i, 'a'));
    ASSERT_EQ(res.result_int(), 200);
    EXPECT_EQ(res.body(), "POST /x/y?i=" + std::to_string(i) + " " + std::to_string(i));
    EXPECT_TRUE(res.keep_alive());
  }
  // A request is counted once its last byte is written, which may be just after the client has read it.
  // The connection reads its next request only after that, so one more answer proves the 50 counted.
  EXPECT_EQ(c.request(http::verb::get, "/after").result_int(), 200);
  EXPECT_GE(server->requests_served(), 50u);
  EXPECT_LE(server->requests_served(), 51u);
}

TEST(HttpServer, OversizedBodyIsRefusedBeforeItIsRead) {
  HttpLimits limits;
  limits.max_body_bytes = 1000;
  std::atomic<int> handled{0};
  HttpHooks h;
  h.on_request = [&](HttpRequest&&, std::shared_ptr<Exchange> ex) {
    ++handled;
    ex->respond({});
  };
  auto server = start(h, limits);
  Client c(server->port());
  // Announce 10 MB but send only the header: the 413 must come back without the body.
  std::string head =
      "POST /big HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n";
  net::write(c.socket, net::buffer(head));
  http::response<http::string_body> res;
  http::read(c.socket, c.buffer, res);
  EXPECT_EQ(res.result_int(), 413);
  EXPECT_NE(res.body().find("10000000"), std::string::npos) << res.body();
  EXPECT_FALSE(res.keep_alive());
  EXPECT_EQ(handled.load(), 0);
}

TEST(HttpServer, ChunkedBodyOverTheLimitIs413) {
  HttpLimits limits;
  limits.max_body_bytes = 100;
  auto server = start(echo_hooks(), limits);
  Client c(server->port());
  std::string req = "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  req += "c8\r\n" + std::string(200, 'z') + "\r\n0\r\n\r\n";
  net::write(c.socket, net::buffer(req));
  http::response<http::string_body> res;
  http::read(c.socket, c.buffer, res);
  EXPECT_EQ(res.result_int(), 413);
}

TEST(HttpServer, HeaderHookAnswersWithoutReadingTheBody) {
  HttpHooks h = echo_hooks();
  h.on_header = [](const HttpRequest& req) -> HeaderDecision {
    if (req.header("x-key") == std::optional<std::string_view>("secret")) return {};
    HttpResponse r;
    r.status = 401;
    r.body = R"({"error":"no key"})";
    return {r, std::nullopt};
  };
  auto server = start(h);
  {
    Client c(server->port());
    auto res = c.request(http::verb::post, "/p", "body");
    EXPECT_EQ(res.result_int(), 401);
    EXPECT_FALSE(res.keep_alive());  // the body was left unread, so the connection closes
  }
  Client c(server->port());
  auto res = c.request(http::verb::post, "/p", "body", {{"X-Key", "secret"}});
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_EQ(res.body(), "POST /p? 4");
}

TEST(HttpServer, MalformedRequestGets400) {
  auto server = start(echo_hooks());
  Client c(server->port());
  net::write(c.socket, net::buffer(std::string("GARBAGE\r\n\r\n")));
  http::response<http::string_body> res;
  http::read(c.socket, c.buffer, res);
  EXPECT_EQ(res.result_int(), 400);
}

TEST(HttpServer, StreamsChunksAsTheyAreWritten) {
  HttpHooks h;
  h.on_request = [](HttpRequest&&, std::shared_ptr<Exchange> ex) {
    std::thread([ex] {
      ex->start_stream(200, "text/event-stream");
      for (int i = 0; i < 5; ++i) ex->write("data: " + std::to_string(i) + "\n\n");
      ex->finish();
    }).detach();
  };
  auto server = start(h);
  Client c(server->port());
  for (int round = 0; round < 2; ++round) {  // the connection stays usable after a stream
    auto res = c.request(http::verb::get, "/s");
    EXPECT_EQ(res.result_int(), 200);
    EXPECT_EQ(res[http::field::content_type], "text/event-stream");
    EXPECT_EQ(res.body(), "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n");
  }
}

TEST(HttpServer, TellsTheHandlerWhenTheClientGoesAway) {
  std::promise<void> gone;
  std::promise<std::shared_ptr<Exchange>> held;
  HttpHooks h;
  h.on_request = [&](HttpRequest&&, std::shared_ptr<Exchange> ex) {
    ex->on_client_gone([&] { gone.set_value(); });
    held.set_value(ex);  // never answered while the client is there
  };
  auto server = start(h);
  auto fut = gone.get_future();
  std::shared_ptr<Exchange> ex;
  {
    Client c(server->port());
    http::request<http::string_body> req{http::verb::get, "/wait", 11};
    req.set(http::field::host, "x");
    http::write(c.socket, req);
    ex = held.get_future().get();
  }  // the client closes its socket
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(ex->client_gone());
  EXPECT_FALSE(ex->write("late"));
}

TEST(HttpServer, UnansweredExchangeBecomes500) {
  HttpHooks h;
  h.on_request = [](HttpRequest&&, std::shared_ptr<Exchange>) {};  // drops it
  auto server = start(h);
  Client c(server->port());
  auto res = c.request(http::verb::get, "/drop");
  EXPECT_EQ(res.result_int(), 500);
}

TEST(HttpServer, HoldsManyIdleConnectionsWithFewThreads) {
  auto server = start(echo_hooks());
  net::io_context ioc;
  std::vector<tcp::socket> sockets;
  constexpr int kConnections = 1000;
  for (int i = 0; i < kConnections; ++i) {
    sockets.emplace_back(ioc);
    sockets.back().connect({net::ip::make_address("127.0.0.1"), server->port()});
  }
  // Every connection is served, in an order unrelated to when it was opened.
  std::string req = "GET /k HTTP/1.1\r\nHost: x\r\n\r\n";
  for (int i = kConnections - 1; i >= 0; i -= 7) net::write(sockets[i], net::buffer(req));
  int answered = 0;
  for (int i = kConnections - 1; i >= 0; i -= 7) {
    beast::flat_buffer b;
    http::response<http::string_body> res;
    http::read(sockets[i], b, res);
    answered += res.result_int() == 200;
  }
  EXPECT_EQ(answered, (kConnections + 6) / 7);
  EXPECT_GE(server->open_connections(), static_cast<size_t>(kConnections) - 5);
}

TEST(HttpServer, StopAcceptingRefusesNewConnections) {
  auto server = start(echo_hooks());
  const uint16_t port = server->port();
  Client c(port);
  EXPECT_EQ(c.request(http::verb::get, "/first").result_int(), 200);  // accepted before the stop
  server->stop_accepting();
  auto res = c.request(http::verb::get, "/last");
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_FALSE(res.keep_alive());  // closing: the answer ends the connection
  // stop_accepting() has returned, so the listening socket is closed: no wait needed.
  net::io_context ioc;
  tcp::socket s(ioc);
  boost::system::error_code ec;
  s.connect({net::ip::make_address("127.0.0.1"), port}, ec);
  EXPECT_TRUE(ec) << "connected after stop_accepting";
}

TEST(HttpServer, BindFailureNamesTheAddress) {
  auto first = start(echo_hooks());
  HttpServerOptions o;
  o.port = first->port();
  o.host = "127.0.0.1";
  // SO_REUSEADDR does not allow two listeners on one port.
  auto second = HttpServer::start(o, echo_hooks());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("127.0.0.1:" + std::to_string(first->port())), std::string::npos);
}

// ------------------------------------------------------------------------------------------------
// Raw bytes both ways: what a hostile or careless client sends, and exactly what comes back.

struct RawResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;

  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

class Raw {
 public:
  explicit Raw(uint16_t port) { socket_.connect({net::ip::make_address("127.0.0.1"), port}); }

  void send(std::string_view bytes) { net::write(socket_, net::buffer(bytes.data(), bytes.size())); }

  // The bytes up to and including `delim`; "" when the connection ends first.
  std::string read_until(std::string_view delim) {
    for (;;) {
      if (auto at = pending_.find(delim); at != std::string::npos) {
        std::string out = pending_.substr(0, at + delim.size());
        pending_.erase(0, at + delim.size());
        return out;
      }
      if (!fill()) return "";
    }
  }

  // One response: its header, then Content-Length bytes of body (none for the answer to a HEAD).
  RawResponse read_response(bool head_request = false) {
    RawResponse r;
    std::string header = read_until("\r\n\r\n");
    if (header.size() < 12) return r;  // status 0: no response
    r.status = std::stoi(header.substr(9, 3));
    size_t line = header.find("\r\n") + 2;
    while (line + 2 < header.size()) {
      size_t end = header.find("\r\n", line);
      std::string field = header.substr(line, end - line);
      size_t colon = field.find(':');
      std::string name = field.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      size_t v = colon + 1;
      while (v < field.size() && field[v] == ' ') ++v;
      r.headers[name] = field.substr(v);
      line = end + 2;
    }
    if (!head_request && r.headers.count("content-length")) {
      const size_t n = std::stoul(r.headers["content-length"]);
      while (pending_.size() < n && fill()) {
      }
      r.body = pending_.substr(0, n);
      pending_.erase(0, std::min(n, pending_.size()));
    }
    return r;
  }

  // Everything until the server closes the connection. Fails the test (and returns what came) when it
  // has not closed within a generous bound.
  std::string read_to_eof() {
    while (fill()) {
    }
    EXPECT_TRUE(closed_) << "the server did not close the connection";
    return std::exchange(pending_, "");
  }

  tcp::socket& socket() { return socket_; }

 private:
  // One read into pending_; false once the connection has ended (or nothing came within the bound,
  // a safety net against a hanging test, never a timing assertion).
  bool fill() {
    if (closed_) return false;
    char buf[16384];
    boost::system::error_code ec;
    size_t n = 0;
    bool done = false;
    socket_.async_read_some(net::buffer(buf), [&](boost::system::error_code e, size_t k) {
      ec = e;
      n = k;
      done = true;
    });
    ioc_.restart();
    ioc_.run_for(std::chrono::seconds(20));
    if (!done) {
      socket_.cancel();
      ioc_.restart();
      ioc_.run();
      ADD_FAILURE() << "no bytes and no close from the server within 20 s";
      return false;
    }
    pending_.append(buf, n);
    if (ec) closed_ = true;  // EOF, or a reset
    return !ec;
  }

  net::io_context ioc_;
  tcp::socket socket_{ioc_};
  std::string pending_;
  bool closed_ = false;
};

// What a connection says about itself after this answer.
bool says_close(const RawResponse& r) { return r.header("connection") == "close"; }

TEST(HttpServerHostile, HugeChunkedTrailerIsRefusedAndTheServerGoesOn) {
  auto server = start(echo_hooks());  // the default limits: 64 KiB of header
  {
    Raw c(server->port());
    // A 70 KB trailer field: Beast used to throw std::length_error on the I/O thread (exit 134).
    c.send(
        "POST /v2/health/live HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        "1\r\na\r\n0\r\nX-Big: " +
        std::string(70'000, 'a') + "\r\n\r\n");
    auto r = c.read_response();
    EXPECT_EQ(r.status, 431);
    EXPECT_TRUE(says_close(r));
    EXPECT_NE(r.body.find("trailer"), std::string::npos) << r.body;
    c.read_to_eof();
  }
  // Alive: a new connection is served.
  Raw c(server->port());
  c.send("GET /after HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "GET /after? 0");
}

TEST(HttpServerHostile, EarlyAnswersSayConnectionCloseAndClose) {
  HttpHooks h = echo_hooks();
  h.on_header = [](const HttpRequest& req) -> HeaderDecision {
    if (req.header("x-key")) return {};
    HttpResponse r;
    r.status = 401;
    r.body = R"({"error":"no key"})";
    return {r, std::nullopt};
  };
  auto server = start(h);
  {
    // A body is announced and not read: the answer says close, and the server does close.
    Raw c(server->port());
    c.send("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n");
    auto r = c.read_response();
    EXPECT_EQ(r.status, 401);
    EXPECT_TRUE(says_close(r));
    EXPECT_EQ(c.read_to_eof(), "");
  }
  // No body to skip: the early answer keeps the connection, and says so.
  Raw c(server->port());
  c.send("GET /p HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.read_response();
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.header("connection"), "keep-alive");
  c.send("GET /q HTTP/1.1\r\nHost: x\r\nX-Key: k\r\n\r\n");
  r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "GET /q? 0");
}

TEST(HttpServerHostile, ExpectContinueGets100ThenTheAnswer) {
  HttpHooks h = echo_hooks();
  h.on_header = [](const HttpRequest& req) -> HeaderDecision {
    if (req.path != "/refused") return {};
    HttpResponse r;
    r.status = 401;
    return {r, std::nullopt};
  };
  auto server = start(h);
  {
    Raw c(server->port());
    c.send("POST /p HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
    EXPECT_EQ(c.read_until("\r\n\r\n"), "HTTP/1.1 100 Continue\r\n\r\n");  // before any body byte
    c.send("hello");
    auto r = c.read_response();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "POST /p? 5");
    EXPECT_FALSE(says_close(r));
  }
  // Refused from the header: the answer instead of the 100, then the connection closes.
  Raw c(server->port());
  c.send("POST /refused HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  auto r = c.read_response();
  EXPECT_EQ(r.status, 401);
  EXPECT_TRUE(says_close(r));
  EXPECT_EQ(c.read_to_eof(), "");
}

TEST(HttpServerHostile, HeadAnswersCarryNoBody) {
  HttpHooks h = echo_hooks();
  auto echo = h.on_request;
  h.on_request = [echo](HttpRequest&& req, std::shared_ptr<Exchange> ex) {
    if (req.path != "/stream") return echo(std::move(req), std::move(ex));
    ex->start_stream(200, "text/event-stream");
    ex->write("data: x\n\n");
    ex->finish();
  };
  auto server = start(h);
  Raw c(server->port());
  c.send("HEAD /x HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.read_response(/*head_request=*/true);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-length"), std::to_string(std::string("HEAD /x? 0").size()));
  c.send("HEAD /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  r = c.read_response(true);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("transfer-encoding"), "chunked");
  // Had either answer carried a body, it would be read here instead of the next answer.
  c.send("GET /next HTTP/1.1\r\nHost: x\r\n\r\n");
  r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "GET /next? 0");
}

TEST(HttpServerHostile, TransferEncodingOtherThanChunkedIsRefused) {
  std::atomic<int> handled{0};
  HttpHooks h;
  h.on_request = [&](HttpRequest&&, std::shared_ptr<Exchange> ex) {
    ++handled;
    ex->respond({});
  };
  auto server = start(h);
  const struct {
    const char* te_fields;
    int status;
  } cases[] = {
      {"Transfer-Encoding: xchunked\r\n", 400},
      {"Transfer-Encoding: chunked, identity\r\n", 400},
      {"Transfer-Encoding: gzip\r\n", 400},
      {"Transfer-Encoding: chunked, chunked\r\n", 400},
      {"Transfer-Encoding: gzip, chunked\r\n", 501},
      {"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", 501},
      {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400},
      {"Content-Length: 30\r\nTransfer-Encoding: chunked\r\n", 400},
  };
  for (const auto& t : cases) {
    SCOPED_TRACE(t.te_fields);
    Raw c(server->port());
    // Taken as "no body", the rest would be parsed as a second request (smuggling).
    c.send(std::string("POST /first HTTP/1.1\r\nHost: x\r\n") + t.te_fields +
           "\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n");
    auto r = c.read_response();
    EXPECT_EQ(r.status, t.status);
    EXPECT_TRUE(says_close(r));
    EXPECT_EQ(c.read_to_eof(), "");  // no second answer
  }
  EXPECT_EQ(handled.load(), 0);
}

TEST(HttpServerHostile, MalformedChunkSizeIs400) {
  auto server = start(echo_hooks());
  Raw c(server->port());
  c.send("POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n");
  auto r = c.read_response();
  EXPECT_EQ(r.status, 400);
  EXPECT_TRUE(says_close(r));
  EXPECT_NE(r.body.find("malformed request body"), std::string::npos) << r.body;
  c.read_to_eof();
}

TEST(HttpServerHostile, SlowClientsGet408AndIdleOnesAreClosed) {
  HttpLimits limits;
  limits.header_timeout = std::chrono::milliseconds(200);
  limits.body_timeout = std::chrono::milliseconds(200);
  auto server = start(echo_hooks(), limits);
  {
    Raw c(server->port());
    c.send("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc");  // 7 bytes short
    auto r = c.read_response();
    EXPECT_EQ(r.status, 408);
    EXPECT_TRUE(says_close(r));
    EXPECT_NE(r.body.find("body"), std::string::npos) << r.body;
    c.read_to_eof();
  }
  {
    Raw c(server->port());
    c.send("GET /p HTTP/1.1\r\nHost: x\r\n");  // the header never ends
    auto r = c.read_response();
    EXPECT_EQ(r.status, 408);
    EXPECT_TRUE(says_close(r));
    EXPECT_NE(r.body.find("header"), std::string::npos) << r.body;
    c.read_to_eof();
  }
  // Idle after a request: closed without a word.
  Raw c(server->port());
  c.send("GET /p HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(c.read_response().status, 200);
  EXPECT_EQ(c.read_to_eof(), "");
}

TEST(HttpServerHostile, PerRequestBodyLimitIsAppliedAsBytesArrive) {
  std::atomic<int> handled{0};
  HttpHooks h = echo_hooks();
  auto echo = h.on_request;
  h.on_request = [&, echo](HttpRequest&& req, std::shared_ptr<Exchange> ex) {
    ++handled;
    echo(std::move(req), std::move(ex));
  };
  h.on_header = [](const HttpRequest& req) -> HeaderDecision {
    if (req.path == "/small") return {std::nullopt, 16};
    return {};
  };
  auto server = start(h);
  {
    Raw c(server->port());  // announced: refused from the header
    c.send("POST /small HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n");
    auto r = c.read_response();
    EXPECT_EQ(r.status, 413);
    EXPECT_TRUE(says_close(r));
    EXPECT_NE(r.body.find("limit of 16 bytes for POST /small"), std::string::npos) << r.body;
    c.read_to_eof();
  }
  {
    // Chunked: refused at the first chunk header that goes over, before its data is sent at all.
    Raw c(server->port());
    c.send("POST /small HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n64\r\n");
    auto r = c.read_response();
    EXPECT_EQ(r.status, 413);
    EXPECT_TRUE(says_close(r));
    c.read_to_eof();
  }
  Raw c(server->port());
  c.send("POST /small HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\n\r\n" + std::string(16, 's'));
  EXPECT_EQ(c.read_response().body, "POST /small? 16");
  c.send("POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + std::string(1000, 'b'));
  EXPECT_EQ(c.read_response().body, "POST /big? 1000");
  EXPECT_EQ(handled.load(), 2);
}

TEST(HttpServerHostile, ConnectionsOverTheLimitGet503) {
  HttpServerOptions o;
  o.port = 0;
  o.max_connections = 4;
  auto started = HttpServer::start(o, echo_hooks());
  ASSERT_TRUE(started.ok()) << started.status().message();
  auto server = std::move(*started);
  EXPECT_EQ(server->max_connections(), 4u);
  std::vector<std::unique_ptr<Raw>> open;
  for (int i = 0; i < 4; ++i) {  // each answered: each holds a slot
    open.push_back(std::make_unique<Raw>(server->port()));
    open.back()->send("GET /held HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_EQ(open.back()->read_response().status, 200);
  }
  {
    Raw c(server->port());  // its request is never read: the 503 comes first
    auto r = c.read_response();
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(r.header("retry-after"), "1");
    EXPECT_TRUE(says_close(r));
    EXPECT_NE(r.body.find("--max-connections"), std::string::npos) << r.body;
    c.read_to_eof();
  }
  // The held ones still work; closing one frees its slot (once the server has seen the close: poll).
  open[0]->send("GET /still HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(open[0]->read_response().status, 200);
  open.erase(open.begin());
  int status = 0;
  for (int attempt = 0; attempt < 1000 && status != 200; ++attempt) {
    Raw c(server->port());
    c.send("GET /new HTTP/1.1\r\nHost: x\r\n\r\n");
    status = c.read_response().status;
    ASSERT_TRUE(status == 200 || status == 503) << status;
  }
  EXPECT_EQ(status, 200);
}

TEST(HttpServerHostile, ExceptionsFromHooksAreAnswered500AndTheServerGoesOn) {
  HttpHooks h = echo_hooks();
  auto echo = h.on_request;
  h.on_header = [](const HttpRequest& req) -> HeaderDecision {
    if (req.path == "/throw-header") throw std::runtime_error("boom in on_header");
    return {};
  };
  h.on_request = [echo](HttpRequest&& req, std::shared_ptr<Exchange> ex) {
    if (req.path == "/throw-request") throw std::runtime_error("boom in on_request");
    echo(std::move(req), std::move(ex));
  };
  auto server = start(h);
  Raw c(server->port());
  c.send("GET /throw-request HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(c.read_response().status, 500);
  c.send("GET /after HTTP/1.1\r\nHost: x\r\n\r\n");  // the same connection goes on
  EXPECT_EQ(c.read_response().body, "GET /after? 0");
  c.send("GET /throw-header HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.read_response();
  EXPECT_EQ(r.status, 500);
  EXPECT_TRUE(says_close(r));
  c.read_to_eof();
  Raw d(server->port());
  d.send("GET /alive HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(d.read_response().body, "GET /alive? 0");
}

}  // namespace
}  // namespace gantry::server

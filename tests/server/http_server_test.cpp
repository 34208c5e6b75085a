// HttpServer over real loopback sockets: keep-alive, limits answered before the body, hooks, chunked
// streaming, client-gone detection and many idle connections.
#include "gantry/server/http_server.h"

#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <future>
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
  // Counted once the last byte is written, which may be just after the client has read it.
  for (int i = 0; i < 100 && server->requests_served() < 50u; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server->requests_served(), 50u);
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
  h.on_header = [](const HttpRequest& req) -> std::optional<HttpResponse> {
    if (req.header("x-key") == std::optional<std::string_view>("secret")) return std::nullopt;
    HttpResponse r;
    r.status = 401;
    r.body = R"({"error":"no key"})";
    return r;
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
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
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

}  // namespace
}  // namespace gantry::server

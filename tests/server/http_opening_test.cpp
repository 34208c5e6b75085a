// HttpServer with HttpHooks::on_http2: which connections are handed over (HTTP/2's preface, whole and
// unread) and which are served as HTTP/1.1; framing::classify_opening on every prefix.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <future>
#include <string>

#include "gantry/server/http_server.h"
#include "server/http_framing.h"

namespace gantry::server {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using framing::classify_opening;
using framing::kHttp2Preface;
using framing::Opening;

TEST(HttpOpening, ThePrefaceAndOnlyItIsHttp2) {
  EXPECT_EQ(classify_opening(kHttp2Preface), Opening::kHttp2);
  EXPECT_EQ(classify_opening(std::string(kHttp2Preface) + "\x00\x00\x12\x04"), Opening::kHttp2);
  for (size_t n = 0; n < kHttp2Preface.size(); ++n)
    EXPECT_EQ(classify_opening(kHttp2Preface.substr(0, n)), Opening::kUndecided) << n;
  EXPECT_EQ(classify_opening("GET / HTTP/1.1\r\n"), Opening::kHttp1);
  EXPECT_EQ(classify_opening("P"), Opening::kUndecided);
  EXPECT_EQ(classify_opening("PO"), Opening::kHttp1);  // POST
  EXPECT_EQ(classify_opening("PUT /x"), Opening::kHttp1);
  EXPECT_EQ(classify_opening("PRI * HTTP/1.1\r\n"), Opening::kHttp1);
  EXPECT_EQ(classify_opening("\x16\x03\x01"), Opening::kHttp1);  // TLS: HTTP/1's parser refuses it
}

struct Handed {
  std::promise<std::string> got;  // what the hook could read from the descriptor it was given
};

std::unique_ptr<HttpServer> start_with_http2(Handed& handed) {
  HttpHooks h;
  h.on_request = [](HttpRequest&& req, std::shared_ptr<Exchange> ex) {
    HttpResponse r;
    r.content_type = "text/plain";
    r.body = "http1 " + req.method + " " + req.path;
    ex->respond(std::move(r));
  };
  h.on_http2 = [&handed](int fd) {
    std::string data(kHttp2Preface.size() + 4, '\0');
    size_t n = 0;
    while (n < data.size()) {
      const ssize_t r = ::recv(fd, data.data() + n, data.size() - n, 0);
      if (r <= 0) break;
      n += static_cast<size_t>(r);
    }
    data.resize(n);
    const char reply[] = "h2!";
    (void)!::send(fd, reply, 3, MSG_NOSIGNAL);
    ::close(fd);
    handed.got.set_value(data);
  };
  HttpServerOptions o;
  o.port = 0;
  auto s = HttpServer::start(o, std::move(h));
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(*s);
}

std::string exchange(uint16_t port, std::string_view send) {
  net::io_context ioc;
  tcp::socket s(ioc);
  s.connect({net::ip::make_address("127.0.0.1"), port});
  net::write(s, net::buffer(send.data(), send.size()));
  std::string out;
  boost::system::error_code ec;
  net::read(s, net::dynamic_buffer(out), ec);  // until the server closes
  return out;
}

TEST(HttpOpening, AnHttp2ConnectionIsHandedOverWithItsBytesUnread) {
  Handed handed;
  auto server = start_with_http2(handed);
  const std::string sent = std::string(kHttp2Preface) + "ABCD";
  EXPECT_EQ(exchange(server->port(), sent), "h2!");
  auto got = handed.got.get_future();
  ASSERT_EQ(got.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(got.get(), sent) << "the hook reads the preface itself: nothing was consumed";
}

TEST(HttpOpening, Http1IsServedAsBeforeWhenHttp2IsOn) {
  Handed handed;
  auto server = start_with_http2(handed);
  const std::string out = exchange(
      server->port(), "POST /v2/x HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(out.substr(0, 15), "HTTP/1.1 200 OK");
  EXPECT_NE(out.find("http1 POST /v2/x"), std::string::npos) << out;
}

}  // namespace
}  // namespace gantry::server

#include "gantry/server/http_server.h"

#include <sys/resource.h>

#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <deque>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "gantry/core/log.h"

namespace gantry::server {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

constexpr size_t kWatchChunk = 4096;
constexpr size_t kMaxPipelined = 1 << 20;           // stop watching once a client has queued this much
constexpr auto kLinger = std::chrono::seconds(2);   // lingering close: how long, and how many bytes, to
constexpr uint64_t kMaxLingerBytes = 256ull << 20;  // drop from a client still sending an unread body

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Header values we write come from our own code, but a CR or LF in one would split the response.
std::string header_safe(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) out += (c == '\r' || c == '\n') ? ' ' : c;
  return out;
}

std::string status_line(int status) {
  std::string s = "HTTP/1.1 " + std::to_string(status) + " ";
  s += http_reason(status);
  s += "\r\n";
  return s;
}

void append_headers(std::string& out, const HttpHeaders& headers) {
  for (const auto& [k, v] : headers) {
    out += header_safe(k);
    out += ": ";
    out += header_safe(v);
    out += "\r\n";
  }
}

// Lets a process hold ~1,000 client sockets: raise the soft open-file limit to the hard one.
void raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace

std::optional<std::string_view> HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return std::string_view(v);
  }
  return std::nullopt;
}

std::string_view http_reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Content";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 499:
      return "Client Closed Request";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "";
  }
}

class Session;

struct HttpServer::Impl {
  // Declared first so they outlive the io_context: sessions it still holds unregister when it dies.
  std::mutex sessions_mu;
  std::unordered_set<Session*> sessions;
  HttpServerOptions options;
  HttpHooks hooks;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  std::atomic<bool> closing{false};  // stop_accepting() was called: responses close their connection
  std::atomic<uint64_t> served{0};
  std::atomic<size_t> answering{0};  // sessions whose answer has started and is not fully written
  uint16_t port = 0;

  void accept();
  void close_all();
};

// One request's Exchange: forwards to its session's strand; a session that is gone drops everything.
class SessionExchange final : public Exchange {
 public:
  explicit SessionExchange(std::weak_ptr<Session> session) : session_(std::move(session)) {}
  ~SessionExchange() override;
  void respond(HttpResponse response) override;
  void start_stream(int status, std::string content_type, HttpHeaders headers) override;
  bool write(std::string data) override;
  void finish() override;
  bool client_gone() const override { return gone_.load(); }
  void on_client_gone(std::function<void()> fn) override;

  void mark_gone();  // from the session's strand

 private:
  std::weak_ptr<Session> session_;
  std::atomic<bool> answered_{false};
  std::atomic<bool> streaming_{false};
  std::atomic<bool> finished_{false};
  std::atomic<bool> gone_{false};
  std::mutex mu_;
  std::function<void()> on_gone_;
  bool gone_fired_ = false;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(HttpServer::Impl& server, tcp::socket&& socket) : server_(server), stream_(std::move(socket)) {
    std::lock_guard lock(server_.sessions_mu);
    server_.sessions.insert(this);
  }
  ~Session() {
    std::lock_guard lock(server_.sessions_mu);
    server_.sessions.erase(this);
  }

  void start() {
    error_code ec;
    auto ep = stream_.socket().remote_endpoint(ec);
    if (!ec) remote_ = ep.address().to_string() + ":" + std::to_string(ep.port());
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_header(); });
  }

  // Everything below runs on the session's strand.
  void post(std::function<void(Session&)> fn) {
    net::post(stream_.get_executor(), [self = shared_from_this(), fn = std::move(fn)] { fn(*self); });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    answer_done();
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
    if (auto ex = exchange_.lock()) ex->mark_gone();
    exchange_.reset();
    self_hold_.reset();  // may drop the last reference; callers hold their own
  }

  // A complete response (or the early answer before the body was read).
  void send_response(HttpResponse r) {
    if (closed_ || answer_started_) return;
    answer_begins();
    std::string head = status_line(r.status);
    if (!r.content_type.empty()) head += "Content-Type: " + header_safe(r.content_type) + "\r\n";
    head += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
    append_headers(head, r.headers);
    close_after_ = !keep_alive();  // decided once: what the header says is what happens
    head += close_after_ ? "Connection: close\r\n\r\n" : "Connection: keep-alive\r\n\r\n";
    queue(std::move(head), false);
    queue(std::move(r.body), true);
  }

  void send_stream_header(int status, std::string content_type, HttpHeaders headers) {
    if (closed_ || answer_started_) return;
    answer_begins();
    std::string head = status_line(status);
    head += "Content-Type: " + header_safe(content_type) + "\r\n";
    head += "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n";
    append_headers(head, headers);
    close_after_ = !keep_alive();
    head += close_after_ ? "Connection: close\r\n\r\n" : "Connection: keep-alive\r\n\r\n";
    queue(std::move(head), false);
  }

  void send_chunk(std::string data) {
    if (closed_ || !answer_started_ || final_queued_ || data.empty()) return;
    char size[20];
    auto [end, ec] = std::to_chars(size, size + sizeof size, data.size(), 16);
    (void)ec;
    std::string framed(size, end);
    framed += "\r\n";
    framed += data;
    framed += "\r\n";
    queue(std::move(framed), false);
  }

  void send_last_chunk() {
    if (closed_ || !answer_started_ || final_queued_) return;
    queue("0\r\n\r\n", true);
  }

 private:
  bool keep_alive() const { return keep_alive_ && !server_.closing.load(); }

  // An answer is "in progress" from its first queued byte to its last written one: a drain waits for
  // these, so closing the server never cuts a response short.
  void answer_begins() {
    answer_started_ = true;
    if (!answering_) {
      answering_ = true;
      server_.answering.fetch_add(1);
    }
  }
  void answer_done() {
    if (answering_) {
      answering_ = false;
      server_.answering.fetch_sub(1);
    }
  }

  void read_header() {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(server_.options.limits.max_header_bytes);
    // No body limit while the header is read: on_header checks Content-Length itself (to answer 413
    // with the numbers); the limit is set before the body is read.
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    answer_started_ = false;
    final_queued_ = false;
    body_read_ = false;
    stream_.expires_after(server_.options.limits.header_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(error_code ec) {
    if (ec == http::error::header_limit) {
      keep_alive_ = false;
      send_error(431, "request header larger than " +
                          std::to_string(server_.options.limits.max_header_bytes) + " bytes");
      return;
    }
    if (ec) {
      if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::eof ||
          ec == net::error::connection_reset || ec == net::error::operation_aborted) {
        close();
      } else {
        keep_alive_ = false;
        send_error(400, "malformed HTTP request: " + ec.message());
      }
      return;
    }
    const auto& h = parser_->get();
    req_ = HttpRequest{};
    req_.method = std::string(h.method_string());
    std::string_view target(h.target().data(), h.target().size());
    auto q = target.find('?');
    req_.path = std::string(target.substr(0, q));
    if (q != std::string_view::npos) req_.query = std::string(target.substr(q + 1));
    for (const auto& field : h) {
      req_.headers.emplace_back(
          lower(std::string_view(field.name_string().data(), field.name_string().size())),
          std::string(field.value()));
    }
    req_.remote = remote_;
    req_.received = std::chrono::steady_clock::now();
    keep_alive_ = h.keep_alive();

    const uint64_t limit = server_.options.limits.max_body_bytes;
    if (auto cl = parser_->content_length(); cl && *cl > limit) {
      keep_alive_ = false;
      send_error(413, "request body of " + std::to_string(*cl) + " bytes is larger than the limit of " +
                          std::to_string(limit) + " bytes (--max-body-size)");
      return;
    }
    if (server_.hooks.on_header) {
      if (auto early = server_.hooks.on_header(req_)) {
        if (!parser_->is_done()) keep_alive_ = false;  // the body stays unread
        send_response(std::move(*early));
        return;
      }
    }
    if (parser_->is_done()) {
      on_body({});
      return;
    }
    parser_->body_limit(limit);
    stream_.expires_after(server_.options.limits.body_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](error_code ec, size_t) { self->on_body(ec); });
  }

  void on_body(error_code ec) {
    if (ec == http::error::body_limit) {
      keep_alive_ = false;
      send_error(413, "request body is larger than the limit of " +
                          std::to_string(server_.options.limits.max_body_bytes) + " bytes (--max-body-size)");
      return;
    }
    if (ec == beast::error::timeout) {
      keep_alive_ = false;
      send_error(408, "request body not received within " +
                          std::to_string(server_.options.limits.body_timeout.count()) + " ms");
      return;
    }
    if (ec) {
      close();
      return;
    }
    body_read_ = true;
    req_.body = std::move(parser_->get().body());
    stream_.expires_never();
    auto ex = std::make_shared<SessionExchange>(weak_from_this());
    exchange_ = ex;                   // weak: the handler owns it; dropping it unanswered sends a 500
    self_hold_ = shared_from_this();  // alive while the handler works, even without a pending operation
    responding_ = true;
    watch();
    server_.hooks.on_request(std::move(req_), std::move(ex));
  }

  // While the handler works, keep a read pending: EOF or a reset means the client went away. Bytes
  // that arrive (a pipelined request) stay in buffer_ for the next parse.
  void watch() {
    if (closed_ || watching_ || buffer_.size() >= kMaxPipelined) return;
    watching_ = true;
    stream_.async_read_some(buffer_.prepare(kWatchChunk),
                            [self = shared_from_this()](error_code ec, size_t n) { self->on_watch(ec, n); });
  }

  void on_watch(error_code ec, size_t n) {
    watching_ = false;
    if (!ec) {
      buffer_.commit(n);
      if (responding_) {
        watch();
      } else if (next_pending_) {
        next_pending_ = false;
        read_header();
      }
      return;
    }
    if (ec == net::error::operation_aborted && !closed_) {
      if (next_pending_) {
        next_pending_ = false;
        read_header();
      }
      return;
    }
    close();
  }

  // {"error": "..."}: the KServe shape; the front ends answer their own protocol's errors themselves,
  // this one only covers what fails before a request reaches them.
  void send_error(int status, std::string message) {
    std::string body = "{\"error\":\"";
    for (char c : message) {
      if (c == '"' || c == '\\') body += '\\';
      body += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
    }
    body += "\"}";
    HttpResponse r;
    r.status = status;
    r.body = std::move(body);
    send_response(std::move(r));
  }

  void queue(std::string data, bool final) {
    if (final) final_queued_ = true;
    out_.push_back({std::move(data), final});
    if (!writing_) write_next();
  }

  void write_next() {
    if (out_.empty() || closed_) return;
    writing_ = true;
    stream_.expires_after(server_.options.limits.write_timeout);
    net::async_write(stream_, net::buffer(out_.front().data),
                     [self = shared_from_this()](error_code ec, size_t) { self->on_write(ec); });
  }

  void on_write(error_code ec) {
    writing_ = false;
    stream_.expires_never();
    if (ec) {
      close();
      return;
    }
    const bool final = out_.front().final;
    out_.pop_front();
    if (final) {
      response_complete();
      return;
    }
    write_next();
  }

  void response_complete() {
    server_.served.fetch_add(1, std::memory_order_relaxed);
    answer_done();
    responding_ = false;
    exchange_.reset();
    auto self = shared_from_this();
    self_hold_.reset();
    if (!body_read_) {
      linger_close();
      return;
    }
    if (close_after_) {
      close();
      return;
    }
    if (watching_) {
      next_pending_ = true;
      error_code ec;
      stream_.socket().cancel(ec);  // the watch completes with operation_aborted and reads the next request
    } else {
      read_header();
    }
  }

  // After answering before the body was read (401, 413, 429...), the client may still be sending it:
  // closing now would reset the connection and could destroy our answer in its receive buffer. So stop
  // sending, read and drop what still arrives (bounded in time and bytes), then close.
  void linger_close() {
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) {
      close();
      return;
    }
    stream_.expires_after(kLinger);
    if (!discard_) discard_ = std::make_unique<std::array<char, 16384>>();
    discard_more();
  }
  void discard_more() {
    stream_.async_read_some(net::buffer(*discard_), [self = shared_from_this()](error_code ec, size_t n) {
      self->discarded_ += n;
      if (ec || self->discarded_ > kMaxLingerBytes) {
        self->close();
        return;
      }
      self->discard_more();
    });
  }

  struct Out {
    std::string data;
    bool final = false;
  };

  HttpServer::Impl& server_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpRequest req_;
  std::string remote_;
  std::weak_ptr<SessionExchange> exchange_;
  std::shared_ptr<Session> self_hold_;
  std::deque<Out> out_;
  bool keep_alive_ = true;
  bool writing_ = false;
  bool watching_ = false;
  bool responding_ = false;
  bool next_pending_ = false;
  bool answer_started_ = false;
  bool final_queued_ = false;
  bool body_read_ = false;
  bool closed_ = false;
  bool close_after_ = false;  // the answer said "Connection: close"
  bool answering_ = false;    // counted in server_.answering
  std::unique_ptr<std::array<char, 16384>> discard_;
  uint64_t discarded_ = 0;
};

SessionExchange::~SessionExchange() {
  if (!answered_.load()) {
    HttpResponse r;
    r.status = 500;
    r.body = "{\"error\":\"internal error: the request was dropped without an answer\"}";
    respond(std::move(r));
  } else if (streaming_.load() && !finished_.load()) {
    finish();
  }
}

void SessionExchange::respond(HttpResponse response) {
  if (answered_.exchange(true)) return;
  if (auto s = session_.lock())
    s->post([r = std::move(response)](Session& s) mutable { s.send_response(std::move(r)); });
}

void SessionExchange::start_stream(int status, std::string content_type, HttpHeaders headers) {
  if (answered_.exchange(true)) return;
  streaming_ = true;
  if (auto s = session_.lock()) {
    s->post([status, ct = std::move(content_type), h = std::move(headers)](Session& s) mutable {
      s.send_stream_header(status, std::move(ct), std::move(h));
    });
  }
}

bool SessionExchange::write(std::string data) {
  if (gone_.load() || !streaming_.load() || finished_.load()) return false;
  auto s = session_.lock();
  if (!s) return false;
  s->post([d = std::move(data)](Session& s) mutable { s.send_chunk(std::move(d)); });
  return true;
}

void SessionExchange::finish() {
  if (!streaming_.load() || finished_.exchange(true)) return;
  if (auto s = session_.lock()) s->post([](Session& s) { s.send_last_chunk(); });
}

void SessionExchange::on_client_gone(std::function<void()> fn) {
  bool run_now = false;
  {
    std::lock_guard lock(mu_);
    if (gone_.load() && !gone_fired_) {
      gone_fired_ = true;
      run_now = true;
    } else if (!gone_.load()) {
      on_gone_ = std::move(fn);
    }
  }
  if (run_now && fn) fn();
}

void SessionExchange::mark_gone() {
  std::function<void()> fn;
  {
    std::lock_guard lock(mu_);
    if (gone_.exchange(true) || gone_fired_) return;
    gone_fired_ = true;
    fn = std::move(on_gone_);
  }
  if (fn) fn();
}

void HttpServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      // Out of file descriptors or similar: back off a little rather than spin.
      GANTRY_LOG_WARN("http: accept failed: {}", ec.message());
      auto timer = std::make_shared<net::steady_timer>(ioc, std::chrono::milliseconds(50));
      timer->async_wait([this, timer](error_code) { accept(); });
      return;
    }
    error_code nd;
    socket.set_option(tcp::no_delay(true), nd);
    std::make_shared<Session>(*this, std::move(socket))->start();
    accept();
  });
}

void HttpServer::Impl::close_all() {
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard lock(sessions_mu);
    for (Session* s : sessions) {
      if (auto sp = s->weak_from_this().lock()) live.push_back(std::move(sp));
    }
  }
  for (auto& s : live) s->post([](Session& s) { s.close(); });
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<HttpServer>> HttpServer::start(HttpServerOptions options, HttpHooks hooks) {
  if (!hooks.on_request) return InvalidArgument("HttpServer needs an on_request hook");
  raise_fd_limit();
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->hooks = std::move(hooks);
  const std::string where = impl->options.host + ":" + std::to_string(impl->options.port);
  error_code ec;
  auto address = net::ip::make_address(impl->options.host, ec);
  if (ec)
    return InvalidArgument("--host '" + impl->options.host + "' is not an IP address (" + ec.message() + ")");
  tcp::endpoint endpoint(address, impl->options.port);
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return IoError(where + ": cannot listen: " + ec.message());
  impl->port = impl->acceptor.local_endpoint().port();
  impl->work.emplace(net::make_work_guard(impl->ioc));
  impl->accept();
  const int n = std::max(1, impl->options.io_threads);
  for (int i = 0; i < n; ++i) {
    impl->threads.emplace_back([io = &impl->ioc] { io->run(); });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::~HttpServer() { stop(); }

uint16_t HttpServer::port() const { return impl_->port; }

void HttpServer::stop_accepting() {
  if (impl_->closing.exchange(true)) return;
  net::post(impl_->ioc, [impl = impl_.get()] {
    error_code ec;
    impl->acceptor.close(ec);
  });
}

void HttpServer::stop() {
  if (impl_->threads.empty()) return;
  stop_accepting();
  impl_->close_all();
  impl_->work.reset();
  // Closing a socket completes its pending operations (aborted); once none is left, run() returns.
  // Bounded: a session a handler still holds has nothing pending, so it does not keep run() going.
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
}

size_t HttpServer::open_connections() const {
  std::lock_guard lock(impl_->sessions_mu);
  return impl_->sessions.size();
}

uint64_t HttpServer::requests_served() const { return impl_->served.load(); }

size_t HttpServer::answers_in_progress() const { return impl_->answering.load(); }

}  // namespace gantry::server

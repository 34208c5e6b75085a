#include "gantry/server/http_server.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <charconv>
#include <deque>
#include <future>
#include <limits>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "gantry/core/log.h"
#include "http_framing.h"

namespace gantry::server {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

constexpr size_t kWatchChunk = 4096;
constexpr auto kLinger = std::chrono::seconds(2);   // lingering close: how long, and how many bytes, to
constexpr uint64_t kMaxLingerBytes = 256ull << 20;  // drop from a client still sending an unread body
// A connection over the limit: its 503 is written, then what it sent is dropped for a short while so
// that closing does not reset the connection before the client has read the 503. At most this many
// at once (they hold descriptors too; beyond it one is closed without an answer).
constexpr auto kRejectLinger = std::chrono::seconds(1);
constexpr uint64_t kRejectLingerBytes = 64 * 1024;
constexpr size_t kMaxRejecting = 64;
// Default connection limit: the open-file limit less this headroom for the process's other descriptors
// (model files, gRPC's sockets, the listener, logs, the kMaxRejecting connections being turned away),
// and at most kMaxDefaultConnections: a connection may buffer up to 64 KiB of header
// (framing::kMaxHeaderSection), so 16,384 of them hold at most 1 GiB.
constexpr uint64_t kFdHeadroom = 256;
constexpr size_t kMaxDefaultConnections = 16384;

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

// Lets a process hold many client sockets: raise the soft open-file limit to the hard one.
void raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// Inside a catch block: what was thrown, for the log.
std::string current_exception_text() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception of unknown type";
  }
}

// Runs `fn`, turning an exception into a log line: one escaping a completion handler would end the
// process (or at least its I/O thread), so none may. False when it threw.
template <class Fn>
bool run_logged(const char* what, Fn&& fn) noexcept {
  try {
    fn();
    return true;
  } catch (...) {
    GANTRY_LOG_ERROR("http: {}: {}", what, current_exception_text());
  }
  return false;
}

}  // namespace

size_t default_max_connections() {
  raise_fd_limit();
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return kMaxDefaultConnections;
  const uint64_t soft = rl.rlim_cur;
  const uint64_t room = soft > 2 * kFdHeadroom ? soft - kFdHeadroom : soft / 2;
  return static_cast<size_t>(std::max<uint64_t>(1, std::min<uint64_t>(room, kMaxDefaultConnections)));
}

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
  std::atomic<size_t> connections{0};  // sessions holding a connection slot (open, not turned away)
  std::atomic<size_t> rejecting{0};    // connections over the limit, being answered 503
  HttpServerOptions options;
  HttpHooks hooks;
  net::io_context ioc;
  std::list<tcp::acceptor> acceptors;  // one per address of options.host (a comma list)
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  std::atomic<bool> closing{false};  // stop_accepting() was called: responses close their connection
  std::atomic<uint64_t> served{0};
  std::atomic<size_t> answering{0};  // sessions whose answer has started and is not fully written
  std::chrono::steady_clock::time_point full_logged{};  // accept's strand only
  uint16_t port = 0;

  void accept(tcp::acceptor& acceptor);
  void admit(tcp::socket socket);
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

// The socket as Beast's reads see it. Beast parses what arrives inside the completion of each read,
// so what it throws (std::length_error, std::bad_alloc) would unwind out of io_context::run(): here it
// is caught where the connection is still known, and `on_throw` (inside the catch) closes that one.
class GuardedReads {
 public:
  using executor_type = tcp::socket::executor_type;

  GuardedReads(tcp::socket& socket, std::function<void()> on_throw)
      : socket_(socket), on_throw_(std::move(on_throw)) {}
  executor_type get_executor() { return socket_.get_executor(); }

  // The caller (Beast's composed read, holding the session) keeps this object alive until `handler` runs.
  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    socket_.async_read_some(buffers,
                            [this, h = std::forward<Handler>(handler)](error_code ec, size_t n) mutable {
                              try {
                                std::move(h)(ec, n);
                              } catch (...) {
                                on_throw_();
                              }
                            });
  }

 private:
  tcp::socket& socket_;
  std::function<void()> on_throw_;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  // What the session holds in the server's counts: a connection slot, or one of the kMaxRejecting
  // places of a connection turned away. The caller has counted it; the session gives it back on close.
  enum class Slot { kConnection, kRejection };

  Session(HttpServer::Impl& server, tcp::socket&& socket, Slot slot)
      : server_(server),
        socket_(std::move(socket)),
        read_timer_(socket_.get_executor()),
        write_timer_(socket_.get_executor()),
        peek_timer_(socket_.get_executor()),
        reads_(socket_, [this] { closed_by_exception(); }),
        buffer_(framing::make_read_buffer(server.options.limits)),
        slot_(slot) {
    std::lock_guard lock(server_.sessions_mu);
    server_.sessions.insert(this);
  }
  ~Session() {
    release_slot();
    std::lock_guard lock(server_.sessions_mu);
    server_.sessions.erase(this);
  }

  void start() {
    note_remote();
    dispatch([](Session& s) {
      if (s.server_.hooks.on_http2) {
        s.arm_read_timer(s.limits().header_timeout);
        s.peek_opening();
      } else {
        s.read_header();
      }
    });
  }

  // A connection over the limit: the answer now, nothing of its request read.
  void turn_away(size_t limit) {
    note_remote();
    dispatch([limit](Session& s) {
      s.linger_for_ = kRejectLinger;
      s.linger_max_ = kRejectLingerBytes;
      s.keep_alive_ = false;
      s.send_error(503,
                   "the server has " + std::to_string(limit) +
                       " connections open, its limit (--max-connections); retry shortly",
                   {{"Retry-After", "1"}});
    });
  }

  // Everything below runs on the session's strand.
  void post(std::function<void(Session&)> fn) {
    net::post(socket_.get_executor(), [self = shared_from_this(), fn = std::move(fn)] { self->guarded(fn); });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    answer_done();
    release_slot();
    ++read_timer_gen_;
    ++write_timer_gen_;
    read_timer_.cancel();  // a pending wait would hold the session (and run()) until it expired
    write_timer_.cancel();
    peek_timer_.cancel();
    error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    if (auto ex = exchange_.lock()) ex->mark_gone();
    exchange_.reset();
    self_hold_.reset();  // may drop the last reference; callers hold their own
  }

  // A complete response (or the early answer before the body was read).
  void send_response(HttpResponse r) {
    if (closed_ || answer_started_) return;
    answer_begins();
    const bool no_content = r.status == 204;  // RFC 9110 §8.6: no Content-Length, no body
    std::string head = status_line(r.status);
    if (!r.content_type.empty()) head += "Content-Type: " + header_safe(r.content_type) + "\r\n";
    if (!no_content) head += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
    append_headers(head, r.headers);
    head += connection_header();
    queue(std::move(head), false);
    queue(head_request_ || no_content ? std::string() : std::move(r.body), true);
  }

  void send_stream_header(int status, std::string content_type, HttpHeaders headers) {
    if (closed_ || answer_started_) return;
    answer_begins();
    std::string head = status_line(status);
    head += "Content-Type: " + header_safe(content_type) + "\r\n";
    head += "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n";
    append_headers(head, headers);
    head += connection_header();
    queue(std::move(head), false);
  }

  void send_chunk(std::string data) {
    if (closed_ || !answer_started_ || final_queued_ || data.empty() || head_request_) return;
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
    queue(head_request_ ? std::string() : std::string("0\r\n\r\n"), true);
  }

 private:
  const HttpLimits& limits() const { return server_.options.limits; }

  void note_remote() {
    error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    if (!ec) remote_ = ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  void dispatch(std::function<void(Session&)> fn) {
    net::dispatch(socket_.get_executor(),
                  [self = shared_from_this(), fn = std::move(fn)] { self->guarded(fn); });
  }

  // Every completion handler runs through this: an exception closes this connection, never the process.
  template <class Fn>
  void guarded(Fn&& fn) noexcept {
    try {
      fn(*this);
    } catch (...) {
      closed_by_exception();
    }
  }
  // Inside a catch block.
  void closed_by_exception() noexcept {
    GANTRY_LOG_ERROR("http: {}: closing the connection after an exception: {}", remote_,
                     current_exception_text());
    run_logged("closing a connection", [this] { close(); });
  }

  void release_slot() {
    if (slot_released_) return;
    slot_released_ = true;
    (slot_ == Slot::kConnection ? server_.connections : server_.rejecting).fetch_sub(1);
  }

  bool keep_alive() const { return keep_alive_ && !server_.closing.load(); }

  // Decided once per answer: what the header says is what happens. An answer sent before the body was
  // read (or instead of it) closes the connection, whatever the client asked for.
  std::string connection_header() {
    close_after_ = !keep_alive() || !body_read_;
    return close_after_ ? "Connection: close\r\n\r\n" : "Connection: keep-alive\r\n\r\n";
  }

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

  // Read deadlines (header, body, lingering close). A timer rather than a deadline on the stream, which
  // would close the socket and leave no way to answer 408: when it fires, the pending read is cancelled
  // and its handler answers. The generation tells a stale expiry (already queued when disarmed) apart.
  void arm_read_timer(std::chrono::milliseconds timeout) {
    read_timed_out_ = false;
    const uint64_t gen = ++read_timer_gen_;
    read_timer_.expires_after(timeout);
    read_timer_.async_wait([self = shared_from_this(), gen](error_code ec) {
      if (!ec) self->guarded([gen](Session& s) { s.on_read_deadline(gen); });
    });
  }
  // True when the deadline had passed (the read just completed was cut short by it).
  bool disarm_read_timer() {
    ++read_timer_gen_;
    read_timer_.cancel();
    return std::exchange(read_timed_out_, false);
  }
  void on_read_deadline(uint64_t gen) {
    if (gen != read_timer_gen_ || closed_) return;
    read_timed_out_ = true;
    // Lingering, there is nothing left to answer. A write in flight (a 100 Continue the client does not
    // take) would be cancelled too: a client that reads nothing cannot get a 408 either.
    if (lingering_ || writing_) {
      close();
      return;
    }
    error_code ec;
    socket_.cancel(ec);  // the read completes with operation_aborted; its handler sees read_timed_out_
  }

  // A client that stops reading is dropped.
  void arm_write_timer() {
    const uint64_t gen = ++write_timer_gen_;
    write_timer_.expires_after(limits().write_timeout);
    write_timer_.async_wait([self = shared_from_this(), gen](error_code ec) {
      if (!ec)
        self->guarded([gen](Session& s) {
          if (gen == s.write_timer_gen_) s.close();
        });
    });
  }
  void disarm_write_timer() {
    ++write_timer_gen_;
    write_timer_.cancel();
  }

  // HTTP/2 on this port too (HttpHooks::on_http2): which protocol the connection opens with, from its
  // first bytes peeked, never consumed (HTTP/2's server must read them again). The read timer (the
  // header timeout) is armed.
  void peek_opening() {
    if (closed_) return;
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code ec) {
      self->guarded([ec](Session& s) { s.on_readable(ec); });
    });
  }

  void on_readable(error_code ec) {
    if (closed_) return;
    if (ec || read_timed_out_) {
      close();  // gone, or nothing decisive within the header timeout: no one to answer
      return;
    }
    std::array<char, framing::kHttp2Preface.size()> head{};
    const ssize_t n = ::recv(socket_.native_handle(), head.data(), head.size(), MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      close();
      return;
    }
    switch (n < 0 ? framing::Opening::kUndecided
                  : framing::classify_opening(std::string_view(head.data(), static_cast<size_t>(n)))) {
      case framing::Opening::kHttp1:
        disarm_read_timer();
        read_header();
        return;
      case framing::Opening::kHttp2:
        disarm_read_timer();
        hand_over_http2();
        return;
      case framing::Opening::kUndecided:
        // Part of the preface (or nothing yet): the socket stays readable with those bytes unread, so
        // waiting for readability again would spin; look again shortly, until the read timer expires.
        peek_timer_.expires_after(std::chrono::milliseconds(n < 0 ? 0 : 5));
        peek_timer_.async_wait([self = shared_from_this()](error_code tec) {
          if (!tec) self->guarded([](Session& s) { s.peek_opening(); });
        });
        return;
    }
  }

  void hand_over_http2() {
    error_code ec;
    const int fd = socket_.release(ec);  // deregisters it from the reactor; the socket stays open
    if (ec) {
      GANTRY_LOG_WARN("http: {}: cannot hand an HTTP/2 connection over: {}", remote_, ec.message());
      close();
      return;
    }
    close();  // this session's part ends (its socket object no longer holds the descriptor)
    if (!run_logged("handing an HTTP/2 connection over", [&] { server_.hooks.on_http2(fd); })) ::close(fd);
  }

  void read_header() {
    if (closed_) return;
    parser_.emplace();
    framing::prepare_for_header(*parser_, limits());
    answer_started_ = false;
    final_queued_ = false;
    body_read_ = false;
    head_request_ = false;
    arm_read_timer(limits().header_timeout);
    http::async_read_header(reads_, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
      self->guarded([ec](Session& s) { s.on_header(ec); });
    });
  }

  static bool is_disconnect(error_code ec) {
    return ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
           ec == net::error::operation_aborted || ec == net::error::broken_pipe;
  }

  void on_header(error_code ec) {
    const bool timed_out = disarm_read_timer();
    if (closed_) return;
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      send_error(431,
                 "request header larger than " + std::to_string(framing::header_limit(limits())) + " bytes");
      return;
    }
    if (ec) {
      if (timed_out && buffer_.size() > 0) {
        send_error(408, "request header not received within " +
                            std::to_string(limits().header_timeout.count()) + " ms");
      } else if (timed_out || is_disconnect(ec)) {
        close();  // an idle connection (nothing of a next request came) or a client gone: no one to answer
      } else {
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
    head_request_ = h.method() == http::verb::head;

    if (auto refused = framing::check_framing(*parser_)) {
      send_error(refused->status, refused->message);
      return;
    }
    body_limit_ = limits().max_body_bytes;
    if (server_.hooks.on_header) {
      HeaderDecision decision;
      try {
        decision = server_.hooks.on_header(req_);
      } catch (...) {
        GANTRY_LOG_ERROR("http: on_header for {} {} threw: {}", req_.method, req_.path,
                         current_exception_text());
        send_error(500, "internal error while reading the request header");
        return;
      }
      if (decision.answer) {
        body_read_ = parser_->is_done();  // no body to skip: the connection may stay open
        send_response(std::move(*decision.answer));
        return;
      }
      if (decision.max_body_bytes) body_limit_ = std::min(body_limit_, *decision.max_body_bytes);
    }
    if (auto cl = parser_->content_length(); cl && *cl > body_limit_) {
      send_error(413,
                 "request body of " + std::to_string(*cl) + " bytes is larger than " + body_limit_text());
      return;
    }
    if (parser_->is_done()) {
      on_body({});
      return;
    }
    framing::prepare_for_body(*parser_, body_limit_);
    // RFC 9110 §10.1.1: the client may wait for this before sending the body (HTTP/1.1 only).
    if (h.version() >= 11 && beast::iequals(h[http::field::expect], "100-continue"))
      queue("HTTP/1.1 100 Continue\r\n\r\n", false);
    arm_read_timer(limits().body_timeout);
    http::async_read(reads_, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
      self->guarded([ec](Session& s) { s.on_body(ec); });
    });
  }

  std::string body_limit_text() const {
    std::string s = "the limit of " + std::to_string(body_limit_) + " bytes";
    if (body_limit_ < limits().max_body_bytes) return s + " for " + req_.method + " " + req_.path;
    return s + " (--max-body-size)";
  }

  void on_body(error_code ec) {
    const bool timed_out = disarm_read_timer();
    if (closed_) return;
    if (ec == http::error::body_limit) {
      send_error(413, "request body is larger than " + body_limit_text());
      return;
    }
    if (ec == http::error::buffer_overflow) {
      send_error(431, "a chunk header or the trailer of the request body is larger than " +
                          std::to_string(framing::header_limit(limits())) + " bytes");
      return;
    }
    if (ec) {
      if (timed_out) {
        send_error(
            408, "request body not received within " + std::to_string(limits().body_timeout.count()) + " ms");
      } else if (is_disconnect(ec)) {
        close();
      } else {
        send_error(400, "malformed request body: " + ec.message());
      }
      return;
    }
    body_read_ = true;
    req_.body = std::move(parser_->get().body());
    auto ex = std::make_shared<SessionExchange>(weak_from_this());
    exchange_ = ex;                   // weak: the handler owns it; dropping it unanswered sends a 500
    self_hold_ = shared_from_this();  // alive while the handler works, even without a pending operation
    responding_ = true;
    watch();
    std::shared_ptr<SessionExchange> held = ex;
    std::string method = req_.method, path = req_.path;  // for the log: req_ is moved out
    try {
      server_.hooks.on_request(std::move(req_), std::move(ex));
    } catch (...) {
      GANTRY_LOG_ERROR("http: on_request for {} {} threw: {}", method, path, current_exception_text());
      HttpResponse r;
      r.status = 500;
      r.body = R"({"error":"internal error while handling the request"})";
      held->respond(std::move(r));  // ignored when the handler had answered before it threw
    }
  }

  // While the handler works, keep a read pending: EOF or a reset means the client went away. Bytes
  // that arrive (a pipelined request) stay in buffer_ for the next parse, up to the buffer's bound.
  void watch() {
    if (closed_ || watching_ || buffer_.size() + kWatchChunk > buffer_.max_size()) return;
    watching_ = true;
    socket_.async_read_some(buffer_.prepare(kWatchChunk),
                            [self = shared_from_this()](error_code ec, size_t n) {
                              self->guarded([ec, n](Session& s) { s.on_watch(ec, n); });
                            });
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
  // this one only covers what fails before a request reaches them (or instead of it).
  void send_error(int status, std::string message, HttpHeaders headers = {}) {
    std::string body = "{\"error\":\"";
    for (char c : message) {
      if (c == '"' || c == '\\') body += '\\';
      body += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
    }
    body += "\"}";
    HttpResponse r;
    r.status = status;
    r.body = std::move(body);
    r.headers = std::move(headers);
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
    arm_write_timer();
    net::async_write(socket_, net::buffer(out_.front().data),
                     [self = shared_from_this()](error_code ec, size_t) {
                       self->guarded([ec](Session& s) { s.on_write(ec); });
                     });
  }

  void on_write(error_code ec) {
    writing_ = false;
    disarm_write_timer();
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
      socket_.cancel(ec);  // the watch completes with operation_aborted and reads the next request
    } else {
      read_header();
    }
  }

  // After answering before the body was read (401, 413, 429...), the client may still be sending it:
  // closing now would reset the connection and could destroy our answer in its receive buffer. So stop
  // sending, read and drop what still arrives (bounded in time and bytes), then close.
  void linger_close() {
    error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    if (ec) {
      close();
      return;
    }
    lingering_ = true;
    arm_read_timer(linger_for_);
    if (!discard_) discard_ = std::make_unique<std::array<char, 16384>>();
    discard_more();
  }
  void discard_more() {
    socket_.async_read_some(net::buffer(*discard_), [self = shared_from_this()](error_code ec, size_t n) {
      self->guarded([ec, n](Session& s) {
        s.discarded_ += n;
        if (ec || s.discarded_ > s.linger_max_) {
          s.close();
          return;
        }
        s.discard_more();
      });
    });
  }

  struct Out {
    std::string data;
    bool final = false;
  };

  HttpServer::Impl& server_;
  tcp::socket socket_;  // its executor is the session's strand
  net::steady_timer read_timer_;
  net::steady_timer write_timer_;
  net::steady_timer peek_timer_;  // HTTP/2 detection: the next look at an undecided opening
  GuardedReads reads_;            // socket_ for Beast's reads
  uint64_t read_timer_gen_ = 0;
  uint64_t write_timer_gen_ = 0;
  bool read_timed_out_ = false;
  beast::flat_buffer buffer_;  // bounded: framing::make_read_buffer
  std::optional<framing::RequestParser> parser_;
  uint64_t body_limit_ = 0;  // this request's
  HttpRequest req_;
  std::string remote_;
  std::weak_ptr<SessionExchange> exchange_;
  std::shared_ptr<Session> self_hold_;
  std::deque<Out> out_;
  Slot slot_;
  bool slot_released_ = false;
  bool keep_alive_ = true;
  bool head_request_ = false;  // answers carry no body
  bool writing_ = false;
  bool watching_ = false;
  bool responding_ = false;
  bool next_pending_ = false;
  bool answer_started_ = false;
  bool final_queued_ = false;
  bool body_read_ = false;  // the request's body (if any) is fully read: the connection can go on
  bool closed_ = false;
  bool close_after_ = false;  // the answer said "Connection: close"
  bool answering_ = false;    // counted in server_.answering
  bool lingering_ = false;
  std::chrono::milliseconds linger_for_ = kLinger;
  uint64_t linger_max_ = kMaxLingerBytes;
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
  if (fn) run_logged("on_client_gone threw", fn);
}

void HttpServer::Impl::accept(tcp::acceptor& acceptor) {
  acceptor.async_accept(net::make_strand(ioc), [this, &acceptor](error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      // Out of file descriptors or similar: back off a little rather than spin.
      GANTRY_LOG_WARN("http: accept failed: {}", ec.message());
      auto timer = std::make_shared<net::steady_timer>(ioc, std::chrono::milliseconds(50));
      timer->async_wait([this, timer, &acceptor](error_code) { accept(acceptor); });
      return;
    }
    run_logged("accepting a connection", [&] { admit(std::move(socket)); });
    accept(acceptor);
  });
}

// Accept's handler only (one at a time), so the check and the increment cannot race with each other;
// closes elsewhere only lower the counts.
void HttpServer::Impl::admit(tcp::socket socket) {
  error_code nd;
  socket.set_option(tcp::no_delay(true), nd);
  const size_t limit = options.max_connections;
  if (connections.load() < limit) {
    connections.fetch_add(1);  // the session gives it back; until it exists, this does
    std::shared_ptr<Session> session;
    try {
      session = std::make_shared<Session>(*this, std::move(socket), Session::Slot::kConnection);
    } catch (...) {
      connections.fetch_sub(1);
      throw;
    }
    session->start();
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (now - full_logged > std::chrono::seconds(10)) {
    full_logged = now;
    GANTRY_LOG_WARN("http: {} connections open (--max-connections): new ones are answered 503", limit);
  }
  if (rejecting.load() >= kMaxRejecting) return;  // the socket closes here, without an answer
  rejecting.fetch_add(1);
  std::shared_ptr<Session> session;
  try {
    session = std::make_shared<Session>(*this, std::move(socket), Session::Slot::kRejection);
  } catch (...) {
    rejecting.fetch_sub(1);
    throw;
  }
  session->turn_away(limit);
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
  if (impl->options.max_connections == 0) impl->options.max_connections = default_max_connections();
  impl->hooks = std::move(hooks);
  // Every address of the comma list listens on the same port: the first's (a free one for port 0).
  std::vector<std::string> hosts;
  for (size_t i = 0; i <= impl->options.host.size();) {
    size_t j = impl->options.host.find(',', i);
    if (j == std::string::npos) j = impl->options.host.size();
    hosts.push_back(impl->options.host.substr(i, j - i));
    i = j + 1;
  }
  impl->port = impl->options.port;
  for (const auto& host : hosts) {
    error_code ec;
    auto address = net::ip::make_address(host, ec);
    if (ec) return InvalidArgument("--host '" + host + "' is not an IP address (" + ec.message() + ")");
    const std::string where = host + ":" + std::to_string(impl->port);
    tcp::endpoint endpoint(address, impl->port);
    tcp::acceptor& acceptor = impl->acceptors.emplace_back(impl->ioc);
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec && address.is_v6()) acceptor.set_option(net::ip::v6_only(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
    if (ec) return IoError(where + ": cannot listen: " + ec.message());
    impl->port = acceptor.local_endpoint().port();
  }
  impl->work.emplace(net::make_work_guard(impl->ioc));
  for (auto& acceptor : impl->acceptors) impl->accept(acceptor);
  const int n = std::max(1, impl->options.io_threads);
  for (int i = 0; i < n; ++i) {
    // Handlers catch what they throw (Session::guarded); this is the last line of defence: an exception
    // out of run() is logged and the thread goes on serving (run() resumes where it was).
    impl->threads.emplace_back([io = &impl->ioc] {
      while (!run_logged("an I/O thread caught an exception and goes on", [io] { io->run(); })) {
      }
    });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::~HttpServer() { stop(); }

uint16_t HttpServer::port() const { return impl_->port; }

void HttpServer::stop_accepting() {
  if (impl_->closing.exchange(true)) return;
  auto closed = std::make_shared<std::promise<void>>();
  std::future<void> done = closed->get_future();
  net::post(impl_->ioc, [impl = impl_.get(), closed] {
    error_code ec;
    for (auto& acceptor : impl->acceptors) acceptor.close(ec);
    closed->set_value();
  });
  // An I/O thread cannot wait for a handler queued behind its own; any other caller waits for the close.
  if (!impl_->threads.empty() && !impl_->ioc.get_executor().running_in_this_thread()) done.wait();
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

size_t HttpServer::max_connections() const { return impl_->options.max_connections; }

uint64_t HttpServer::requests_served() const { return impl_->served.load(); }

size_t HttpServer::answers_in_progress() const { return impl_->answering.load(); }

}  // namespace gantry::server

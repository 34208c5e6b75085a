#include "gantry/hw/rpc_wire.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

namespace gantry::hw::rpc {
namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text(int e) { return std::strerror(e); }

// Milliseconds left until `deadline` for poll(2) (at least 0).
int left_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// Waits for `events` on fd until the deadline (nullopt: forever). False on timeout.
bool wait_for(int fd, short events, std::optional<Clock::time_point> deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, deadline ? left_ms(*deadline) : -1);
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return true;  // let the read/write report the error
  }
}

Status send_until(int fd, const void* data, size_t n, std::optional<Clock::time_point> deadline) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    if (!wait_for(fd, POLLOUT, deadline)) return Unavailable("timed out sending");
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Unavailable("send failed: " + errno_text(errno));
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
  return Status::Ok();
}

Status recv_until(int fd, void* data, size_t n, std::optional<Clock::time_point> deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    if (!wait_for(fd, POLLIN, deadline)) return Unavailable("timed out waiting for an answer");
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k == 0) return Unavailable("the connection was closed by the other side");
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Unavailable("receive failed: " + errno_text(errno));
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
  return Status::Ok();
}

}  // namespace

std::optional<uint64_t> response_bytes(uint8_t command, std::string_view payload) {
  switch (static_cast<Command>(command)) {
    case Command::kHello:
      return sizeof(HelloResponse);
    case Command::kAllocBuffer:
      return sizeof(AllocBufferResponse);
    case Command::kGetAlignment:
    case Command::kGetMaxSize:
    case Command::kBufferGetBase:
    case Command::kGetAllocSize:
      return 8;
    case Command::kSetTensorHash:
    case Command::kCopyTensor:
      return 1;
    case Command::kGetDeviceMemory:
      return sizeof(DeviceMemoryResponse);
    case Command::kDeviceCount:
      return 4;
    case Command::kGetTensor: {
      if (payload.size() < sizeof(GetTensorRequest)) return 0;
      uint64_t size = 0;
      std::memcpy(&size, payload.data() + offsetof(GetTensorRequest, size), sizeof size);
      return size;
    }
    default:
      return std::nullopt;
  }
}

std::string version_text(uint8_t major, uint8_t minor, uint8_t patch) {
  return fmt::format("{}.{}.{}", major, minor, patch);
}

bool version_compatible(const HelloResponse& r) { return r.major == kProtoMajor && r.minor <= kProtoMinor; }

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Socket::~Socket() {
  if (fd_ >= 0) ::close(fd_);
}

Result<Socket> Socket::connect(const std::string& host, uint16_t port, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    return Unavailable(fmt::format("cannot resolve '{}': {}", host, gai_strerror(rc)));
  }
  std::string why = "no address";
  const auto deadline = Clock::now() + timeout;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!s.valid()) {
      why = "socket: " + errno_text(errno);
      continue;
    }
    int rc = ::connect(s.fd_, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      if (!wait_for(s.fd_, POLLOUT, deadline)) {
        why = fmt::format("no answer within {} ms", timeout.count());
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(s.fd_, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      why = errno_text(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(s.fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::freeaddrinfo(res);
    return s;
  }
  ::freeaddrinfo(res);
  return Unavailable(why);
}

Result<Socket> Socket::listen(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    return InvalidArgument(fmt::format("cannot resolve '{}': {}", host, gai_strerror(rc)));
  }
  Socket s(::socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol));
  if (!s.valid()) {
    ::freeaddrinfo(res);
    return Unavailable("socket: " + errno_text(errno));
  }
  const int one = 1;
  ::setsockopt(s.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const int rc = ::bind(s.fd_, res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  if (rc != 0) return Unavailable(fmt::format("cannot listen on {}:{}: {}", host, port, errno_text(errno)));
  if (::listen(s.fd_, 16) != 0) return Unavailable("listen: " + errno_text(errno));
  return s;
}

uint16_t Socket::local_port() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

Status Socket::send_all(const void* data, size_t n, std::chrono::milliseconds timeout) {
  return send_until(fd_, data, n, Clock::now() + timeout);
}
Status Socket::recv_all(void* data, size_t n, std::chrono::milliseconds timeout) {
  return recv_until(fd_, data, n, Clock::now() + timeout);
}
Status Socket::send_all(const void* data, size_t n) { return send_until(fd_, data, n, std::nullopt); }
Status Socket::recv_all(void* data, size_t n) { return recv_until(fd_, data, n, std::nullopt); }

void Socket::keepalive(std::chrono::seconds idle, std::chrono::seconds interval) {
  const int one = 1, cnt = 3;
  const int idle_s = static_cast<int>(idle.count()), intvl_s = static_cast<int>(interval.count());
  ::setsockopt(fd_, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  ::setsockopt(fd_, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s);
  ::setsockopt(fd_, IPPROTO_TCP, TCP_KEEPINTVL, &intvl_s, sizeof intvl_s);
  ::setsockopt(fd_, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
  // Unacknowledged data counts too: a peer that vanished while we send gives up after the same time.
  const unsigned user_ms = static_cast<unsigned>((idle_s + cnt * intvl_s) * 1000);
  ::setsockopt(fd_, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof user_ms);
}

void Socket::shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

Result<Socket> Socket::accept() {
  while (true) {
    const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return Socket(fd);
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    return Unavailable("accept: " + errno_text(errno));
  }
}

Status call(Socket& s, Command command, const void* payload, size_t payload_size, void* response,
            size_t response_size, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  uint8_t header[9];
  header[0] = static_cast<uint8_t>(command);
  const uint64_t size = payload_size;
  std::memcpy(header + 1, &size, sizeof size);
  GANTRY_RETURN_IF_ERROR(send_until(s.fd(), header, sizeof header, deadline));
  if (payload_size > 0) GANTRY_RETURN_IF_ERROR(send_until(s.fd(), payload, payload_size, deadline));
  if (response == nullptr) return Status::Ok();
  uint64_t got = 0;
  GANTRY_RETURN_IF_ERROR(recv_until(s.fd(), &got, sizeof got, deadline));
  if (got != response_size) {
    return Unavailable(fmt::format("answered {} bytes where {} were expected (another protocol version?)",
                                   got, response_size));
  }
  return recv_until(s.fd(), response, response_size, deadline);
}

}  // namespace gantry::hw::rpc

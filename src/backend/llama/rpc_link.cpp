#include "gantry/backend/llama/rpc_link.h"

#include <fmt/format.h>

#include <cstring>
#include <iterator>
#include <map>
#include <thread>
#include <vector>

#include "gantry/core/log.h"
#include "gantry/hw/rpc_wire.h"

namespace gantry::llama {

namespace rpc = hw::rpc;
using rpc::Command;

namespace {

constexpr std::chrono::milliseconds kConnectTimeout{5000};
constexpr size_t kChunk = 1 << 20;
constexpr size_t kKeepHead = 512;  // the start of each request payload, for GET_TENSOR's size and the cache

std::string command_name(uint8_t c) {
  static constexpr const char* kNames[] = {
      "ALLOC_BUFFER",  "GET_ALIGNMENT",     "GET_MAX_SIZE",    "BUFFER_GET_BASE", "FREE_BUFFER",
      "BUFFER_CLEAR",  "SET_TENSOR",        "SET_TENSOR_HASH", "GET_TENSOR",      "COPY_TENSOR",
      "GRAPH_COMPUTE", "GET_DEVICE_MEMORY", "INIT_TENSOR",     "GET_ALLOC_SIZE",  "HELLO",
      "DEVICE_COUNT",  "GRAPH_RECOMPUTE",   "MEMSET_TENSOR"};
  return c < std::size(kNames) ? kNames[c] : "command " + std::to_string(c);
}

// Answers worth remembering: the same request always gets the same answer from one server.
bool cacheable(uint8_t c) {
  switch (static_cast<Command>(c)) {
    case Command::kDeviceCount:
    case Command::kGetAlignment:
    case Command::kGetMaxSize:
    case Command::kGetDeviceMemory:
      return true;
    default:
      return false;
  }
}

}  // namespace

struct RpcLink::Impl {
  static void lose(RpcLink& link, const std::string& why) { link.lose(why); }

  // One client connection: ggml on one side, the server (while it lasts) on the other.
  static void serve(std::shared_ptr<RpcLink> link, rpc::Socket client) {
    link->connections_.fetch_add(1);
    Relay r(*link, std::move(client));
    r.run();
    link->connections_.fetch_sub(1);
  }

  struct Relay {
    Relay(RpcLink& l, rpc::Socket c) : link(l), client(std::move(c)) {}

    RpcLink& link;
    rpc::Socket client;
    rpc::Socket upstream;
    bool lost = false;
    std::vector<uint8_t> buf = std::vector<uint8_t>(kChunk + 16);
    std::map<std::string, std::string> cache;  // cmd byte + request payload -> response payload

    void lose(const std::string& why) {
      if (lost) return;
      lost = true;
      upstream = rpc::Socket();
      Impl::lose(link, why);
    }

    void run() {
      auto up = rpc::Socket::connect(link.endpoint().host, link.endpoint().port, kConnectTimeout);
      if (up.ok()) {
        upstream = std::move(*up);
        upstream.keepalive(std::chrono::seconds(10), std::chrono::seconds(5));
      } else {
        lose("cannot connect: " + up.status().message());
      }
      while (true) {
        uint8_t header[9];
        if (!client.recv_all(header, sizeof header).ok()) return;  // ggml closed the connection
        uint64_t size = 0;
        std::memcpy(&size, header + 1, sizeof size);
        const uint8_t cmd = header[0];
        std::string head;  // the payload's start
        if (!forward_request(header, size, head)) return;
        const std::optional<uint64_t> expected = rpc::response_bytes(cmd, head);
        if (!expected) continue;
        if (!forward_response(cmd, head, size <= kKeepHead, *expected)) return;
      }
    }

    // Streams the request to the server (unless lost); keeps the payload's first kKeepHead bytes. False
    // when ggml's side of the connection failed.
    bool forward_request(const uint8_t (&header)[9], uint64_t size, std::string& head) {
      const uint8_t cmd = header[0];
      std::memcpy(buf.data(), header, sizeof header);
      size_t pending = sizeof header;  // bytes in buf to send upstream
      uint64_t left = size;
      do {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(left, kChunk));
        if (n > 0 && !client.recv_all(buf.data() + pending, n).ok()) return false;
        if (head.size() < kKeepHead) {
          const size_t take = std::min(kKeepHead - head.size(), n);
          head.append(reinterpret_cast<const char*>(buf.data() + pending), take);
        }
        pending += n;
        left -= n;
        if (!lost) {
          Status s = upstream.send_all(buf.data(), pending);
          if (!s.ok()) lose(fmt::format("{} (while sending {})", s.message(), command_name(cmd)));
        }
        pending = 0;
      } while (left > 0);
      return true;
    }

    // Relays (or, once lost, makes up) the response ggml waits for. False when ggml's side failed.
    bool forward_response(uint8_t cmd, const std::string& head, bool cache_key_ok, uint64_t expected) {
      std::string key;
      if (cacheable(cmd) && cache_key_ok) key = std::string(1, static_cast<char>(cmd)) + head;
      if (lost) return make_up(cmd, key, expected, 0, /*header_sent=*/false);
      uint64_t size = 0;
      Status s = upstream.recv_all(&size, sizeof size);
      if (!s.ok()) {
        lose(fmt::format("{} (while waiting for the answer to {})", s.message(), command_name(cmd)));
      } else if (size != expected) {
        lose(fmt::format("answered {} with {} bytes where {} were expected (another protocol version?)",
                         command_name(cmd), size, expected));
      }
      if (lost) return make_up(cmd, key, expected, 0, /*header_sent=*/false);
      if (expected <= kChunk) {  // the usual case: one read, one write
        s = upstream.recv_all(buf.data() + sizeof size, expected);
        if (!s.ok()) {
          lose(fmt::format("{} (while receiving the answer to {})", s.message(), command_name(cmd)));
          return make_up(cmd, key, expected, 0, /*header_sent=*/false);
        }
        if (cmd == static_cast<uint8_t>(Command::kHello) && !hello_ok(buf.data() + sizeof size)) {
          return make_up(cmd, key, expected, 0, /*header_sent=*/false);
        }
        std::memcpy(buf.data(), &size, sizeof size);
        if (!client.send_all(buf.data(), sizeof size + expected).ok()) return false;
        if (!key.empty())
          cache[key].assign(reinterpret_cast<const char*>(buf.data() + sizeof size), expected);
        return true;
      }
      // A large answer (GET_TENSOR of many MiB): streamed.
      if (!client.send_all(&size, sizeof size).ok()) return false;
      uint64_t sent = 0;
      while (sent < expected) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(expected - sent, kChunk));
        s = upstream.recv_all(buf.data(), n);
        if (!s.ok()) {
          lose(fmt::format("{} (while receiving the answer to {})", s.message(), command_name(cmd)));
          return make_up(cmd, key, expected, sent, /*header_sent=*/true);
        }
        if (!client.send_all(buf.data(), n).ok()) return false;
        sent += n;
      }
      return true;
    }

    bool hello_ok(const uint8_t* answer) {
      rpc::HelloResponse h;
      std::memcpy(&h, answer, sizeof h);
      if (rpc::version_compatible(h)) return true;
      lose(fmt::format("speaks RPC protocol {}, this build speaks {}",
                       rpc::version_text(h.major, h.minor, h.patch),
                       rpc::version_text(rpc::kProtoMajor, rpc::kProtoMinor, rpc::kProtoPatch)));
      return false;
    }

    // A well-formed answer of `expected` bytes for ggml, the first `sent` of which it already has.
    bool make_up(uint8_t cmd, const std::string& key, uint64_t expected, uint64_t sent, bool header_sent) {
      if (!header_sent && !client.send_all(&expected, sizeof expected).ok()) return false;
      std::string answer;
      if (auto it = cache.find(key); !key.empty() && it != cache.end() && it->second.size() == expected) {
        answer = it->second;
      } else if (cmd == static_cast<uint8_t>(Command::kHello)) {
        rpc::HelloResponse h;
        h.major = rpc::kProtoMajor;
        h.minor = rpc::kProtoMinor;
        h.patch = rpc::kProtoPatch;
        answer.assign(reinterpret_cast<const char*>(&h), sizeof h);
      } else if (cmd == static_cast<uint8_t>(Command::kDeviceCount)) {
        const uint32_t one = 1;  // never remembered: ggml asks once per endpoint, before anything else
        answer.assign(reinterpret_cast<const char*>(&one), sizeof one);
      } else if (cmd == static_cast<uint8_t>(Command::kGetAlignment)) {
        const uint64_t align = 64;  // a power of two, as ggml's allocator asserts
        answer.assign(reinterpret_cast<const char*>(&align), sizeof align);
      } else if (cmd == static_cast<uint8_t>(Command::kBufferGetBase)) {
        // Not null: ggml_backend_buffer_get_base asserts that a buffer has a base. Page-aligned, so every
        // alignment ggml checks holds; ggml only ever hands it back to the (gone) server.
        const uint64_t base = uint64_t{1} << 40;
        answer.assign(reinterpret_cast<const char*>(&base), sizeof base);
      } else if (cmd == static_cast<uint8_t>(Command::kGetMaxSize)) {
        const uint64_t max = UINT64_MAX;
        answer.assign(reinterpret_cast<const char*>(&max), sizeof max);
      }
      answer.resize(static_cast<size_t>(expected), '\0');  // zeros: no buffer, no memory, a null answer
      return client.send_all(answer.data() + sent, static_cast<size_t>(expected - sent)).ok();
    }
  };

  static void accept_loop(std::shared_ptr<RpcLink> link, std::shared_ptr<rpc::Socket> listener) {
    while (true) {
      auto c = listener->accept();
      if (!c.ok()) {
        // Out of file descriptors and the like: a connection ggml makes meanwhile waits in the backlog.
        GANTRY_LOG_WARN("RPC link to {}: {}; retrying", link->endpoint_.text(), c.status().message());
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      std::thread(serve, link, std::move(*c)).detach();
    }
  }
};

Result<std::shared_ptr<RpcLink>> RpcLink::get(const hw::RpcEndpoint& endpoint) {
  // Never destroyed: detached relay threads use the links until the process ends.
  static auto* links = new std::map<std::string, std::shared_ptr<RpcLink>>();
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (auto it = links->find(endpoint.text()); it != links->end()) return it->second;
  auto listener = rpc::Socket::listen("127.0.0.1", 0);
  if (!listener.ok()) {
    return Unavailable(fmt::format("cannot open the local relay for RPC server {}: {}", endpoint.text(),
                                   listener.status().message()));
  }
  std::shared_ptr<RpcLink> link(new RpcLink());
  link->endpoint_ = endpoint;
  link->relay_ = "127.0.0.1:" + std::to_string(listener->local_port());
  auto shared_listener = std::make_shared<rpc::Socket>(std::move(*listener));
  std::thread(Impl::accept_loop, link, shared_listener).detach();
  links->emplace(endpoint.text(), link);
  return link;
}

void RpcLink::lose(const std::string& why) {
  {
    std::lock_guard lock(mu_);
    last_loss_ = why;
  }
  losses_.fetch_add(1);
  GANTRY_LOG_WARN("RPC server {} lost: {}", endpoint_.text(), why);
}

std::string RpcLink::last_loss() const {
  std::lock_guard lock(mu_);
  return last_loss_;
}

Status RpcLink::check(uint64_t losses_before) const {
  if (losses() <= losses_before) return Status::Ok();
  return Unavailable(fmt::format(
      "RPC server {} was lost: {}; what used it failed (load the model again once the server is back)",
      endpoint_.text(), last_loss()));
}

}  // namespace gantry::llama

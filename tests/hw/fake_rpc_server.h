// A small in-process server that speaks ggml's RPC wire format (gantry/hw/rpc_wire.h) for tests: one client
// at a time, like ggml's; a configurable protocol version; a fixed device list; buffers kept in memory. It
// can hang up after a number of requests (a host lost mid-session) or never answer (a busy server).
#pragma once

#include <atomic>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "gantry/hw/rpc_wire.h"

namespace gantry::testing {

class FakeRpcServer {
 public:
  struct Options {
    uint8_t major = hw::rpc::kProtoMajor, minor = hw::rpc::kProtoMinor, patch = hw::rpc::kProtoPatch;
    std::vector<std::pair<uint64_t, uint64_t>> devices;  // free, total; empty: one of 3 GiB free, 4 GiB
    int hang_up_after = -1;     // requests served per connection before it is closed (-1: never)
    bool never_answer = false;  // accept, then read nothing
  };

  explicit FakeRpcServer(Options o) : o_(std::move(o)) {
    if (o_.devices.empty()) o_.devices.emplace_back(3ull << 30, 4ull << 30);
    auto l = hw::rpc::Socket::listen("127.0.0.1", 0);
    if (!l.ok()) return;
    listener_ = std::move(*l);
    port_ = listener_.local_port();
    thread_ = std::thread([this] { loop(); });
  }
  FakeRpcServer() : FakeRpcServer(Options{}) {}
  ~FakeRpcServer() {
    stop_ = true;
    listener_.shutdown();
    if (thread_.joinable()) thread_.join();
  }

  uint16_t port() const { return port_; }
  int requests() const { return requests_.load(); }
  int connections() const { return connections_.load(); }

 private:
  void loop() {
    while (!stop_) {
      auto c = listener_.accept();
      if (!c.ok()) return;
      connections_.fetch_add(1);
      if (o_.never_answer) {
        held_.push_back(std::move(*c));
        continue;
      }
      serve(*c);
    }
  }

  void serve(hw::rpc::Socket& s) {
    using hw::rpc::Command;
    int served = 0;
    std::map<uint64_t, std::vector<uint8_t>> buffers;
    uint64_t next = 0x1000;
    while (true) {
      uint8_t header[9];
      if (!s.recv_all(header, sizeof header).ok()) return;
      uint64_t size = 0;
      std::memcpy(&size, header + 1, sizeof size);
      std::vector<uint8_t> in(size);
      if (size > 0 && !s.recv_all(in.data(), size).ok()) return;
      if (o_.hang_up_after >= 0 && served >= o_.hang_up_after) return;  // the peer sees the connection close
      ++served;
      requests_.fetch_add(1);
      std::vector<uint8_t> out;
      bool answer = true;
      auto put = [&out](const void* p, size_t n) {
        out.insert(out.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
      };
      switch (static_cast<Command>(header[0])) {
        case Command::kHello: {
          hw::rpc::HelloResponse r;
          r.major = o_.major, r.minor = o_.minor, r.patch = o_.patch;
          put(&r, sizeof r);
          break;
        }
        case Command::kDeviceCount: {
          const uint32_t n = static_cast<uint32_t>(o_.devices.size());
          put(&n, sizeof n);
          break;
        }
        case Command::kGetDeviceMemory: {
          uint32_t dev = 0;
          std::memcpy(&dev, in.data(), sizeof dev);
          hw::rpc::DeviceMemoryResponse r;
          if (dev < o_.devices.size()) r = {o_.devices[dev].first, o_.devices[dev].second};
          put(&r, sizeof r);
          break;
        }
        case Command::kAllocBuffer: {
          hw::rpc::AllocBufferRequest req;
          std::memcpy(&req, in.data(), sizeof req);
          buffers[next].resize(req.size);
          hw::rpc::AllocBufferResponse r{next, req.size};
          next += 0x1000;
          put(&r, sizeof r);
          break;
        }
        case Command::kBufferGetBase: {
          uint64_t ptr = 0;
          std::memcpy(&ptr, in.data(), sizeof ptr);
          const uint64_t base = ptr << 20;  // any address: the client only hands it back
          put(&base, sizeof base);
          break;
        }
        case Command::kGetTensor: {
          hw::rpc::GetTensorRequest req;
          std::memcpy(&req, in.data(), sizeof req);
          out.assign(req.size, 0x5a);
          break;
        }
        case Command::kSetTensor:
        case Command::kFreeBuffer:
        case Command::kGraphCompute:
        case Command::kGraphRecompute:
        case Command::kBufferClear:
          answer = false;
          break;
        default:
          return;  // what ggml's server does with a command it cannot serve: close
      }
      if (!answer) continue;
      const uint64_t n = out.size();
      if (!s.send_all(&n, sizeof n).ok() || (n > 0 && !s.send_all(out.data(), n).ok())) return;
    }
  }

  Options o_;
  hw::rpc::Socket listener_;
  uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::atomic<int> connections_{0};
  std::vector<hw::rpc::Socket> held_;
};

}  // namespace gantry::testing

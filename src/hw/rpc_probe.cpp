#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <vector>

#include "gantry/hw/rpc.h"
#include "gantry/hw/rpc_wire.h"

namespace gantry::hw {
namespace {

using Clock = std::chrono::steady_clock;
using rpc::Command;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

// One connection to a server for the length of a probe.
class Probe {
 public:
  Probe(const RpcEndpoint& e, const RpcProbeOptions& o, rpc::Socket s = {})
      : e_(e), o_(o), sock_(std::move(s)) {}

  Status fail(const Status& s, std::string_view doing) const {
    return Status(s.code(), fmt::format("RPC server {}: {}: {}", e_.text(), doing, s.message()));
  }

  Status connect() {
    auto s = rpc::Socket::connect(e_.host, e_.port, o_.timeout);
    if (!s.ok()) {
      return Unavailable(
          fmt::format("RPC server {} is not reachable: {} (is `gantry rpc-server` running there?)", e_.text(),
                      s.status().message()));
    }
    sock_ = std::move(*s);
    return Status::Ok();
  }

  Result<std::string> hello() {
    rpc::HelloRequest req;  // no capabilities: plain TCP
    rpc::HelloResponse rsp;
    Status s = rpc::call(sock_, Command::kHello, &req, sizeof req, &rsp, sizeof rsp, o_.timeout);
    if (!s.ok()) {
      if (s.message().rfind("timed out", 0) == 0) {
        return Unavailable(fmt::format(
            "RPC server {} accepted the connection but did not answer its hello within {} ms: an RPC server "
            "serves one client at a time; is another process (a `gantry serve`, a llama-server) using it?",
            e_.text(), o_.timeout.count()));
      }
      return Unavailable(fmt::format(
          "RPC server {} did not complete the hello ({}): not an RPC server, or one of an older protocol "
          "than {}",
          e_.text(), s.message(), rpc::version_text(rpc::kProtoMajor, rpc::kProtoMinor, rpc::kProtoPatch)));
    }
    const std::string v = rpc::version_text(rsp.major, rsp.minor, rsp.patch);
    if (!rpc::version_compatible(rsp)) {
      return FailedPrecondition(
          fmt::format("RPC server {} speaks RPC protocol {}, this build of Gantry speaks {} (the major "
                      "versions must match "
                      "and the server's minor must not be newer): run a `gantry rpc-server` (or llama.cpp "
                      "rpc-server) built "
                      "from the same llama.cpp release",
                      e_.text(), v, rpc::version_text(rpc::kProtoMajor, rpc::kProtoMinor, rpc::kProtoPatch)));
    }
    return v;
  }

  Result<uint32_t> device_count() {
    uint32_t n = 0;
    Status s = rpc::call(sock_, Command::kDeviceCount, nullptr, 0, &n, sizeof n, o_.timeout);
    if (!s.ok()) return fail(s, "asking for its devices");
    return n;
  }

  Result<RpcDeviceMemory> memory(uint32_t device) {
    rpc::DeviceMemoryResponse rsp;
    Status s =
        rpc::call(sock_, Command::kGetDeviceMemory, &device, sizeof device, &rsp, sizeof rsp, o_.timeout);
    if (!s.ok()) return fail(s, fmt::format("asking for device {}'s memory", device));
    return RpcDeviceMemory{rsp.free_mem, rsp.total_mem};
  }

  // Median of a few small exchanges.
  Result<double> round_trip() {
    std::vector<double> t;
    for (int i = 0; i < 7; ++i) {
      const auto t0 = Clock::now();
      GANTRY_RETURN_IF_ERROR(memory(0).status());
      t.push_back(seconds_since(t0));
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }

  // Upload and download bandwidth through a buffer on device 0; best of three, one round trip less each.
  Status bandwidth(double rtt, RpcServerInfo& info) {
    const uint64_t n = std::max<uint64_t>(o_.bandwidth_bytes / 4 * 4, 4096);
    rpc::AllocBufferRequest alloc{0, n};
    rpc::AllocBufferResponse buf;
    if (Status s =
            rpc::call(sock_, Command::kAllocBuffer, &alloc, sizeof alloc, &buf, sizeof buf, o_.timeout);
        !s.ok())
      return fail(s, "allocating a buffer to time the link");
    if (buf.remote_ptr == 0) return Status::Ok();  // no room: bandwidth stays unknown
    uint64_t base = 0;
    if (Status s = rpc::call(sock_, Command::kBufferGetBase, &buf.remote_ptr, sizeof buf.remote_ptr, &base,
                             sizeof base, o_.timeout);
        !s.ok())
      return fail(s, "timing the link");
    rpc::Tensor t;  // a 1-D f32 tensor over the whole buffer
    t.id = 1;
    t.type = rpc::kTypeF32;
    t.buffer = buf.remote_ptr;
    t.data = base;
    t.ne[0] = static_cast<uint32_t>(n / 4);
    t.ne[1] = t.ne[2] = t.ne[3] = 1;
    t.nb[0] = 4;
    t.nb[1] = t.nb[2] = t.nb[3] = static_cast<uint32_t>(n);
    std::vector<uint8_t> set(sizeof(rpc::Tensor) + 1 + 8 + n, 0);  // | tensor | cache flag | offset | data |
    std::memcpy(set.data(), &t, sizeof t);
    rpc::GetTensorRequest get;
    get.tensor = t;
    get.size = n;
    std::vector<uint8_t> back(n);
    double up = 0, down = 0;
    const auto slow = std::max(o_.timeout, std::chrono::milliseconds(60000));
    for (int i = 0; i < 3; ++i) {
      auto t0 = Clock::now();
      // SET_TENSOR has no answer: a small request after it returns once the server has taken it in.
      Status s = rpc::call(sock_, Command::kSetTensor, set.data(), set.size(), nullptr, 0, slow);
      if (s.ok()) s = memory(0).status();
      if (!s.ok()) return fail(s, "timing the link (upload)");
      up = std::max(up, static_cast<double>(n) / std::max(seconds_since(t0) - rtt, 1e-6));
      t0 = Clock::now();
      s = rpc::call(sock_, Command::kGetTensor, &get, sizeof get, back.data(), back.size(), slow);
      if (!s.ok()) return fail(s, "timing the link (download)");
      down = std::max(down, static_cast<double>(n) / std::max(seconds_since(t0) - rtt, 1e-6));
    }
    if (Status s = rpc::call(sock_, Command::kFreeBuffer, &buf.remote_ptr, sizeof buf.remote_ptr, nullptr, 0,
                             o_.timeout);
        !s.ok())
      return fail(s, "freeing the buffer that timed the link");
    info.upload_bytes_per_s = static_cast<uint64_t>(up);
    info.download_bytes_per_s = static_cast<uint64_t>(down);
    return Status::Ok();
  }

 private:
  RpcEndpoint e_;
  RpcProbeOptions o_;
  rpc::Socket sock_;
};

}  // namespace

Result<RpcEndpoint> parse_rpc_endpoint(std::string_view text) {
  const std::string t = trim(text);
  const auto colon = t.find(':');
  if (t.empty() || colon == std::string::npos || colon == 0) {
    return InvalidArgument(fmt::format("RPC server '{}' must be HOST:PORT (e.g. 10.0.0.2:50052)", t));
  }
  if (t.find(':', colon + 1) != std::string::npos) {
    return InvalidArgument(fmt::format(
        "RPC server '{}' must be HOST:PORT with a host name or IPv4 address (ggml's RPC client splits the "
        "endpoint at its first ':', so IPv6 addresses are not accepted)",
        t));
  }
  const std::string port_text = t.substr(colon + 1);
  int port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() || port < 1 ||
      port > 65535) {
    return InvalidArgument(fmt::format("RPC server '{}': the port must be a number from 1 to 65535", t));
  }
  return RpcEndpoint{t.substr(0, colon), static_cast<uint16_t>(port)};
}

Result<std::vector<RpcEndpoint>> parse_rpc_endpoints(const std::vector<std::string>& entries) {
  std::vector<RpcEndpoint> out;
  for (const auto& entry : entries) {
    size_t start = 0;
    while (start <= entry.size()) {
      size_t end = entry.find(',', start);
      if (end == std::string::npos) end = entry.size();
      GANTRY_ASSIGN_OR_RETURN(RpcEndpoint e,
                              parse_rpc_endpoint(std::string_view(entry).substr(start, end - start)));
      if (std::find(out.begin(), out.end(), e) != out.end()) {
        return InvalidArgument(
            fmt::format("RPC server {} is named twice (its devices would be counted twice)", e.text()));
      }
      out.push_back(std::move(e));
      start = end + 1;
    }
  }
  if (out.empty()) return InvalidArgument("no RPC server given (expected HOST:PORT[,HOST:PORT...])");
  return out;
}

Result<std::vector<RpcEndpoint>> parse_rpc_endpoints(std::string_view list) {
  return parse_rpc_endpoints(std::vector<std::string>{std::string(list)});
}

namespace {

// Everything after the connection: the hello, the devices, their memory and the link.
Result<RpcServerInfo> run_probe(Probe& p, const RpcEndpoint& endpoint, const RpcProbeOptions& options) {
  RpcServerInfo info;
  info.endpoint = endpoint;
  GANTRY_ASSIGN_OR_RETURN(info.protocol, p.hello());
  GANTRY_ASSIGN_OR_RETURN(uint32_t n, p.device_count());
  if (n == 0) return FailedPrecondition(fmt::format("RPC server {} serves no device", endpoint.text()));
  if (n > 64) {
    return FailedPrecondition(
        fmt::format("RPC server {} says it serves {} devices, more than is plausible", endpoint.text(), n));
  }
  for (uint32_t i = 0; i < n; ++i) {
    GANTRY_ASSIGN_OR_RETURN(RpcDeviceMemory m, p.memory(i));
    info.devices.push_back(m);
  }
  if (options.measure_link) {
    GANTRY_ASSIGN_OR_RETURN(double rtt, p.round_trip());
    info.round_trip_s = rtt;
    GANTRY_RETURN_IF_ERROR(p.bandwidth(rtt, info));
  }
  return info;
}

}  // namespace

Result<RpcServerInfo> probe_rpc_server(const RpcEndpoint& endpoint, const RpcProbeOptions& options) {
  Probe p(endpoint, options);
  GANTRY_RETURN_IF_ERROR(p.connect());
  return run_probe(p, endpoint, options);
}

Result<RpcServerInfo> probe_rpc_connection(rpc::Socket connection, const RpcEndpoint& endpoint,
                                           const RpcProbeOptions& options) {
  Probe p(endpoint, options, std::move(connection));
  return run_probe(p, endpoint, options);
}

std::vector<Device> rpc_registry_devices(const RpcServerInfo& info, int first_index) {
  std::vector<Device> out;
  for (size_t i = 0; i < info.devices.size(); ++i) {
    Device d;
    d.id = memory_device_id(kFamilyRpc, first_index + static_cast<int>(i));
    d.kind = DeviceKind::kRemote;
    d.family = std::string(kFamilyRpc);
    d.vendor = "";
    d.name = fmt::format("device {} of {}", i, info.endpoint.text());
    d.memory_total_bytes = info.devices[i].total_bytes;
    d.memory_free_bytes = info.devices[i].free_bytes;
    d.sources = {"rpc"};
    RemoteLink link;
    link.endpoint = info.endpoint.text();
    link.device_index = static_cast<int>(i);
    link.protocol = info.protocol;
    link.round_trip_s = info.round_trip_s;
    link.upload_bytes_per_s = info.upload_bytes_per_s;
    link.download_bytes_per_s = info.download_bytes_per_s;
    d.remote = std::move(link);
    out.push_back(std::move(d));
  }
  return out;
}

Status add_rpc_devices(Registry& registry, const std::vector<RpcEndpoint>& endpoints,
                       const RpcProbeOptions& options) {
  int next = 0;
  for (const auto& d : registry.devices)
    if (d.kind == DeviceKind::kRemote) next = std::max(next, family_index(d) + 1);
  for (const auto& e : endpoints) {
    const auto t0 = Clock::now();
    GANTRY_ASSIGN_OR_RETURN(RpcServerInfo info, probe_rpc_server(e, options));
    for (auto& d : rpc_registry_devices(info, next)) registry.devices.push_back(std::move(d));
    next += static_cast<int>(info.devices.size());
    registry.timings_ms["rpc " + e.text()] = 1000.0 * seconds_since(t0);
  }
  return Status::Ok();
}

}  // namespace gantry::hw

// Devices of other hosts: RPC servers (`gantry rpc-server`, llama.cpp's rpc-server) probed over ggml's RPC
// protocol (gantry/hw/rpc_wire.h), and their devices as registry entries (DeviceKind::kRemote, ids "rpc:N").
//
// A probe connects, says hello (refusing a server of another protocol version by name), asks how many devices
// it serves and each one's free and total memory as the server reports them, and — unless told not to —
// measures the link: the round trip of small requests and the bandwidth of a few MiB written to and read
// back from device 0 (a buffer allocated there and freed again). It closes its connection before returning:
// an RPC server serves one client at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/hw/registry.h"
#include "gantry/hw/rpc_wire.h"

namespace gantry::hw {

struct RpcEndpoint {
  std::string host;
  uint16_t port = 0;
  std::string text() const { return host + ":" + std::to_string(port); }
  bool operator==(const RpcEndpoint&) const = default;
};

// "host:port" (a name or an IPv4 address: ggml splits the endpoint at its first ':'). InvalidArgument
// names what is wrong.
Result<RpcEndpoint> parse_rpc_endpoint(std::string_view text);
// "host:port,host:port" (spaces around entries ignored; a server named twice is refused: its devices would
// be counted twice). An empty list is refused.
Result<std::vector<RpcEndpoint>> parse_rpc_endpoints(std::string_view list);
// The same from separate entries (a JSON array, repeated flags), each of which may itself be a list.
Result<std::vector<RpcEndpoint>> parse_rpc_endpoints(const std::vector<std::string>& entries);

struct RpcProbeOptions {
  std::chrono::milliseconds timeout{5000};  // per step: connect, hello, each request
  bool measure_link = true;                 // round trip and bandwidth (adds ~10 requests and 2 x 8 MiB)
  uint64_t bandwidth_bytes = 8ull << 20;
};

struct RpcDeviceMemory {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

struct RpcServerInfo {
  RpcEndpoint endpoint;
  std::string protocol;  // "7.0.0"
  std::vector<RpcDeviceMemory> devices;
  std::optional<double> round_trip_s;
  std::optional<uint64_t> upload_bytes_per_s;
  std::optional<uint64_t> download_bytes_per_s;
};

// Errors name the server: Unavailable ("RPC server 10.0.0.2:50052 is not reachable: connection refused"),
// FailedPrecondition for a server that speaks another protocol version or serves no device.
Result<RpcServerInfo> probe_rpc_server(const RpcEndpoint& endpoint, const RpcProbeOptions& options = {});
// The same probe over a connection already open to the server `endpoint` names (which it only names in
// errors): tests and fuzz/rpc_wire_fuzz.cpp hand it one end of a socketpair holding the server's answers.
// Every answer is checked before it is used: a size other than the command's, another protocol version, no
// device or more than 64 are errors naming the server, never a crash; a connection that ends early is
// Unavailable. The connection is closed on return.
Result<RpcServerInfo> probe_rpc_connection(rpc::Socket connection, const RpcEndpoint& endpoint,
                                           const RpcProbeOptions& options = {});

// Registry entries for a probed server's devices, numbered "rpc:<first_index>", "rpc:<first_index + 1>", ...
std::vector<Device> rpc_registry_devices(const RpcServerInfo& info, int first_index);

// Probes every endpoint in order and appends their devices to `registry` (after the local ones; ids
// continue after the remote devices already there). The first server that fails fails the call, by name.
Status add_rpc_devices(Registry& registry, const std::vector<RpcEndpoint>& endpoints,
                       const RpcProbeOptions& options = {});

}  // namespace gantry::hw

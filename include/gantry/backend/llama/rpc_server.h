// This machine's ggml devices served to other hosts over ggml's RPC protocol (ggml_backend_rpc_start_server,
// what llama.cpp's rpc-server runs), for `gantry rpc-server`.
//
// The protocol has no authentication and no encryption: whoever reaches the port can read and overwrite
// the served device's memory and run graphs on it. The caller binds loopback unless told otherwise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::llama {

struct RpcServerOptions {
  std::string host = "127.0.0.1";  // an IPv4 address (ggml's server binds with inet_addr)
  uint16_t port = 50052;
  // ggml device names ("CPU", "CUDA0"); empty: every accelerator, else the CPU (llama.cpp's rpc-server's
  // choice).
  std::vector<std::string> devices;
  int threads = 0;        // threads of the CPU device; 0: half the hardware threads (rpc-server's default)
  std::string cache_dir;  // where the server keeps tensors it was sent (weights sent again are then skipped)
  // The memory each served device reports (total and, at most, free): caps what clients plan onto it. Not
  // an allocation limit: a client that ignores it is not refused.
  std::optional<uint64_t> memory_bytes;
};

struct ServedDevice {
  std::string name;  // "CPU", "CUDA0"
  std::string description;
  uint64_t free_bytes = 0;  // as reported (after memory_bytes)
  uint64_t total_bytes = 0;
};

// The devices `options` selects, as clients will see them. NotFound for an unknown device name (the message
// lists the available ones).
Result<std::vector<ServedDevice>> served_devices(const RpcServerOptions& options);

// Checks the options: an IPv4 host, a port free to listen on (tried, then closed again), a cache directory
// that exists or can be created. InvalidArgument, Unavailable (port taken) or IoError with the reason.
Status check_rpc_server(const RpcServerOptions& options);

// Serves until the process ends (ggml's accept loop cannot be stopped). Returns only when the server could
// not start (the reason). Call check_rpc_server first: ggml's own failures say little.
Status run_rpc_server(const RpcServerOptions& options);

}  // namespace gantry::llama

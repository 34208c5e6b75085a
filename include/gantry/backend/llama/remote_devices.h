// The ggml devices of RPC servers (llama-server's --rpc), each server reached through its RpcLink
// (gantry/backend/llama/rpc_link.h) so that losing it fails what used it, not the process.
//
// Resolving a server: unless the process already holds a connection to it, a probe first (gantry/hw/rpc.h:
// a clear error for a server that is down, busy or of another protocol version, before ggml, which would
// abort on any of those, is asked), then ggml_backend_rpc_add_server through the RPC registry's proc
// address (as llama-server's add_rpc_devices does) with the link's relay endpoint. The devices are not
// registered with ggml: a model gets them through llama_model_params.devices, and models loaded without
// them never see them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gantry/backend/llama/rpc_link.h"
#include "gantry/core/status.h"
#include "gantry/hw/rpc.h"

struct ggml_backend_device;

namespace gantry::llama {

struct RemoteDevices {
  std::vector<ggml_backend_device*> devices;    // servers in the order given, each one's devices in order
  std::vector<std::string> ids;                 // "rpc:0", "rpc:1", ...: the registry's ids for the same list
  std::vector<size_t> server_of;                // per device: its server's index in `links`
  std::vector<int> index_on_server;             // per device: its index on that server
  std::vector<std::shared_ptr<RpcLink>> links;  // one per server
  std::vector<uint64_t> losses_before;          // each link's losses() when resolved

  bool empty() const { return devices.empty(); }
  // Ok while none of the servers lost a connection since they were resolved; else Unavailable naming it.
  Status check() const;
  // "rpc:N" for one of these devices, "" for any other.
  std::string id_of(const ggml_backend_device* dev) const;
};

// Errors name the server: Unavailable (down, busy, lost while connecting), FailedPrecondition (another
// protocol version, no devices), Unsupported (this llama.cpp build has no RPC backend).
Result<RemoteDevices> resolve_remote_devices(const std::vector<hw::RpcEndpoint>& servers);

}  // namespace gantry::llama

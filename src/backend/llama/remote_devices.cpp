#include "gantry/backend/llama/remote_devices.h"

#include <fmt/format.h>
#include <ggml-backend.h>

#include "backend/llama/runtime_init.h"
#include "gantry/hw/registry.h"

namespace gantry::llama {

Status RemoteDevices::check() const {
  for (size_t i = 0; i < links.size(); ++i) GANTRY_RETURN_IF_ERROR(links[i]->check(losses_before[i]));
  return Status::Ok();
}

std::string RemoteDevices::id_of(const ggml_backend_device* dev) const {
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i] == dev) return ids[i];
  return {};
}

Result<RemoteDevices> resolve_remote_devices(const std::vector<hw::RpcEndpoint>& servers) {
  ensure_llama_runtime();
  ggml_backend_reg_t reg = ggml_backend_reg_by_name("RPC");
  using AddServer = ggml_backend_reg_t (*)(const char* endpoint);
  auto add_server =
      reg ? reinterpret_cast<AddServer>(ggml_backend_reg_get_proc_address(reg, "ggml_backend_rpc_add_server"))
          : nullptr;
  if (add_server == nullptr) {
    return Unsupported(
        "this llama.cpp build has no RPC backend (built without GGML_RPC=ON): run scripts/setup.sh to "
        "rebuild "
        "it");
  }
  RemoteDevices out;
  for (const auto& e : servers) {
    GANTRY_ASSIGN_OR_RETURN(std::shared_ptr<RpcLink> link, RpcLink::get(e));
    // A connection this process holds is the server's only one: a probe would wait behind it.
    if (link->connections() == 0) {
      hw::RpcProbeOptions o;
      o.measure_link = false;
      GANTRY_RETURN_IF_ERROR(hw::probe_rpc_server(e, o).status());
    }
    const uint64_t before = link->losses();
    ggml_backend_reg_t server = add_server(link->relay_endpoint().c_str());
    GANTRY_RETURN_IF_ERROR(link->check(before));
    if (server == nullptr || ggml_backend_reg_dev_count(server) == 0) {
      return FailedPrecondition(fmt::format("RPC server {} serves no device", e.text()));
    }
    for (size_t i = 0; i < ggml_backend_reg_dev_count(server); ++i) {
      out.ids.push_back(hw::memory_device_id(hw::kFamilyRpc, static_cast<int>(out.devices.size())));
      out.server_of.push_back(out.links.size());
      out.index_on_server.push_back(static_cast<int>(i));
      out.devices.push_back(ggml_backend_reg_dev_get(server, i));
    }
    out.links.push_back(std::move(link));
    out.losses_before.push_back(before);
  }
  return out;
}

}  // namespace gantry::llama

#include "gantry/backend/llama/rpc_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ggml-backend-impl.h>
#include <ggml-backend.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "backend/llama/runtime_init.h"
#include "gantry/hw/rpc_wire.h"

namespace gantry::llama {
namespace {

// A served device whose reported memory is capped (--memory): a copy of the real device's interface with
// get_memory, get_props and init_backend wrapped; every other call goes to the real device's functions with
// the real device's context. ggml's server asks a backend's device for its memory
// (rpc_server::get_device_memory), so the backends it serves carry the capped device.
struct Capped {
  ggml_backend_dev_t real;
  uint64_t cap;
};
std::mutex g_capped_mu;
std::map<const ggml_backend_device*, Capped>& capped_devices() {
  static auto* m = new std::map<const ggml_backend_device*, Capped>();  // lives as long as the devices
  return *m;
}
Capped capped_of(ggml_backend_dev_t dev) {
  std::lock_guard lock(g_capped_mu);
  return capped_devices().at(dev);
}

void capped_memory(ggml_backend_dev_t dev, size_t* free, size_t* total) {
  const Capped c = capped_of(dev);
  c.real->iface.get_memory(c.real, free, total);
  *total = std::min<uint64_t>(*total, c.cap);
  *free = std::min<uint64_t>(*free, c.cap);
}

void capped_props(ggml_backend_dev_t dev, ggml_backend_dev_props* props) {
  const Capped c = capped_of(dev);
  c.real->iface.get_props(c.real, props);
  props->memory_total = std::min<uint64_t>(props->memory_total, c.cap);
  props->memory_free = std::min<uint64_t>(props->memory_free, c.cap);
}

ggml_backend_t capped_init(ggml_backend_dev_t dev, const char* params) {
  const Capped c = capped_of(dev);
  ggml_backend_t backend = c.real->iface.init_backend(c.real, params);
  if (backend) backend->device = dev;
  return backend;
}

ggml_backend_dev_t cap_device(ggml_backend_dev_t real, uint64_t cap) {
  auto* dev = new ggml_backend_device{real->iface, real->reg, real->context};  // never freed: served forever
  dev->iface.get_memory = capped_memory;
  dev->iface.get_props = capped_props;
  dev->iface.init_backend = capped_init;
  std::lock_guard lock(g_capped_mu);
  capped_devices()[dev] = Capped{real, cap};
  return dev;
}

std::string available_devices() {
  std::vector<std::string> names;
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i)
    names.push_back(ggml_backend_dev_name(ggml_backend_dev_get(i)));
  return fmt::format("{}", fmt::join(names, ", "));
}

Result<std::vector<ggml_backend_dev_t>> select_devices(const RpcServerOptions& o) {
  ensure_llama_runtime();
  std::vector<ggml_backend_dev_t> out;
  for (const auto& name : o.devices) {
    ggml_backend_dev_t dev = ggml_backend_dev_by_name(name.c_str());
    if (!dev) return NotFound(fmt::format("no device '{}' here (available: {})", name, available_devices()));
    if (std::find(out.begin(), out.end(), dev) != out.end())
      return InvalidArgument(fmt::format("device '{}' is named twice", name));
    out.push_back(dev);
  }
  if (out.empty()) {
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
      ggml_backend_dev_t dev = ggml_backend_dev_get(i);
      const auto type = ggml_backend_dev_type(dev);
      if (type != GGML_BACKEND_DEVICE_TYPE_CPU && type != GGML_BACKEND_DEVICE_TYPE_ACCEL) out.push_back(dev);
    }
  }
  if (out.empty()) {
    if (ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU)) out.push_back(cpu);
  }
  if (out.empty()) return NotFound("ggml sees no device on this machine");
  if (o.memory_bytes) {
    for (auto& dev : out) dev = cap_device(dev, *o.memory_bytes);
  }
  return out;
}

}  // namespace

Result<std::vector<ServedDevice>> served_devices(const RpcServerOptions& options) {
  GANTRY_ASSIGN_OR_RETURN(auto devices, select_devices(options));
  std::vector<ServedDevice> out;
  for (ggml_backend_dev_t dev : devices) {
    ServedDevice d;
    d.name = ggml_backend_dev_name(dev);
    d.description = ggml_backend_dev_description(dev);
    size_t free = 0, total = 0;
    ggml_backend_dev_memory(dev, &free, &total);
    d.free_bytes = free;
    d.total_bytes = total;
    out.push_back(std::move(d));
  }
  return out;
}

Status check_rpc_server(const RpcServerOptions& o) {
  in_addr addr{};
  if (inet_pton(AF_INET, o.host.c_str(), &addr) != 1) {
    return InvalidArgument(fmt::format(
        "--host '{}' must be an IPv4 address (ggml's RPC server binds with inet_addr; use 127.0.0.1 for "
        "this machine only)",
        o.host));
  }
  if (o.port == 0) return InvalidArgument("--port must be 1..65535");
  {
    // ggml's own failure to bind says only "Failed to create server socket": try first, to say why.
    auto probe = hw::rpc::Socket::listen(o.host, o.port);
    if (!probe.ok()) return probe.status();
  }
  if (!o.cache_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.cache_dir, ec);
    if (ec || !std::filesystem::is_directory(o.cache_dir)) {
      return IoError(fmt::format("--cache {}: cannot create the directory: {}", o.cache_dir, ec.message()));
    }
  }
  return Status::Ok();
}

Status run_rpc_server(const RpcServerOptions& o) {
  GANTRY_ASSIGN_OR_RETURN(auto devices, select_devices(o));
  ggml_backend_reg_t reg = ggml_backend_reg_by_name("RPC");
  using StartServer = void (*)(const char*, const char*, size_t, size_t, ggml_backend_dev_t*);
  auto start = reg ? reinterpret_cast<StartServer>(
                         ggml_backend_reg_get_proc_address(reg, "ggml_backend_rpc_start_server"))
                   : nullptr;
  if (!start) {
    return Unsupported(
        "this llama.cpp build has no RPC backend (built without GGML_RPC=ON): run scripts/setup.sh");
  }
  const int threads =
      o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency() / 2));
  // Cache paths are joined as directory / hash by ggml (std::filesystem), so a trailing '/' is not needed.
  const std::string endpoint = o.host + ":" + std::to_string(o.port);
  start(endpoint.c_str(), o.cache_dir.empty() ? nullptr : o.cache_dir.c_str(), static_cast<size_t>(threads),
        devices.size(), devices.data());
  return Unavailable(fmt::format("the RPC server on {} stopped (see the messages above)", endpoint));
}

}  // namespace gantry::llama

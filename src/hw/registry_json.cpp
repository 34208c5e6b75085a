#include "gantry/hw/registry_json.h"

#include <stdexcept>

#include "gantry/core/json.h"
#include "gantry/hw/advice.h"

namespace gantry::hw {
namespace {

using nlohmann::json;

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json nvlinks_to_json(const std::vector<NvLink>& links) {
  json out = json::array();
  for (const NvLink& l : links) {
    out.push_back({{"index", l.index},
                   {"active", l.active},
                   {"version", opt(l.version)},
                   {"peer_pci_bus_id", opt(l.peer_pci_bus_id)},
                   {"peer_type", opt(l.peer_type)}});
  }
  return out;
}

json remote_to_json(const std::optional<RemoteLink>& r) {
  if (!r) return nullptr;
  return {{"endpoint", r->endpoint},
          {"device_index", r->device_index},
          {"protocol", r->protocol},
          {"round_trip_s", opt(r->round_trip_s)},
          {"upload_bytes_per_s", opt(r->upload_bytes_per_s)},
          {"download_bytes_per_s", opt(r->download_bytes_per_s)}};
}

json device_to_json(const Device& d) {
  return json{{"id", d.id},
              {"kind", device_kind_name(d.kind)},
              {"family", d.family},
              {"vendor", d.vendor},
              {"name", d.name},
              {"uuid", opt(d.uuid)},
              {"pci_bus_id", opt(d.pci_bus_id)},
              {"pci_vendor_id", opt(d.pci_vendor_id)},
              {"pci_device_id", opt(d.pci_device_id)},
              {"numa_node", opt(d.numa_node)},
              {"memory_total_bytes", opt(d.memory_total_bytes)},
              {"memory_free_bytes", opt(d.memory_free_bytes)},
              {"memory_used_bytes", opt(d.memory_used_bytes)},
              {"compute_capability", opt(d.compute_capability)},
              {"arch", opt(d.arch)},
              {"driver_version", opt(d.driver_version)},
              {"cuda_driver_version", opt(d.cuda_driver_version)},
              {"pcie_generation", opt(d.pcie_generation)},
              {"pcie_width", opt(d.pcie_width)},
              {"mig_enabled", opt(d.mig_enabled)},
              {"power_watts", opt(d.power_watts)},
              {"temperature_c", opt(d.temperature_c)},
              {"utilization_percent", opt(d.utilization_percent)},
              {"cores", opt(d.cores)},
              {"sources", d.sources},
              {"memory_bandwidth_bytes_per_s", opt(d.memory_bandwidth_bytes_per_s)},
              {"memory_bandwidth_source", opt(d.memory_bandwidth_source)},
              {"pcie_bandwidth_bytes_per_s", opt(d.pcie_bandwidth_bytes_per_s)},
              {"nvlinks", nvlinks_to_json(d.nvlinks)},
              {"xgmi_hive_id", opt(d.xgmi_hive_id)},
              {"remote", remote_to_json(d.remote)},
              {"available", d.available},
              {"unavailable_reason", opt(d.unavailable_reason)}};
}

json io_to_json(const SystemIo& io) {
  json peers = json::array();
  for (const PeerLink& p : io.peers) {
    peers.push_back({{"a", p.a},
                     {"b", p.b},
                     {"type", p.type},
                     {"links", opt(p.links)},
                     {"bandwidth_bytes_per_s", opt(p.bandwidth_bytes_per_s)}});
  }
  json storage = json::array();
  for (const BlockDevice& b : io.storage) {
    storage.push_back({{"name", b.name},
                       {"model", opt(b.model)},
                       {"size_bytes", opt(b.size_bytes)},
                       {"rotational", opt(b.rotational)},
                       {"removable", b.removable},
                       {"nvme", b.nvme},
                       {"pci_bus_id", opt(b.pci_bus_id)},
                       {"link_bytes_per_s", opt(b.link_bytes_per_s)}});
  }
  json network = json::array();
  for (const NetInterface& n : io.network) {
    network.push_back({{"name", n.name},
                       {"speed_bytes_per_s", opt(n.speed_bytes_per_s)},
                       {"operstate", opt(n.operstate)},
                       {"driver", opt(n.driver)},
                       {"pci_bus_id", opt(n.pci_bus_id)},
                       {"rdma_devices", n.rdma_devices}});
  }
  json rdma = json::array();
  for (const RdmaDevice& r : io.rdma) {
    rdma.push_back({{"name", r.name},
                    {"pci_bus_id", opt(r.pci_bus_id)},
                    {"state", opt(r.state)},
                    {"link_layer", opt(r.link_layer)},
                    {"rate_bytes_per_s", opt(r.rate_bytes_per_s)},
                    {"ports", r.ports}});
  }
  return json{{"host_memory_bandwidth",
               {{"bytes_per_s", opt(io.memory.bytes_per_s)},
                {"source", io.memory.source},
                {"detail", opt(io.memory.detail)},
                {"measured_bytes_per_s", opt(io.memory.measured_bytes_per_s)}}},
              {"peers", peers},
              {"storage", storage},
              {"network", network},
              {"rdma", rdma}};
}

// Reading: a FieldError names the JSON path that has the wrong shape.
struct FieldError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void bad(const std::string& path, const char* expected) {
  throw FieldError("registry JSON field '" + path + "' must be " + expected);
}

const json& member(const json& obj, const char* key, const std::string& path) {
  static const json kNull;
  if (!obj.is_object()) bad(path, "an object");
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

template <typename T>
T as(const json& j, const std::string& path) {
  if constexpr (std::is_same_v<T, std::string>) {
    if (!j.is_string()) bad(path, "a string");
    return j.get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) bad(path, "true or false");
    return j.get<bool>();
  } else if constexpr (std::is_same_v<T, double>) {
    if (!j.is_number()) bad(path, "a number");
    return j.get<double>();
  } else if constexpr (std::is_unsigned_v<T>) {
    if (!j.is_number_unsigned()) bad(path, "a non-negative integer");
    return j.get<T>();
  } else {
    if (!j.is_number_integer()) bad(path, "an integer");
    return j.get<T>();
  }
}

template <typename T>
std::optional<T> get_opt(const json& obj, const char* key, const std::string& path) {
  const json& j = member(obj, key, path);
  if (j.is_null()) return std::nullopt;
  return as<T>(j, path + "." + key);
}

template <typename T>
T get(const json& obj, const char* key, const std::string& path) {
  const json& j = member(obj, key, path);
  if (j.is_null()) bad(path + "." + key, "present");
  return as<T>(j, path + "." + key);
}

std::vector<std::string> get_strings(const json& obj, const char* key, const std::string& path) {
  const json& j = member(obj, key, path);
  std::vector<std::string> out;
  if (j.is_null()) return out;
  if (!j.is_array()) bad(path + "." + key, "an array of strings");
  for (size_t i = 0; i < j.size(); ++i)
    out.push_back(as<std::string>(j[i], path + "." + key + "[" + std::to_string(i) + "]"));
  return out;
}

// Calls `f(item, path)` for each element of the array `key` (absent or null: none).
template <typename F>
void for_each_item(const json& obj, const char* key, const std::string& path, F f) {
  const json& arr = member(obj, key, path);
  if (arr.is_null()) return;
  if (!arr.is_array()) bad(path + "." + key, "an array");
  for (size_t i = 0; i < arr.size(); ++i) f(arr[i], path + "." + key + "[" + std::to_string(i) + "]");
}

Device device_from_json(const json& j, const std::string& p) {
  Device d;
  d.id = get<std::string>(j, "id", p);
  auto kind = parse_device_kind(get<std::string>(j, "kind", p));
  if (!kind.ok()) bad(p + ".kind", "one of cpu, gpu, npu, tpu, asic, remote");
  d.kind = *kind;
  d.family = get_opt<std::string>(j, "family", p).value_or("");
  d.vendor = get<std::string>(j, "vendor", p);
  d.name = get<std::string>(j, "name", p);
  d.uuid = get_opt<std::string>(j, "uuid", p);
  d.pci_bus_id = get_opt<std::string>(j, "pci_bus_id", p);
  d.pci_vendor_id = get_opt<uint32_t>(j, "pci_vendor_id", p);
  d.pci_device_id = get_opt<uint32_t>(j, "pci_device_id", p);
  d.numa_node = get_opt<int>(j, "numa_node", p);
  d.memory_total_bytes = get_opt<uint64_t>(j, "memory_total_bytes", p);
  d.memory_free_bytes = get_opt<uint64_t>(j, "memory_free_bytes", p);
  d.memory_used_bytes = get_opt<uint64_t>(j, "memory_used_bytes", p);
  d.compute_capability = get_opt<std::string>(j, "compute_capability", p);
  d.arch = get_opt<std::string>(j, "arch", p);
  d.driver_version = get_opt<std::string>(j, "driver_version", p);
  d.cuda_driver_version = get_opt<std::string>(j, "cuda_driver_version", p);
  d.pcie_generation = get_opt<int>(j, "pcie_generation", p);
  d.pcie_width = get_opt<int>(j, "pcie_width", p);
  d.mig_enabled = get_opt<bool>(j, "mig_enabled", p);
  d.power_watts = get_opt<double>(j, "power_watts", p);
  d.temperature_c = get_opt<int>(j, "temperature_c", p);
  d.utilization_percent = get_opt<int>(j, "utilization_percent", p);
  d.cores = get_opt<int>(j, "cores", p);
  d.sources = get_strings(j, "sources", p);
  d.memory_bandwidth_bytes_per_s = get_opt<uint64_t>(j, "memory_bandwidth_bytes_per_s", p);
  d.memory_bandwidth_source = get_opt<std::string>(j, "memory_bandwidth_source", p);
  d.pcie_bandwidth_bytes_per_s = get_opt<uint64_t>(j, "pcie_bandwidth_bytes_per_s", p);
  d.xgmi_hive_id = get_opt<std::string>(j, "xgmi_hive_id", p);
  d.available = get_opt<bool>(j, "available", p).value_or(true);  // documents before it had usable ones only
  d.unavailable_reason = get_opt<std::string>(j, "unavailable_reason", p);
  if (const json& r = member(j, "remote", p); !r.is_null()) {
    const std::string rp = p + ".remote";
    if (!r.is_object()) bad(rp, "an object or null");
    RemoteLink link;
    link.endpoint = get<std::string>(r, "endpoint", rp);
    link.device_index = get<int>(r, "device_index", rp);
    link.protocol = get<std::string>(r, "protocol", rp);
    link.round_trip_s = get_opt<double>(r, "round_trip_s", rp);
    link.upload_bytes_per_s = get_opt<uint64_t>(r, "upload_bytes_per_s", rp);
    link.download_bytes_per_s = get_opt<uint64_t>(r, "download_bytes_per_s", rp);
    d.remote = std::move(link);
  }
  for_each_item(j, "nvlinks", p, [&](const json& l, const std::string& lp) {
    NvLink n;
    n.index = get<int>(l, "index", lp);
    n.active = get<bool>(l, "active", lp);
    n.version = get_opt<std::string>(l, "version", lp);
    n.peer_pci_bus_id = get_opt<std::string>(l, "peer_pci_bus_id", lp);
    n.peer_type = get_opt<std::string>(l, "peer_type", lp);
    d.nvlinks.push_back(std::move(n));
  });
  return d;
}

// A schema-1 document has no "io": the defaults (unknown, empty) stand.
SystemIo io_from_json(const json& j) {
  SystemIo io;
  if (j.is_null()) return io;
  const std::string p = "io";
  const json& mem = member(j, "host_memory_bandwidth", p);
  if (!mem.is_null()) {
    const std::string mp = p + ".host_memory_bandwidth";
    io.memory.bytes_per_s = get_opt<uint64_t>(mem, "bytes_per_s", mp);
    io.memory.source = get_opt<std::string>(mem, "source", mp).value_or("unknown");
    io.memory.detail = get_opt<std::string>(mem, "detail", mp);
    io.memory.measured_bytes_per_s = get_opt<uint64_t>(mem, "measured_bytes_per_s", mp);
  }
  for_each_item(j, "peers", p, [&](const json& e, const std::string& ep) {
    PeerLink l;
    l.a = get<std::string>(e, "a", ep);
    l.b = get<std::string>(e, "b", ep);
    l.type = get<std::string>(e, "type", ep);
    l.links = get_opt<int>(e, "links", ep);
    l.bandwidth_bytes_per_s = get_opt<uint64_t>(e, "bandwidth_bytes_per_s", ep);
    io.peers.push_back(std::move(l));
  });
  for_each_item(j, "storage", p, [&](const json& e, const std::string& ep) {
    BlockDevice b;
    b.name = get<std::string>(e, "name", ep);
    b.model = get_opt<std::string>(e, "model", ep);
    b.size_bytes = get_opt<uint64_t>(e, "size_bytes", ep);
    b.rotational = get_opt<bool>(e, "rotational", ep);
    b.removable = get_opt<bool>(e, "removable", ep).value_or(false);
    b.nvme = get_opt<bool>(e, "nvme", ep).value_or(false);
    b.pci_bus_id = get_opt<std::string>(e, "pci_bus_id", ep);
    b.link_bytes_per_s = get_opt<uint64_t>(e, "link_bytes_per_s", ep);
    io.storage.push_back(std::move(b));
  });
  for_each_item(j, "network", p, [&](const json& e, const std::string& ep) {
    NetInterface n;
    n.name = get<std::string>(e, "name", ep);
    n.speed_bytes_per_s = get_opt<uint64_t>(e, "speed_bytes_per_s", ep);
    n.operstate = get_opt<std::string>(e, "operstate", ep);
    n.driver = get_opt<std::string>(e, "driver", ep);
    n.pci_bus_id = get_opt<std::string>(e, "pci_bus_id", ep);
    n.rdma_devices = get_strings(e, "rdma_devices", ep);
    io.network.push_back(std::move(n));
  });
  for_each_item(j, "rdma", p, [&](const json& e, const std::string& ep) {
    RdmaDevice r;
    r.name = get<std::string>(e, "name", ep);
    r.pci_bus_id = get_opt<std::string>(e, "pci_bus_id", ep);
    r.state = get_opt<std::string>(e, "state", ep);
    r.link_layer = get_opt<std::string>(e, "link_layer", ep);
    r.rate_bytes_per_s = get_opt<uint64_t>(e, "rate_bytes_per_s", ep);
    r.ports = get_opt<int>(e, "ports", ep).value_or(0);
    io.rdma.push_back(std::move(r));
  });
  return io;
}

// `newer`: the document's schema is newer than this Gantry's: a device it cannot describe (a kind added
// since) is left out with a warning instead of failing the whole document.
Registry parse_registry(const json& j, bool newer) {
  Registry r;
  if (!j.is_object()) bad("(root)", "an object");
  r.schema_version = get<int>(j, "schema_version", "");
  const json& host = member(j, "host", "");
  r.host.memory_total_bytes = get_opt<uint64_t>(host, "memory_total_bytes", "host");
  r.host.memory_available_bytes = get_opt<uint64_t>(host, "memory_available_bytes", "host");
  r.host.memory_limit_bytes = get_opt<uint64_t>(host, "memory_limit_bytes", "host");
  r.host.cpu_quota_cores = get_opt<double>(host, "cpu_quota_cores", "host");
  r.host.cgroup_version = get_opt<std::string>(host, "cgroup_version", "host");

  const json& cpu = member(j, "cpu", "");
  r.cpu.vendor = get_opt<std::string>(cpu, "vendor", "cpu").value_or("");
  r.cpu.model = get_opt<std::string>(cpu, "model", "cpu").value_or("");
  r.cpu.architecture = get_opt<std::string>(cpu, "architecture", "cpu").value_or("");
  r.cpu.sockets = get<int>(cpu, "sockets", "cpu");
  r.cpu.physical_cores = get<int>(cpu, "physical_cores", "cpu");
  r.cpu.logical_cores = get<int>(cpu, "logical_cores", "cpu");
  r.cpu.isa = get_strings(cpu, "isa", "cpu");
  r.cpu.numa_nodes = get_opt<int>(cpu, "numa_nodes", "cpu").value_or(0);
  const json& cache = member(cpu, "cache", "cpu");
  if (!cache.is_null()) {
    r.cpu.cache.l1d_bytes = get_opt<uint64_t>(cache, "l1d_bytes", "cpu.cache");
    r.cpu.cache.l1i_bytes = get_opt<uint64_t>(cache, "l1i_bytes", "cpu.cache");
    r.cpu.cache.l2_bytes = get_opt<uint64_t>(cache, "l2_bytes", "cpu.cache");
    r.cpu.cache.l3_bytes = get_opt<uint64_t>(cache, "l3_bytes", "cpu.cache");
  }

  const json& devices = member(j, "devices", "");
  if (!devices.is_array()) bad("devices", "an array");
  for (size_t i = 0; i < devices.size(); ++i) {
    const std::string path = "devices[" + std::to_string(i) + "]";
    if (!newer) {
      r.devices.push_back(device_from_json(devices[i], path));
      continue;
    }
    try {
      r.devices.push_back(device_from_json(devices[i], path));
    } catch (const FieldError& e) {
      r.warnings.push_back(std::string("left out ") + path + " of the newer registry document: " + e.what());
    }
  }

  if (const json& un = member(j, "unavailable_devices", ""); !un.is_null()) {
    if (!un.is_array()) bad("unavailable_devices", "an array");
    for (size_t i = 0; i < un.size(); ++i)
      r.unavailable.push_back(device_from_json(un[i], "unavailable_devices[" + std::to_string(i) + "]"));
  }
  r.io = io_from_json(member(j, "io", ""));

  const json& env = member(j, "environment", "");
  if (!env.is_null()) {
    r.environment.container = get_opt<std::string>(env, "container", "environment");
    r.environment.orchestrator = get_opt<std::string>(env, "orchestrator", "environment");
    r.environment.cloud = get_opt<std::string>(env, "cloud", "environment");
    const json& dmi = member(env, "dmi", "environment");
    if (!dmi.is_null()) {
      r.environment.sys_vendor = get_opt<std::string>(dmi, "sys_vendor", "environment.dmi");
      r.environment.product_name = get_opt<std::string>(dmi, "product_name", "environment.dmi");
      r.environment.bios_vendor = get_opt<std::string>(dmi, "bios_vendor", "environment.dmi");
    }
    r.environment.virtualized = get_opt<bool>(env, "virtualized", "environment").value_or(false);
    r.environment.sysroot = get_opt<std::string>(env, "sysroot", "environment").value_or("/");
    const json& vis = member(env, "visible_devices", "environment");
    if (!vis.is_null()) {
      if (!vis.is_object()) bad("environment.visible_devices", "an object");
      for (auto it = vis.begin(); it != vis.end(); ++it)
        r.environment.visible_devices[it.key()] =
            as<std::string>(it.value(), "environment.visible_devices." + it.key());
    }
  }
  {
    std::vector<std::string> left_out = std::move(r.warnings);
    r.warnings = get_strings(j, "warnings", "");
    r.warnings.insert(r.warnings.end(), left_out.begin(), left_out.end());
  }
  const json& timings = member(j, "timings_ms", "");
  if (!timings.is_null()) {
    if (!timings.is_object()) bad("timings_ms", "an object");
    for (auto it = timings.begin(); it != timings.end(); ++it)
      r.timings_ms[it.key()] = as<double>(it.value(), "timings_ms." + it.key());
  }
  return r;
}

// Derived from the registry (gantry/hw/advice.h), so never read back: each device's own memory and the
// precisions advised for it.
json advice_to_json(const Registry& r, const Device& d) {
  const DeviceMemory m = device_memory(r, d);
  const PrecisionAdvice a = precision_advice(d);
  return {{"memory_bytes", opt(m.bytes)},
          {"memory_source", m.source},
          {"memory_reason", m.reason.empty() ? json(nullptr) : json(m.reason)},
          {"precisions", a.precisions},
          {"assumption", a.assumption}};
}

json totals_to_json(const Registry& r) {
  const Totals t = registry_totals(r);
  return {{"total_memory_bytes", t.total_memory_bytes},
          {"total_accelerator_memory_bytes", t.total_accelerator_memory_bytes},
          {"has_accelerator", t.has_accelerator},
          {"memory_unknown", t.memory_unknown}};
}

}  // namespace

nlohmann::json registry_to_json(const Registry& r) {
  json devices = json::array();
  for (const Device& d : r.devices) {
    json dj = device_to_json(d);
    dj["advice"] = advice_to_json(r, d);
    devices.push_back(std::move(dj));
  }
  json unavailable = json::array();
  for (const Device& d : r.unavailable) unavailable.push_back(device_to_json(d));
  return json{
      {"schema_version", r.schema_version},
      {"host",
       {{"memory_total_bytes", opt(r.host.memory_total_bytes)},
        {"memory_available_bytes", opt(r.host.memory_available_bytes)},
        {"memory_limit_bytes", opt(r.host.memory_limit_bytes)},
        {"cpu_quota_cores", opt(r.host.cpu_quota_cores)},
        {"cgroup_version", opt(r.host.cgroup_version)}}},
      {"cpu",
       {{"vendor", r.cpu.vendor},
        {"model", r.cpu.model},
        {"architecture", r.cpu.architecture},
        {"sockets", r.cpu.sockets},
        {"physical_cores", r.cpu.physical_cores},
        {"logical_cores", r.cpu.logical_cores},
        {"isa", r.cpu.isa},
        {"cache",
         {{"l1d_bytes", opt(r.cpu.cache.l1d_bytes)},
          {"l1i_bytes", opt(r.cpu.cache.l1i_bytes)},
          {"l2_bytes", opt(r.cpu.cache.l2_bytes)},
          {"l3_bytes", opt(r.cpu.cache.l3_bytes)}}},
        {"numa_nodes", r.cpu.numa_nodes}}},
      {"devices", devices},
      {"unavailable_devices", unavailable},
      {"io", io_to_json(r.io)},
      {"environment",
       {{"container", opt(r.environment.container)},
        {"orchestrator", opt(r.environment.orchestrator)},
        {"cloud", opt(r.environment.cloud)},
        {"dmi",
         {{"sys_vendor", opt(r.environment.sys_vendor)},
          {"product_name", opt(r.environment.product_name)},
          {"bios_vendor", opt(r.environment.bios_vendor)}}},
        {"virtualized", r.environment.virtualized},
        {"visible_devices", r.environment.visible_devices},
        {"sysroot", r.environment.sysroot}}},
      {"totals", totals_to_json(r)},
      {"warnings", r.warnings},
      {"timings_ms", r.timings_ms},
  };
}

Result<Registry> registry_from_json(const nlohmann::json& j) {
  bool newer = false;
  int64_t version = 0;
  if (j.is_object()) {
    auto it = j.find("schema_version");
    if (it == j.end() || !it->is_number_integer()) {
      return Corrupt(
          "registry JSON has no integer 'schema_version'; is this the output of 'gantry detect --json'?");
    }
    const auto v = it->get<int64_t>();
    if (v < 1) return Corrupt("registry JSON has invalid schema_version " + std::to_string(v));
    newer = v > kRegistrySchemaVersion;
    if (newer) version = v;
  }
  const std::string newer_note = newer ? " (the document has schema_version " + std::to_string(version) +
                                             ", newer than the " + std::to_string(kRegistrySchemaVersion) +
                                             " this Gantry reads; upgrade Gantry to read it)"
                                       : "";
  try {
    Registry r = parse_registry(j, newer);
    if (newer) {
      // Read as this schema: fields added since are ignored, and the registry says so.
      r.warnings.insert(r.warnings.begin(),
                        "registry JSON has schema_version " + std::to_string(version) + ", newer than the " +
                            std::to_string(kRegistrySchemaVersion) + " this Gantry reads: read as schema " +
                            std::to_string(kRegistrySchemaVersion) +
                            ", fields added since are ignored (upgrade Gantry to read them)");
      r.schema_version = kRegistrySchemaVersion;
    }
    return r;
  } catch (const FieldError& e) {
    return Corrupt(e.what() + newer_note);
  } catch (const nlohmann::json::exception& e) {
    return Corrupt(std::string("registry JSON: ") + e.what() + newer_note);
  }
}

Result<Registry> registry_from_json_text(const std::string& text) {
  auto j = parse_json<json>(text, "registry JSON");
  if (!j.ok()) return Corrupt(j.status().message());
  return registry_from_json(*j);
}

}  // namespace gantry::hw

// detect(): runs the probes concurrently, merges devices seen twice (same PCI address), applies
// the visible-device variables and names each device.
#include "gantry/hw/detect.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <future>

#include "probes.h"

namespace gantry::hw {
namespace {

using internal::ProbeOutput;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Timed {
  ProbeOutput output;
  double ms = 0;
};

// Runs `probe` on its own thread (async) or when its result is first asked for (deferred); an
// exception becomes a warning naming the probe.
std::future<Timed> launch(std::string name, std::launch policy, std::function<ProbeOutput()> probe) {
  return std::async(policy, [name = std::move(name), probe = std::move(probe)] {
    Timed t;
    const auto t0 = Clock::now();
    try {
      t.output = probe();
    } catch (const std::exception& e) {
      t.output = {};
      t.output.warnings.push_back("probe '" + name + "' failed: " + e.what());
    } catch (...) {
      t.output = {};
      t.output.warnings.push_back("probe '" + name + "' failed with an unknown exception");
    }
    t.ms = ms_since(t0);
    return t;
  });
}

template <typename T>
void fill(std::optional<T>& into, const std::optional<T>& from) {
  if (!into && from) into = from;
}

void merge_fields(Device& into, const Device& from) {
  fill(into.uuid, from.uuid);
  fill(into.pci_bus_id, from.pci_bus_id);
  fill(into.pci_vendor_id, from.pci_vendor_id);
  fill(into.pci_device_id, from.pci_device_id);
  fill(into.numa_node, from.numa_node);
  fill(into.memory_total_bytes, from.memory_total_bytes);
  fill(into.memory_free_bytes, from.memory_free_bytes);
  fill(into.memory_used_bytes, from.memory_used_bytes);
  fill(into.compute_capability, from.compute_capability);
  fill(into.arch, from.arch);
  fill(into.driver_version, from.driver_version);
  fill(into.cuda_driver_version, from.cuda_driver_version);
  fill(into.pcie_generation, from.pcie_generation);
  fill(into.pcie_width, from.pcie_width);
  fill(into.mig_enabled, from.mig_enabled);
  fill(into.power_watts, from.power_watts);
  fill(into.temperature_c, from.temperature_c);
  fill(into.utilization_percent, from.utilization_percent);
  fill(into.cores, from.cores);
  fill(into.xgmi_hive_id, from.xgmi_hive_id);
  if (into.nvlinks.empty()) into.nvlinks = from.nvlinks;
  for (const auto& s : from.sources) {
    if (std::find(into.sources.begin(), into.sources.end(), s) == into.sources.end())
      into.sources.push_back(s);
  }
}

bool has_source(const Device& d, std::string_view s) {
  return std::find(d.sources.begin(), d.sources.end(), s) != d.sources.end();
}

// Adds `d` unless an earlier probe saw the same device (same PCI address; for Vulkan devices
// without one, the one GPU with the same PCI vendor/device ids).
void merge_device(std::vector<Device>& all, Device d) {
  Device* same = nullptr;
  if (d.pci_bus_id) {
    for (Device& e : all) {
      if (e.pci_bus_id == d.pci_bus_id) same = &e;
    }
  } else if (d.family == kFamilyVulkan && d.pci_vendor_id && d.pci_device_id) {
    std::vector<Device*> candidates;
    for (Device& e : all) {
      if (e.kind == DeviceKind::kGpu && !has_source(e, "vulkan") && e.pci_vendor_id == d.pci_vendor_id &&
          e.pci_device_id == d.pci_device_id)
        candidates.push_back(&e);
    }
    if (!candidates.empty()) same = candidates.front();
  }
  if (same != nullptr) {
    merge_fields(*same, d);
  } else {
    all.push_back(std::move(d));
  }
}

// CUDA_VISIBLE_DEVICES-style selection: a comma list of indices or UUID prefixes. Selection stops at
// the first entry that matches nothing (CUDA's rule). "all" keeps everything; "none"/"void" none.
std::vector<Device> select_visible(const std::vector<Device>& devices, std::string_view spec) {
  spec = internal::trim(spec);
  if (spec == "all") return devices;
  std::vector<Device> out;
  if (spec == "none" || spec == "void" || spec.empty()) return out;
  std::vector<bool> taken(devices.size(), false);
  for (std::string_view entry : internal::split(spec, ',')) {
    entry = internal::trim(entry);
    std::optional<size_t> pick;
    if (auto idx = internal::parse_u64(entry)) {
      if (*idx < devices.size()) pick = *idx;
    } else if (!entry.empty()) {
      for (size_t i = 0; i < devices.size(); ++i) {
        if (devices[i].uuid && internal::starts_with(*devices[i].uuid, entry)) pick = i;
      }
    }
    if (!pick) break;
    if (!taken[*pick]) out.push_back(devices[*pick]);
    taken[*pick] = true;
  }
  return out;
}

// Keeps the devices of `family` that the visibility variables select, in their order; the others go to
// `hidden`, unavailable, with the variable that hid them.
void apply_visibility(const Machine& m, std::vector<Device>& devices, std::vector<Device>& hidden,
                      std::string_view family, std::initializer_list<const char*> vars) {
  std::vector<Device> selected, others;
  for (Device& d : devices) (d.family == family ? selected : others).push_back(std::move(d));
  for (const char* var : vars) {
    if (auto spec = m.getenv(var)) {
      if (std::string_view(var) == "NVIDIA_VISIBLE_DEVICES" && internal::trim(*spec).empty()) continue;
      std::vector<Device> kept = select_visible(selected, *spec);
      for (Device& d : selected) {
        if (std::find(kept.begin(), kept.end(), d) != kept.end()) continue;
        d.available = false;
        d.unavailable_reason = "hidden by " + std::string(var) + "=" + *spec;
        hidden.push_back(std::move(d));
      }
      selected = std::move(kept);
    }
  }
  devices = std::move(others);
  devices.insert(devices.end(), selected.begin(), selected.end());
}

std::string cpu_vendor_short(const std::string& vendor) {
  if (vendor == "GenuineIntel") return "intel";
  if (vendor == "AuthenticAMD") return "amd";
  return internal::to_lower(vendor);
}

Device cpu_device(const CpuInfo& cpu, const HostInfo& host) {
  Device d;
  d.id = "cpu:0";
  d.kind = DeviceKind::kCpu;
  d.family = std::string(kFamilyCpu);
  d.vendor = cpu_vendor_short(cpu.vendor);
  d.name = cpu.model.empty() ? "CPU" : cpu.model;
  d.memory_total_bytes = host.memory_total_bytes;
  if (host.memory_limit_bytes && (!d.memory_total_bytes || *host.memory_limit_bytes < *d.memory_total_bytes))
    d.memory_total_bytes = host.memory_limit_bytes;
  d.memory_free_bytes = host.memory_available_bytes;
  if (d.memory_free_bytes && d.memory_total_bytes && *d.memory_free_bytes > *d.memory_total_bytes)
    d.memory_free_bytes = d.memory_total_bytes;
  d.arch = cpu.architecture.empty() ? std::nullopt : std::optional<std::string>(cpu.architecture);
  d.cores = cpu.logical_cores;
  d.sources = {"procfs"};
  return d;
}

// Moves the CPU probe's findings into `reg`, with the CPU as its first device.
void take_cpu(Registry& reg, internal::CpuProbeOutput out, double ms) {
  reg.cpu = std::move(out.cpu);
  reg.host = std::move(out.host);
  reg.environment.virtualized = out.hypervisor;
  reg.timings_ms["cpu"] = ms;
  reg.warnings.insert(reg.warnings.end(), out.warnings.begin(), out.warnings.end());
  reg.devices.push_back(cpu_device(reg.cpu, reg.host));
}

// System I/O: sysfs reads of a few files per block/network device, after the devices are known (the peer
// matrix and the bandwidth figures need them).
void probe_io(const Machine& m, Registry& reg) {
  const auto t = Clock::now();
  try {
    reg.io.memory = internal::probe_host_memory(m, reg.cpu, reg.warnings);
    internal::annotate_bandwidth(reg.devices, reg.io.memory);
    reg.io.peers = internal::compute_peers(m, reg.devices);
    reg.io.storage = internal::probe_storage(m, reg.warnings);
    internal::probe_network(m, reg.io, reg.warnings);
  } catch (const std::exception& e) {
    reg.warnings.push_back(std::string("probe 'io' failed: ") + e.what());
  }
  reg.timings_ms["io"] = ms_since(t);
}

// Names a user may give for a probe, and the probe they select.
struct ProbeAlias {
  std::string_view name;
  std::string_view probe;
};
constexpr ProbeAlias kProbeAliases[] = {
    {"cpu", "cpu"},
    {"cuda", "cuda"},
    {"nvidia", "cuda"},
    {"rocm", "rocm"},
    {"amd", "rocm"},
    {"intel-gpu", "intel-gpu"},
    {"accel", "accel"},
    {"gaudi", "accel"},
    {"qaic", "accel"},
    {"intel-npu", "accel"},
    {"amd-xdna", "accel"},
    {"tpu", "tpu"},
    {"neuron", "neuron"},
    {"vulkan", "vulkan"},
    {"io", "io"},
    {"environment", "environment"},
    {"graphcore", "accel"},
    {"groq", "accel"},
    {"cerebras", "accel"},
    {"samsung-npu", "accel"},
    {"mediatek-apu", "accel"},
};

}  // namespace

const std::vector<std::string_view>& detect_probe_names() {
  static const std::vector<std::string_view> names = {"cpu", "cuda",   "rocm",   "intel-gpu", "accel",
                                                      "tpu", "neuron", "vulkan", "io",        "environment"};
  return names;
}

Result<std::vector<std::string>> parse_probe_names(std::string_view list, std::string_view flag) {
  std::vector<std::string> out;
  for (std::string_view entry : internal::split(list, ',')) {
    entry = internal::trim(entry);
    if (entry.empty()) continue;
    const std::string lower = internal::to_lower(std::string(entry));
    const ProbeAlias* found = nullptr;
    for (const auto& a : kProbeAliases)
      if (a.name == lower) found = &a;
    if (!found) {
      std::string known;
      for (auto n : detect_probe_names()) known += (known.empty() ? "" : ", ") + std::string(n);
      return InvalidArgument(std::string(flag) + ": unknown probe '" + std::string(entry) +
                             "' (known: " + known + "; gaudi, qaic, intel-npu and amd-xdna select accel)");
    }
    if (std::find(out.begin(), out.end(), found->probe) == out.end()) out.emplace_back(found->probe);
  }
  if (out.empty()) return InvalidArgument(std::string(flag) + " needs at least one probe name");
  return out;
}

bool probe_selected(const DetectOptions& options, std::string_view name) {
  if (name == "cpu") return true;
  if (name == "vulkan" && !options.use_vulkan) return false;
  auto has = [&](const std::vector<std::string>& list) {
    return std::find(list.begin(), list.end(), name) != list.end();
  };
  if (has(options.skip)) return false;
  return options.only.empty() || has(options.only);
}

Registry detect(const Machine& m, const LibraryLoader& loader, const DetectOptions& options) {
  const auto t0 = Clock::now();
  Registry reg;

  // Probes backed by a vendor library can block for tens of milliseconds in driver initialisation:
  // they get their own threads. Kernel-file probes take well under a millisecond each; on a busy or
  // small machine a thread's start-up and scheduling cost more than that (measured: see
  // bench/detect_vs_lscpu.sh), so they run on this thread unless options ask otherwise.
  const std::launch files = options.parallel_file_probes ? std::launch::async : std::launch::deferred;
  auto library_policy = [&](const char* soname) {
    return loader.open(soname).ok() ? std::launch::async : files;
  };

  std::shared_future<std::vector<internal::PciDevice>> pci;
  std::vector<std::string> pci_warnings;
  double pci_ms = 0;
  pci = std::async(files, [&] {
          const auto t = Clock::now();
          auto v = internal::scan_pci(m, pci_warnings);
          pci_ms = ms_since(t);
          return v;
        }).share();
  auto with_pci = [&](auto probe) { return [probe, pci] { return probe(pci.get()); }; };

  struct CpuResult {
    internal::CpuProbeOutput out;
    double ms = 0;
  };
  auto cpu_future = std::async(files, [&] {
    CpuResult r;
    const auto t = Clock::now();
    try {
      r.out = internal::probe_cpu(m, options.use_hwloc);
    } catch (const std::exception& e) {
      r.out.warnings.push_back(std::string("probe 'cpu' failed: ") + e.what());
    }
    r.ms = ms_since(t);
    return r;
  });

  std::vector<std::pair<std::string, std::future<Timed>>> probes;
  const bool vulkan = probe_selected(options, "vulkan");
  if (vulkan) {
    probes.emplace_back("vulkan", launch("vulkan", library_policy("libvulkan.so.1"),
                                         [&] { return internal::probe_vulkan(loader); }));
  }
  if (probe_selected(options, "cuda"))
    probes.emplace_back(
        "nvidia", launch("nvidia", library_policy("libnvidia-ml.so.1"),
                         with_pci([&](const auto& p) { return internal::probe_nvidia(m, loader, p); })));
  if (probe_selected(options, "rocm"))
    probes.emplace_back(
        "amd", launch("amd", files, with_pci([&](const auto& p) { return internal::probe_amd(m, p); })));
  if (probe_selected(options, "intel-gpu"))
    probes.emplace_back(
        "intel_gpu",
        launch("intel_gpu", files, with_pci([&](const auto& p) { return internal::probe_intel_gpu(m, p); })));
  if (probe_selected(options, "accel"))
    probes.emplace_back("accel", launch("accel", files, [&] { return internal::probe_accel(m); }));
  if (probe_selected(options, "tpu"))
    probes.emplace_back(
        "tpu", launch("tpu", files, with_pci([&](const auto& p) { return internal::probe_tpu(m, p); })));
  if (probe_selected(options, "neuron"))
    probes.emplace_back(
        "neuron",
        launch("neuron", files, with_pci([&](const auto& p) { return internal::probe_neuron(m, p); })));
  // Vendor-library devices first when merging: their values are the most complete.
  std::rotate(probes.begin(), probes.begin() + (vulkan ? 1 : 0), probes.end());

  // The environment probe is cheap: run it here while the others work.
  if (probe_selected(options, "environment")) {
    const auto t = Clock::now();
    try {
      reg.environment = internal::probe_environment(m, reg.warnings);
    } catch (const std::exception& e) {
      reg.warnings.push_back(std::string("probe 'environment' failed: ") + e.what());
    }
    reg.timings_ms["environment"] = ms_since(t);
  }

  CpuResult cpu = cpu_future.get();
  take_cpu(reg, std::move(cpu.out), cpu.ms);

  // Run the deferred (inline) probes first, so they overlap with the threaded ones.
  std::vector<Timed> results(probes.size());
  std::vector<bool> done(probes.size(), false);
  for (size_t i = 0; i < probes.size(); ++i) {
    if (probes[i].second.wait_for(std::chrono::seconds(0)) == std::future_status::deferred) {
      results[i] = probes[i].second.get();
      done[i] = true;
    }
  }
  std::vector<Device> accelerators, unavailable;
  for (size_t i = 0; i < probes.size(); ++i) {
    if (!done[i]) results[i] = probes[i].second.get();
    const std::string& name = probes[i].first;
    reg.timings_ms[name] = results[i].ms;
    for (auto& w : results[i].output.warnings) reg.warnings.push_back(name + ": " + w);
    for (auto& d : results[i].output.devices) merge_device(accelerators, std::move(d));
    for (auto& d : results[i].output.unavailable) unavailable.push_back(std::move(d));
  }
  try {
    pci.get();
  } catch (const std::exception& e) {
    reg.warnings.push_back(std::string("PCI scan failed: ") + e.what());
  }
  reg.timings_ms["pci"] = pci_ms;
  for (auto& w : pci_warnings) reg.warnings.push_back("pci: " + w);

  apply_visibility(m, accelerators, unavailable, kFamilyCuda,
                   {"NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"});
  apply_visibility(m, accelerators, unavailable, kFamilyRocm,
                   {"ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"});
  std::stable_sort(accelerators.begin(), accelerators.end(), [](const Device& a, const Device& b) {
    static constexpr std::string_view kOrder[] = {
        kFamilyCuda,   kFamilyRocm,      kFamilyTpu,  kFamilyGaudi,      kFamilyNeuron,
        kFamilyQaic,   kFamilyGraphcore, kFamilyGroq, kFamilyCerebras,   kFamilyIntelGpu,
        kFamilyVulkan, kFamilyIntelNpu,  kFamilyXdna, kFamilySamsungNpu, kFamilyMediatekApu};
    auto pos = [](const std::string& f) {
      return std::find(std::begin(kOrder), std::end(kOrder), f) - std::begin(kOrder);
    };
    return pos(a.family) < pos(b.family);
  });
  std::map<std::string, int> counters;
  for (Device& d : accelerators) {
    d.id = d.family + ":" + std::to_string(counters[d.family]++);
    reg.devices.push_back(std::move(d));
  }
  std::stable_sort(unavailable.begin(), unavailable.end(),
                   [](const Device& a, const Device& b) { return a.pci_bus_id < b.pci_bus_id; });
  counters.clear();
  for (Device& d : unavailable) {
    d.id = d.family + ":unavailable:" + std::to_string(counters[d.family]++);
    reg.unavailable.push_back(std::move(d));
  }
  if (probe_selected(options, "io")) probe_io(m, reg);
  reg.timings_ms["total"] = ms_since(t0);
  return reg;
}

Registry detect_host(const Machine& m) {
  const auto t0 = Clock::now();
  Registry reg;
  internal::CpuProbeOutput out;
  try {
    out = internal::probe_cpu(m, /*use_hwloc=*/false);
  } catch (const std::exception& e) {
    out.warnings.push_back(std::string("probe 'cpu' failed: ") + e.what());
  }
  take_cpu(reg, std::move(out), ms_since(t0));
  reg.io.memory = internal::probe_host_memory(m, reg.cpu, reg.warnings);
  internal::annotate_bandwidth(reg.devices, reg.io.memory);
  reg.environment.sysroot = m.root();
  reg.timings_ms["total"] = ms_since(t0);
  return reg;
}

Registry detect_local_host() {
  const char* sysroot = std::getenv("GANTRY_SYSROOT");  // NOLINT(concurrency-mt-unsafe)
  if (sysroot != nullptr && *sysroot != '\0' && std::string_view(sysroot) != "/")
    return detect_host(*make_disk_machine(sysroot));
  return detect_host(*make_disk_machine("/"));
}

Registry detect_local(const DetectOptions& options) {
  const char* sysroot = std::getenv("GANTRY_SYSROOT");  // NOLINT(concurrency-mt-unsafe)
  if (sysroot != nullptr && *sysroot != '\0' && std::string_view(sysroot) != "/") {
    auto machine = make_disk_machine(sysroot);
    auto loader = make_null_loader();
    return detect(*machine, *loader, options);
  }
  auto machine = make_disk_machine("/");
  auto loader = make_dl_loader();
  return detect(*machine, *loader, options);
}

}  // namespace gantry::hw

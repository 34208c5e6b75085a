// gantry detect: every compute device on this machine (or under --sysroot), as a table or JSON.
#include <fmt/format.h>

#include <iostream>
#include <optional>
#include <string>
#include <tuple>

#include "cli/commands.h"
#include "gantry/hw/bandwidth.h"
#include "gantry/hw/detect.h"
#include "gantry/hw/registry_json.h"
#include "gantry/hw/rpc.h"

namespace gantry::cli {
namespace {

struct DetectFlags {
  bool json = false;
  bool timing = false;
  bool no_vulkan = false;
  bool hwloc = false;
  bool measure_bandwidth = false;
  std::string sysroot;
  std::string only;  // comma lists of probe names (hw::detect_probe_names)
  std::string skip;
  std::vector<std::string> rpc;
};

std::string bytes_text(const std::optional<uint64_t>& b) {
  if (!b) return "unknown";
  const double gib = static_cast<double>(*b) / (1024.0 * 1024.0 * 1024.0);
  if (gib >= 1.0) return fmt::format("{:.1f} GiB", gib);
  return fmt::format("{:.0f} MiB", static_cast<double>(*b) / (1024.0 * 1024.0));
}

// The strongest vector extension, for the CPU row.
std::string cpu_capability(const hw::CpuInfo& cpu) {
  auto has = [&](std::string_view f) {
    return std::find(cpu.isa.begin(), cpu.isa.end(), f) != cpu.isa.end();
  };
  std::string level = cpu.architecture;
  for (const char* f : {"sse4_2", "avx", "avx2", "avx512f", "amx_tile", "asimd", "sve", "sve2", "sme"}) {
    if (has(f)) level = f;
  }
  return level;
}

void print_table(const hw::Registry& r) {
  const auto& c = r.cpu;
  fmt::print("CPU     {} ({} socket{}, {} cores, {} threads, {} NUMA node{})\n",
             c.model.empty() ? "unknown" : c.model, c.sockets, c.sockets == 1 ? "" : "s", c.physical_cores,
             c.logical_cores, c.numa_nodes, c.numa_nodes == 1 ? "" : "s");
  fmt::print("Memory  {} total, {} available", bytes_text(r.host.memory_total_bytes),
             bytes_text(r.host.memory_available_bytes));
  if (r.host.memory_limit_bytes) fmt::print(", container limit {}", bytes_text(r.host.memory_limit_bytes));
  if (r.host.cpu_quota_cores) fmt::print(", CPU quota {:.2f} cores", *r.host.cpu_quota_cores);
  fmt::print("\n");
  const auto& e = r.environment;
  fmt::print("Env     container={} orchestrator={} cloud={}{}\n", e.container.value_or("none"),
             e.orchestrator.value_or("none"), e.cloud.value_or("unknown"),
             e.virtualized ? " (virtual machine)" : "");
  for (const auto& [k, v] : e.visible_devices) fmt::print("        {}={}\n", k, v);
  fmt::print("\n{:<15} {:<5} {:<40} {:>11} {:>11} {:<12} {}\n", "ID", "KIND", "NAME", "MEM TOTAL", "MEM FREE",
             "CAPABILITY", "DRIVER");
  for (const auto& d : r.devices) {
    std::string cap = d.kind == hw::DeviceKind::kCpu ? cpu_capability(c)
                                                     : d.compute_capability.value_or(d.arch.value_or("-"));
    std::string driver = d.driver_version.value_or("-");
    if (d.cuda_driver_version) driver += " (CUDA " + *d.cuda_driver_version + ")";
    fmt::print("{:<15} {:<5} {:<40} {:>11} {:>11} {:<12} {}\n", d.id, hw::device_kind_name(d.kind), d.name,
               bytes_text(d.memory_total_bytes), bytes_text(d.memory_free_bytes), cap, driver);
  }
  if (!r.unavailable.empty()) {
    fmt::print("\nPresent but not usable here:\n");
    for (const auto& d : r.unavailable)
      fmt::print("  {:<40} {:<13} {}\n", d.name, d.pci_bus_id.value_or("-"),
                 d.unavailable_reason.value_or("-"));
  }
}

std::string rate_text(const std::optional<uint64_t>& b) {
  if (!b) return "unknown";
  return fmt::format("{:.1f} GB/s", static_cast<double>(*b) / 1e9);
}

// Short codes of the peer matrix (as nvidia-smi topo -m does): NV<links>, XGMI, SW (a common PCIe switch),
// HOST (one root complex or NUMA node), NUMA (crosses NUMA nodes), PCIE (path unknown).
std::string peer_code(const hw::PeerLink& p) {
  if (p.type == "nvlink") return p.links ? fmt::format("NV{}", *p.links) : "NV";
  if (p.type == "xgmi") return "XGMI";
  if (p.type == "pcie-switch") return "SW";
  if (p.type == "pcie-host") return "HOST";
  if (p.type == "cross-numa") return "NUMA";
  return "PCIE";
}

std::string storage_kind(const hw::BlockDevice& b) {
  if (b.nvme) return "NVMe";
  if (!b.rotational) return "kind unknown";
  return *b.rotational ? "rotational" : "SSD";
}

void print_io(const hw::Registry& r) {
  const auto& io = r.io;
  fmt::print("\nBandwidth  host memory {}", rate_text(io.memory.bytes_per_s));
  if (io.memory.bytes_per_s) fmt::print(" ({}: {})", io.memory.source, io.memory.detail.value_or(""));
  if (io.memory.measured_bytes_per_s)
    fmt::print(", measured {} (triad)", rate_text(io.memory.measured_bytes_per_s));
  fmt::print("\n");
  for (const auto& d : r.devices) {
    if (d.kind == hw::DeviceKind::kCpu || (!d.memory_bandwidth_bytes_per_s && !d.pcie_bandwidth_bytes_per_s))
      continue;
    fmt::print("           {:<12} memory {} ({}), PCIe {}\n", d.id, rate_text(d.memory_bandwidth_bytes_per_s),
               d.memory_bandwidth_source.value_or("no figure"), rate_text(d.pcie_bandwidth_bytes_per_s));
  }
  if (!io.peers.empty()) {
    std::vector<std::string> ids;
    for (const auto& p : io.peers) {
      for (const auto* id : {&p.a, &p.b})
        if (std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
    }
    fmt::print(
        "\nPeers      (NV<n>: NVLink x n, XGMI, SW: PCIe switch, HOST: same host bridge/NUMA node, NUMA: "
        "crosses NUMA, PCIE: path unknown)\n{:<11}",
        "");
    for (const auto& id : ids) fmt::print(" {:>8}", id);
    fmt::print("\n");
    for (const auto& row : ids) {
      fmt::print("{:<11}", row);
      for (const auto& col : ids) {
        std::string cell = row == col ? "X" : "-";
        for (const auto& p : io.peers) {
          if ((p.a == row && p.b == col) || (p.a == col && p.b == row)) cell = peer_code(p);
        }
        fmt::print(" {:>8}", cell);
      }
      fmt::print("\n");
    }
  }
  fmt::print("\nStorage   ");
  if (io.storage.empty()) fmt::print(" none visible");
  for (const auto& b : io.storage) {
    fmt::print(" {} ({}{}, {}{}{})", b.name, b.model ? *b.model + ", " : "", bytes_text(b.size_bytes),
               storage_kind(b), b.removable ? ", removable" : "",
               b.link_bytes_per_s ? ", link " + rate_text(b.link_bytes_per_s) : "");
  }
  fmt::print("\nNetwork   ");
  if (io.network.empty()) fmt::print(" none visible");
  for (const auto& n : io.network) {
    fmt::print(
        " {} ({}, {}{}{})", n.name,
        n.speed_bytes_per_s ? fmt::format("{:.0f} Gb/s", *n.speed_bytes_per_s * 8 / 1e9) : "speed unknown",
        n.operstate.value_or("?"), n.driver ? ", " + *n.driver : "",
        n.rdma_devices.empty() ? "" : ", RDMA " + fmt::format("{}", fmt::join(n.rdma_devices, "/")));
  }
  for (const auto& d : io.rdma) {
    fmt::print(
        "\nRDMA       {} ({}, {}, {})", d.name, d.state.value_or("?"), d.link_layer.value_or("?"),
        d.rate_bytes_per_s ? fmt::format("{:.0f} Gb/s", *d.rate_bytes_per_s * 8 / 1e9) : "rate unknown");
  }
  fmt::print("\n");
}

void print_remote(const hw::Registry& r) {
  bool any = false;
  for (const auto& d : r.devices) {
    if (!d.remote) continue;
    if (!any) fmt::print("\nRemote     (ggml RPC: no authentication, no encryption)\n");
    any = true;
    const auto& l = *d.remote;
    fmt::print("           {:<8} {} device {}, protocol {}, round trip {}, upload {}, download {}\n", d.id,
               l.endpoint, l.device_index, l.protocol,
               l.round_trip_s ? fmt::format("{:.3f} ms", *l.round_trip_s * 1e3) : "unknown",
               rate_text(l.upload_bytes_per_s), rate_text(l.download_bytes_per_s));
  }
}

void print_timings(const hw::Registry& r) {
  fmt::print("\nProbe timings (ms; NVML and Vulkan on their own threads):\n");
  for (const auto& [probe, ms] : r.timings_ms) fmt::print("  {:<12} {:8.3f}\n", probe, ms);
}

}  // namespace

void register_detect_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<DetectFlags>();
  auto* cmd = app.add_subcommand("detect", "List every compute device (CPU, GPUs, NPUs, TPUs, accelerators)");
  cmd->add_flag("--json", flags->json, "Print the registry as JSON (schema/registry.schema.json)");
  cmd->add_flag("--timing", flags->timing, "Print how long each probe took");
  cmd->add_option("--sysroot", flags->sysroot,
                  "Read /proc, /sys and /dev under DIR instead of / (also GANTRY_SYSROOT)")
      ->envname("GANTRY_SYSROOT")
      ->check(CLI::ExistingDirectory);
  cmd->add_flag("--no-vulkan", flags->no_vulkan,
                "Skip the Vulkan probe (creating an instance loads every driver)");
  std::string probe_names;
  for (auto n : hw::detect_probe_names()) probe_names += (probe_names.empty() ? "" : ",") + std::string(n);
  cmd->add_option(
         "--only", flags->only,
         "Run only these probes (comma list: " + probe_names + "); the CPU and host memory are always read")
      ->type_name("PROBES");
  cmd->add_option("--skip", flags->skip, "Skip these probes (same names as --only)")->type_name("PROBES");
  cmd->add_flag("--hwloc", flags->hwloc, "Count NUMA nodes with hwloc instead of sysfs");
  cmd->add_flag("--measure-bandwidth", flags->measure_bandwidth,
                "Also time host memory bandwidth with a triad (~0.3 s on physical cores; this machine only)");
  cmd->add_option("--rpc", flags->rpc,
                  "Also list the devices of these RPC servers (HOST:PORT,...: `gantry rpc-server`), with the "
                  "memory each reports and the measured round trip and bandwidth to it");
  cmd->callback([flags, &exit_code] {
    hw::DetectOptions options;
    options.use_vulkan = !flags->no_vulkan;
    options.use_hwloc = flags->hwloc;
    for (auto [text, list, flag] : {std::tuple{&flags->only, &options.only, "--only"},
                                    std::tuple{&flags->skip, &options.skip, "--skip"}}) {
      if (text->empty()) continue;
      auto names = hw::parse_probe_names(*text, flag);
      if (!names.ok()) {
        std::cerr << "gantry: detect: " << names.status().message() << "\n";
        exit_code = 2;
        return;
      }
      *list = std::move(*names);
    }
    const bool local = flags->sysroot.empty() || flags->sysroot == "/";
    auto machine = hw::make_disk_machine(local ? "/" : flags->sysroot);
    auto loader = local ? hw::make_dl_loader() : hw::make_null_loader();
    hw::Registry registry = hw::detect(*machine, *loader, options);
    if (flags->measure_bandwidth) {
      if (!local) {
        std::cerr << "gantry: detect: --measure-bandwidth times this machine's memory; it cannot measure a "
                     "captured --sysroot\n";
        exit_code = 2;
        return;
      }
      const int threads = registry.cpu.physical_cores > 0 ? registry.cpu.physical_cores
                                                          : std::max(1, registry.cpu.logical_cores);
      registry.io.memory.measured_bytes_per_s =
          hw::measure_triad_bandwidth(threads, hw::triad_array_bytes(registry.cpu), /*budget_ms=*/200,
                                      /*huge_pages=*/true);
    }
    if (!flags->rpc.empty()) {
      auto servers = hw::parse_rpc_endpoints(flags->rpc);
      if (!servers.ok()) {
        std::cerr << "gantry: detect: --rpc: " << servers.status().message() << "\n";
        exit_code = 2;
        return;
      }
      if (Status s = hw::add_rpc_devices(registry, *servers); !s.ok()) {
        std::cerr << "gantry: detect: " << s.message() << "\n";
        exit_code = 1;
        return;
      }
    }
    if (flags->json) {
      std::cout << hw::registry_to_json(registry).dump(2) << "\n";
    } else {
      print_table(registry);
      print_io(registry);
      print_remote(registry);
      if (flags->timing) print_timings(registry);
      for (const auto& w : registry.warnings) std::cerr << "warning: " << w << "\n";
    }
    exit_code = 0;
  });
}

}  // namespace gantry::cli

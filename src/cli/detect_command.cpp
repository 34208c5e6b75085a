// gantry detect: every compute device on this machine (or under --sysroot), as a table or JSON.
#include <fmt/format.h>

#include <iostream>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "gantry/hw/detect.h"
#include "gantry/hw/registry_json.h"

namespace gantry::cli {
namespace {

struct DetectFlags {
  bool json = false;
  bool timing = false;
  bool no_vulkan = false;
  bool hwloc = false;
  std::string sysroot;
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
  fmt::print("\n{:<12} {:<5} {:<40} {:>11} {:>11} {:<12} {}\n", "ID", "KIND", "NAME", "MEM TOTAL", "MEM FREE",
             "CAPABILITY", "DRIVER");
  for (const auto& d : r.devices) {
    std::string cap = d.kind == hw::DeviceKind::kCpu ? cpu_capability(c)
                                                     : d.compute_capability.value_or(d.arch.value_or("-"));
    std::string driver = d.driver_version.value_or("-");
    if (d.cuda_driver_version) driver += " (CUDA " + *d.cuda_driver_version + ")";
    fmt::print("{:<12} {:<5} {:<40} {:>11} {:>11} {:<12} {}\n", d.id, hw::device_kind_name(d.kind), d.name,
               bytes_text(d.memory_total_bytes), bytes_text(d.memory_free_bytes), cap, driver);
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
  cmd->add_flag("--hwloc", flags->hwloc, "Count NUMA nodes with hwloc instead of sysfs");
  cmd->callback([flags, &exit_code] {
    hw::DetectOptions options;
    options.use_vulkan = !flags->no_vulkan;
    options.use_hwloc = flags->hwloc;
    const bool local = flags->sysroot.empty() || flags->sysroot == "/";
    auto machine = hw::make_disk_machine(local ? "/" : flags->sysroot);
    auto loader = local ? hw::make_dl_loader() : hw::make_null_loader();
    const hw::Registry registry = hw::detect(*machine, *loader, options);
    if (flags->json) {
      std::cout << hw::registry_to_json(registry).dump(2) << "\n";
    } else {
      print_table(registry);
      if (flags->timing) print_timings(registry);
      for (const auto& w : registry.warnings) std::cerr << "warning: " << w << "\n";
    }
    exit_code = 0;
  });
}

}  // namespace gantry::cli

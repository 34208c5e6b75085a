// CPU, host memory and container limits: /proc/cpuinfo, /proc/meminfo, /sys/devices/system,
// cgroup v1/v2. NUMA through hwloc only when asked and probing this machine's own root.
#include <dlfcn.h>
#include <hwloc.h>

#include <algorithm>
#include <set>
#include <string>

#include "probes.h"

namespace gantry::hw::internal {
namespace {

// Features that matter for inference kernels, by their /proc/cpuinfo names.
constexpr std::string_view kX86Isa[] = {
    "sse4_2",   "avx",      "avx2",        "fma",         "f16c",        "avx_vnni", "avx512f",  "avx512dq",
    "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"};
// aarch64 reports NEON as "asimd" (32-bit Arm as "neon").
constexpr std::string_view kArmIsa[] = {"neon", "asimd", "asimdhp", "asimddp", "i8mm",
                                        "bf16", "sve",   "sve2",    "sme",     "sme2"};

std::string arm_vendor(uint64_t implementer) {
  switch (implementer) {
    case 0x41:
      return "ARM";
    case 0x42:
      return "Broadcom";
    case 0x48:
      return "HiSilicon";
    case 0x4e:
      return "NVIDIA";
    case 0x51:
      return "Qualcomm";
    case 0x61:
      return "Apple";
    case 0xc0:
      return "Ampere";
    default:
      return "Arm implementer " + std::to_string(implementer);
  }
}

std::optional<std::string> arm_part_name(uint64_t implementer, uint64_t part) {
  if (implementer == 0x41) {
    switch (part) {
      case 0xd0c:
        return "Neoverse-N1";
      case 0xd40:
        return "Neoverse-V1";
      case 0xd49:
        return "Neoverse-N2";
      case 0xd4f:
        return "Neoverse-V2";
      case 0xd84:
        return "Neoverse-V3";
      case 0xd8e:
        return "Neoverse-N3";
      case 0xd08:
        return "Cortex-A72";
      case 0xd0b:
        return "Cortex-A76";
      default:
        break;
    }
  }
  if (implementer == 0xc0 && part == 0xac3) return "AmpereOne";
  return std::nullopt;
}

// "0-3,8-11" -> 8.
std::optional<int> count_cpu_list(std::string_view list) {
  int n = 0;
  for (std::string_view range : split(trim(list), ',')) {
    range = trim(range);
    if (range.empty()) continue;
    const auto ends = split(range, '-');
    auto lo = parse_u64(ends[0]);
    auto hi = ends.size() == 2 ? parse_u64(ends[1]) : lo;
    if (!lo || !hi || *hi < *lo || ends.size() > 2) return std::nullopt;
    n += static_cast<int>(*hi - *lo + 1);
  }
  return n > 0 ? std::optional<int>(n) : std::nullopt;
}

// "48K" / "2048K" / "32M" -> bytes.
std::optional<uint64_t> parse_cache_size(std::string_view s) {
  s = trim(s);
  uint64_t mult = 1;
  if (!s.empty() && (s.back() == 'K' || s.back() == 'k'))
    mult = 1024, s.remove_suffix(1);
  else if (!s.empty() && s.back() == 'M')
    mult = 1024 * 1024, s.remove_suffix(1);
  auto v = parse_u64(s);
  if (!v) return std::nullopt;
  return *v * mult;
}

void parse_cpuinfo(std::string_view text, CpuProbeOutput& out) {
  std::set<std::pair<std::string, std::string>> cores;  // (physical id, core id)
  std::set<std::string> packages;
  std::set<std::string> flags;
  int processors = 0;
  std::string physical_id, implementer, part;
  bool have_core_ids = false;
  for (std::string_view line : split(text, '\n')) {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = trim(line.substr(0, colon));
    const std::string_view value = trim(line.substr(colon + 1));
    if (key == "processor") {
      ++processors;
    } else if (key == "vendor_id" && out.cpu.vendor.empty()) {
      out.cpu.vendor = std::string(value);
    } else if ((key == "model name" || key == "Model Name") && out.cpu.model.empty()) {
      out.cpu.model = std::string(value);
    } else if (key == "physical id") {
      physical_id = std::string(value);
      packages.insert(physical_id);
    } else if (key == "core id") {
      cores.emplace(physical_id, std::string(value));
      have_core_ids = true;
    } else if ((key == "flags" || key == "Features") && flags.empty()) {
      for (std::string_view f : split(value, ' ')) {
        if (!trim(f).empty()) flags.emplace(trim(f));
      }
      if (key == "flags") out.cpu.architecture = flags.count("lm") != 0 ? "x86_64" : "x86";
    } else if (key == "CPU implementer" && implementer.empty()) {
      implementer = std::string(value);
    } else if (key == "CPU part" && part.empty()) {
      part = std::string(value);
    } else if (key == "CPU architecture" && out.cpu.architecture.empty()) {
      out.cpu.architecture = value == "8" ? "aarch64" : "arm";
    }
  }
  out.cpu.logical_cores = processors;
  if (have_core_ids) out.cpu.physical_cores = static_cast<int>(cores.size());
  out.cpu.sockets = static_cast<int>(packages.size());
  out.hypervisor = flags.count("hypervisor") != 0;
  if (!implementer.empty()) {
    const auto impl = parse_hex(implementer);
    if (out.cpu.vendor.empty() && impl) out.cpu.vendor = arm_vendor(*impl);
    if (out.cpu.model.empty() && impl) {
      const auto p = parse_hex(part);
      auto named = p ? arm_part_name(*impl, *p) : std::nullopt;
      out.cpu.model = named ? *named : "Arm CPU part " + part;
    }
  }
  for (auto isa : kX86Isa) {
    if (flags.count(std::string(isa))) out.cpu.isa.emplace_back(isa);
  }
  for (auto isa : kArmIsa) {
    if (flags.count(std::string(isa))) out.cpu.isa.emplace_back(isa);
  }
}

// Physical cores and sockets from sysfs topology when /proc/cpuinfo lacks them (Arm).
void topology_from_sysfs(const Machine& m, CpuProbeOutput& out) {
  std::set<std::pair<std::string, std::string>> cores;
  std::set<std::string> packages;
  for (const std::string& name : list(m, "/sys/devices/system/cpu", out.warnings)) {
    if (!starts_with(name, "cpu") || !parse_u64(std::string_view(name).substr(3))) continue;
    const std::string dir = "/sys/devices/system/cpu/" + name + "/topology/";
    auto pkg = read_text(m, dir + "physical_package_id", out.warnings);
    auto core = read_text(m, dir + "core_id", out.warnings);
    if (!pkg || !core) continue;
    packages.insert(*pkg);
    cores.emplace(*pkg, *core);
  }
  if (out.cpu.physical_cores == 0 && !cores.empty()) out.cpu.physical_cores = static_cast<int>(cores.size());
  if (out.cpu.sockets == 0 && !packages.empty()) out.cpu.sockets = static_cast<int>(packages.size());
}

void read_caches(const Machine& m, CpuProbeOutput& out) {
  const std::string base = "/sys/devices/system/cpu/cpu0/cache";
  for (const std::string& index : list(m, base, out.warnings)) {
    if (!starts_with(index, "index")) continue;
    const std::string dir = base + "/" + index + "/";
    auto level = read_text(m, dir + "level", out.warnings);
    auto type = read_text(m, dir + "type", out.warnings);
    auto size_text = read_text(m, dir + "size", out.warnings);
    if (!level || !type || !size_text) continue;
    auto size = parse_cache_size(*size_text);
    if (!size) continue;
    if (*level == "1" && *type == "Data")
      out.cpu.cache.l1d_bytes = size;
    else if (*level == "1" && *type == "Instruction")
      out.cpu.cache.l1i_bytes = size;
    else if (*level == "2")
      out.cpu.cache.l2_bytes = size;
    else if (*level == "3")
      out.cpu.cache.l3_bytes = size;
  }
}

int numa_nodes_sysfs(const Machine& m, std::vector<std::string>& warnings) {
  int n = 0;
  for (const std::string& name : list(m, "/sys/devices/system/node", warnings)) {
    if (starts_with(name, "node") && parse_u64(std::string_view(name).substr(4))) ++n;
  }
  return n;
}

// hwloc is opened only when asked for (--hwloc): linking it would load it and libudev into every start of
// `gantry detect`, which reads sysfs instead.
int numa_nodes_hwloc(std::vector<std::string>& warnings) {
  void* lib = ::dlopen("libhwloc.so.15", RTLD_NOW | RTLD_LOCAL);  // never closed (see loader.h)
  if (!lib) {
    const char* why = ::dlerror();
    warnings.push_back(std::string("hwloc: libhwloc.so.15 is not loadable (") + (why ? why : "?") +
                       "); NUMA nodes read from sysfs");
    return 0;
  }
  auto init = reinterpret_cast<int (*)(hwloc_topology_t*)>(::dlsym(lib, "hwloc_topology_init"));
  auto load = reinterpret_cast<int (*)(hwloc_topology_t)>(::dlsym(lib, "hwloc_topology_load"));
  auto destroy = reinterpret_cast<void (*)(hwloc_topology_t)>(::dlsym(lib, "hwloc_topology_destroy"));
  auto type_depth =
      reinterpret_cast<int (*)(hwloc_topology_t, hwloc_obj_type_t)>(::dlsym(lib, "hwloc_get_type_depth"));
  auto by_depth =
      reinterpret_cast<unsigned (*)(hwloc_topology_t, int)>(::dlsym(lib, "hwloc_get_nbobjs_by_depth"));
  if (!init || !load || !destroy || !type_depth || !by_depth) {
    warnings.push_back("hwloc: libhwloc.so.15 lacks a topology function; NUMA nodes read from sysfs");
    return 0;
  }
  hwloc_topology_t topo = nullptr;
  if (init(&topo) != 0) {
    warnings.push_back("hwloc: cannot initialise a topology");
    return 0;
  }
  int n = 0;
  if (load(topo) == 0) {
    // hwloc_get_nbobjs_by_type: NUMA nodes live at a special depth.
    const int depth = type_depth(topo, HWLOC_OBJ_NUMANODE);
    if (depth != HWLOC_TYPE_DEPTH_UNKNOWN && depth != HWLOC_TYPE_DEPTH_MULTIPLE)
      n = static_cast<int>(by_depth(topo, depth));
  } else {
    warnings.push_back("hwloc: cannot load the topology");
  }
  destroy(topo);
  return n;
}

void read_meminfo(const Machine& m, CpuProbeOutput& out) {
  auto text = read_text(m, "/proc/meminfo", out.warnings);
  if (!text) {
    out.warnings.push_back("host memory unknown: /proc/meminfo is not readable");
    return;
  }
  for (std::string_view line : split(*text, '\n')) {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const auto key = trim(line.substr(0, colon));
    if (key != "MemTotal" && key != "MemAvailable") continue;
    auto value = trim(line.substr(colon + 1));
    const bool kb = value.size() > 3 && value.substr(value.size() - 2) == "kB";
    if (kb) value = trim(value.substr(0, value.size() - 2));
    auto v = parse_u64(value);
    if (!v) {
      out.warnings.push_back("unexpected " + std::string(key) + " in /proc/meminfo: '" + std::string(value) +
                             "'");
      continue;
    }
    const uint64_t bytes = kb ? *v * 1024 : *v;
    (key == "MemTotal" ? out.host.memory_total_bytes : out.host.memory_available_bytes) = bytes;
  }
}

// cgroup path of this process for a v1 controller ("memory") or v2 ("").
std::string cgroup_path(std::string_view self_cgroup, std::string_view controller) {
  for (std::string_view line : split(self_cgroup, '\n')) {
    const auto fields = split(line, ':');
    if (fields.size() < 3) continue;
    const std::string_view path = line.substr(fields[0].size() + fields[1].size() + 2);
    if (controller.empty() ? fields[1].empty() && fields[0] == "0" : false) return std::string(trim(path));
    for (std::string_view c : split(fields[1], ',')) {
      if (!controller.empty() && c == controller) return std::string(trim(path));
    }
  }
  return "/";
}

// Directories from the process's cgroup up to the hierarchy root (inside a container the
// process's path often does not exist in its own namespace view; those are skipped).
std::vector<std::string> cgroup_dirs(std::string_view mount, std::string path) {
  std::vector<std::string> dirs;
  while (!path.empty() && path != "/") {
    dirs.push_back(std::string(mount) + path);
    path.resize(path.rfind('/'));
  }
  dirs.push_back(std::string(mount));
  return dirs;
}

void read_cgroup_limits(const Machine& m, CpuProbeOutput& out) {
  const std::string self = read_text(m, "/proc/self/cgroup", out.warnings).value_or("");
  constexpr uint64_t kUnlimited = uint64_t{1} << 62;  // v1 reports "no limit" as ~2^63
  auto keep_min_memory = [&](uint64_t v) {
    if (v >= kUnlimited) return;
    if (!out.host.memory_limit_bytes || v < *out.host.memory_limit_bytes) out.host.memory_limit_bytes = v;
  };
  auto keep_min_cpu = [&](double cores) {
    if (!out.host.cpu_quota_cores || cores < *out.host.cpu_quota_cores) out.host.cpu_quota_cores = cores;
  };
  if (m.exists("/sys/fs/cgroup/cgroup.controllers")) {
    out.host.cgroup_version = "v2";
    for (const std::string& dir : cgroup_dirs("/sys/fs/cgroup", cgroup_path(self, ""))) {
      if (auto cpu_max = read_text(m, dir + "/cpu.max", out.warnings)) {
        const auto f = split(*cpu_max, ' ');
        auto quota = parse_u64(f[0]);
        auto period = f.size() > 1 ? parse_u64(f[1]) : std::nullopt;
        if (quota && period && *period > 0)
          keep_min_cpu(static_cast<double>(*quota) / static_cast<double>(*period));
        else if (trim(f[0]) != "max")
          out.warnings.push_back("unexpected content in " + dir + "/cpu.max: '" + *cpu_max + "'");
      }
      if (auto mem_max = read_text(m, dir + "/memory.max", out.warnings)) {
        if (auto v = parse_u64(*mem_max))
          keep_min_memory(*v);
        else if (*mem_max != "max")
          out.warnings.push_back("unexpected content in " + dir + "/memory.max: '" + *mem_max + "'");
      }
    }
    return;
  }
  std::string cpu_mount;
  for (const char* c : {"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"}) {
    if (m.exists(std::string(c) + "/cpu.cfs_quota_us")) {
      cpu_mount = c;
      break;
    }
  }
  const bool have_memory = m.exists("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  if (cpu_mount.empty() && !have_memory) return;
  out.host.cgroup_version = "v1";
  if (!cpu_mount.empty()) {
    for (const std::string& dir : cgroup_dirs(cpu_mount, cgroup_path(self, "cpu"))) {
      auto quota_text = m.read_file(dir + "/cpu.cfs_quota_us");
      if (!quota_text.ok()) continue;
      auto quota = parse_i64(*quota_text);
      auto period = read_u64(m, dir + "/cpu.cfs_period_us", out.warnings);
      if (quota && *quota > 0 && period && *period > 0)
        keep_min_cpu(static_cast<double>(*quota) / static_cast<double>(*period));
    }
  }
  if (have_memory) {
    for (const std::string& dir : cgroup_dirs("/sys/fs/cgroup/memory", cgroup_path(self, "memory"))) {
      auto text = m.read_file(dir + "/memory.limit_in_bytes");
      if (!text.ok()) continue;
      if (auto v = parse_u64(*text)) keep_min_memory(*v);
    }
  }
}

}  // namespace

CpuProbeOutput probe_cpu(const Machine& m, bool use_hwloc) {
  CpuProbeOutput out;
  if (auto text = read_text(m, "/proc/cpuinfo", out.warnings)) {
    parse_cpuinfo(*text, out);
  } else {
    out.warnings.push_back("CPU model and features unknown: /proc/cpuinfo is not readable");
  }
  if (auto online = read_text(m, "/sys/devices/system/cpu/online", out.warnings)) {
    if (auto n = count_cpu_list(*online)) out.cpu.logical_cores = *n;
  }
  if (out.cpu.physical_cores == 0 || out.cpu.sockets == 0) topology_from_sysfs(m, out);
  if (out.cpu.physical_cores == 0) out.cpu.physical_cores = out.cpu.logical_cores;
  if (out.cpu.sockets == 0 && out.cpu.logical_cores > 0) out.cpu.sockets = 1;
  read_caches(m, out);
  out.cpu.numa_nodes =
      use_hwloc && m.is_local_root() ? numa_nodes_hwloc(out.warnings) : numa_nodes_sysfs(m, out.warnings);
  if (out.cpu.numa_nodes == 0 && out.cpu.logical_cores > 0) out.cpu.numa_nodes = 1;
  read_meminfo(m, out);
  read_cgroup_limits(m, out);
  return out;
}

}  // namespace gantry::hw::internal

// detect_local() on the machine running the tests agrees with what the kernel says directly.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

#include "gantry/hw/detect.h"

namespace gantry::hw {
namespace {

std::string slurp(const char* path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string cpuinfo_field(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0 && line.find(':') != std::string::npos) {
      std::string v = line.substr(line.find(':') + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  }
  return "";
}

uint64_t meminfo_kb(const std::string& key) {
  std::istringstream in(slurp("/proc/meminfo"));
  std::string k;
  uint64_t v = 0;
  std::string unit;
  while (in >> k >> v) {
    std::getline(in, unit);
    if (k == key + ":") return v;
  }
  return 0;
}

TEST(LocalMachine, AgreesWithProcCpuinfoSysconfAndMeminfo) {
  if (::getenv("GANTRY_SYSROOT") != nullptr) GTEST_SKIP() << "GANTRY_SYSROOT is set";
  DetectOptions options;
  Registry r = detect_local(options);

  EXPECT_EQ(r.cpu.logical_cores, ::sysconf(_SC_NPROCESSORS_ONLN));
  const std::string cpuinfo = slurp("/proc/cpuinfo");
  const std::string model = cpuinfo_field(cpuinfo, "model name");
  if (!model.empty()) {
    EXPECT_EQ(r.cpu.model, model);
  }
  std::string flags_line = cpuinfo_field(cpuinfo, "flags");
  if (flags_line.empty()) flags_line = cpuinfo_field(cpuinfo, "Features");
  std::set<std::string> flags;
  std::istringstream fs(flags_line);
  for (std::string f; fs >> f;) flags.insert(f);
  for (const auto& isa : r.cpu.isa) EXPECT_TRUE(flags.count(isa)) << isa << " is not in /proc/cpuinfo";
  for (const char* f : {"sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "amx_tile",
                        "asimd", "sve"}) {
    const bool listed = std::find(r.cpu.isa.begin(), r.cpu.isa.end(), f) != r.cpu.isa.end();
    EXPECT_EQ(listed, flags.count(f) == 1) << f;
  }

  ASSERT_TRUE(r.host.memory_total_bytes.has_value());
  EXPECT_EQ(*r.host.memory_total_bytes, meminfo_kb("MemTotal") * 1024);
  ASSERT_TRUE(r.host.memory_available_bytes.has_value());
  // MemAvailable moves with every other process (parallel tests among them): live, only its bounds hold
  // (cli_test DetectCli.MemoryIsMeminfosOwnFigures checks the figure exactly, on a snapshot).
  EXPECT_GT(*r.host.memory_available_bytes, 0u);
  EXPECT_LE(*r.host.memory_available_bytes, *r.host.memory_total_bytes);

  ASSERT_FALSE(r.devices.empty());
  EXPECT_EQ(r.devices[0].kind, DeviceKind::kCpu);
  EXPECT_GE(r.cpu.physical_cores, 1);
  EXPECT_LE(r.cpu.physical_cores, r.cpu.logical_cores);
  EXPECT_GE(r.cpu.numa_nodes, 1);
  EXPECT_GT(r.timings_ms.at("total"), 0.0);
}

TEST(LocalMachine, HwlocAndSysfsAgreeOnNumaNodes) {
  DetectOptions sysfs, hwloc;
  hwloc.use_hwloc = true;
  sysfs.use_vulkan = hwloc.use_vulkan = false;
  EXPECT_EQ(detect_local(sysfs).cpu.numa_nodes, detect_local(hwloc).cpu.numa_nodes);
}

}  // namespace
}  // namespace gantry::hw

// Missing files, garbage, permission denied, devices that vanish mid-probe, probes that throw:
// detect() still returns a registry, with warnings instead of invented values.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "hw/hw_test_util.h"

namespace gantry::hw {
namespace {

using testing::count_family;
using testing::FakeLoader;
using testing::FakeMachine;
using testing::find_id;
using testing::fixture;

bool has_warning(const Registry& r, std::string_view text) {
  for (const auto& w : r.warnings) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(UglyPaths, EmptyRootGivesAnEmptyButValidRegistry) {
  const auto dir = std::filesystem::temp_directory_path() / ("gantry-empty-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  FakeMachine m(dir.string());
  FakeLoader loader;
  Registry r = detect(m, loader);
  ASSERT_EQ(r.devices.size(), 1u);  // the CPU is always listed
  EXPECT_EQ(r.devices[0].kind, DeviceKind::kCpu);
  EXPECT_FALSE(r.host.memory_total_bytes.has_value());
  EXPECT_FALSE(r.devices[0].memory_total_bytes.has_value());
  EXPECT_EQ(r.cpu.logical_cores, 0);
  EXPECT_TRUE(has_warning(r, "/proc/cpuinfo"));
  EXPECT_TRUE(has_warning(r, "/proc/meminfo"));
  std::filesystem::remove_all(dir);
}

TEST(UglyPaths, GarbageValuesAreRejectedNotInvented) {
  Registry r = testing::detect_fixture("garbage");
  EXPECT_FALSE(r.host.memory_total_bytes.has_value());
  EXPECT_FALSE(r.host.memory_available_bytes.has_value());
  EXPECT_TRUE(has_warning(r, "MemTotal"));
  EXPECT_FALSE(r.host.cpu_quota_cores.has_value());
  EXPECT_FALSE(r.host.memory_limit_bytes.has_value());
  EXPECT_TRUE(has_warning(r, "cpu.max"));
  EXPECT_FALSE(r.cpu.cache.l1d_bytes.has_value());
  // NVIDIA: the bus id in procfs is garbage, the directory name is used; numa "x" is ignored.
  ASSERT_EQ(count_family(r, kFamilyCuda), 1);
  const Device* nv = find_id(r, "cuda:0");
  EXPECT_EQ(nv->pci_bus_id, "0000:65:00.0");
  EXPECT_FALSE(nv->numa_node.has_value());
  EXPECT_FALSE(nv->pcie_generation.has_value());
  EXPECT_FALSE(nv->pcie_width.has_value());
  EXPECT_FALSE(nv->driver_version.has_value());
  EXPECT_FALSE(nv->memory_total_bytes.has_value());
  // AMD: VRAM "lots" is unknown, with a warning; no free memory derived from it.
  ASSERT_EQ(count_family(r, kFamilyRocm), 1);
  const Device* amd = find_id(r, "rocm:0");
  EXPECT_FALSE(amd->memory_total_bytes.has_value());
  EXPECT_FALSE(amd->memory_free_bytes.has_value());
  EXPECT_FALSE(amd->arch.has_value());
  EXPECT_TRUE(has_warning(r, "mem_info_vram_total"));
  EXPECT_TRUE(has_warning(r, "0000:67:00.0"));  // unreadable vendor
}

TEST(UglyPaths, PermissionDeniedIsAWarning) {
  FakeMachine m(fixture("amd-mi300x"));
  m.fail("/sys/bus/pci/devices/0000:05:00.0/mem_info_vram_total",
         IoError("cannot open /sys/bus/pci/devices/0000:05:00.0/mem_info_vram_total: Permission denied"));
  m.fail("/proc/meminfo", IoError("cannot open /proc/meminfo: Permission denied"));
  FakeLoader loader;
  Registry r = detect(m, loader);
  ASSERT_EQ(count_family(r, kFamilyRocm), 8);
  EXPECT_FALSE(find_id(r, "rocm:0")->memory_total_bytes.has_value());
  EXPECT_EQ(find_id(r, "rocm:1")->memory_total_bytes, 206141652992ull);
  EXPECT_TRUE(has_warning(r, "Permission denied"));
  EXPECT_FALSE(r.host.memory_total_bytes.has_value());
}

TEST(UglyPaths, UnreadableFileOnDisk) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "running as root: chmod 000 does not stop root from reading (covered by the injected "
                    "failure test)";
  const auto dir = std::filesystem::temp_directory_path() / ("gantry-perm-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "proc");
  { std::ofstream(dir / "proc/meminfo") << "MemTotal: 1024 kB\n"; }
  ::chmod((dir / "proc/meminfo").c_str(), 0);
  FakeMachine m(dir.string());
  FakeLoader loader;
  Registry r = detect(m, loader);
  EXPECT_FALSE(r.host.memory_total_bytes.has_value());
  EXPECT_TRUE(has_warning(r, "Permission denied"));
  std::filesystem::remove_all(dir);
}

TEST(UglyPaths, PciDeviceVanishesBetweenListingAndReading) {
  FakeMachine m(fixture("nvidia-dgx-h100"));
  m.vanish_after_list("/sys/bus/pci/devices");
  m.vanish_after_list("/proc/driver/nvidia/gpus");
  FakeLoader loader;
  Registry r = detect(m, loader);
  EXPECT_EQ(count_family(r, kFamilyCuda), 0);
  EXPECT_TRUE(has_warning(r, "disappeared while probing"));
  EXPECT_EQ(r.devices[0].kind, DeviceKind::kCpu);
}

TEST(UglyPaths, AcceleratorVanishesMidProbe) {
  FakeMachine m(fixture("gaudi2"));
  m.vanish_after_list("/sys/class/accel");
  m.hide("/sys/bus/pci");
  FakeLoader loader;
  Registry r = detect(m, loader);
  EXPECT_EQ(count_family(r, kFamilyGaudi), 0);
  EXPECT_TRUE(has_warning(r, "disappeared while probing"));
}

TEST(UglyPaths, MissingDirectoriesAreSilent) {
  FakeMachine m(fixture("intel-laptop-npu"));
  m.hide("/sys/class/accel");
  m.hide("/sys/devices/system/cpu/cpu0/cache");
  FakeLoader loader;
  Registry r = detect(m, loader);
  EXPECT_EQ(count_family(r, kFamilyIntelNpu), 0);
  EXPECT_FALSE(r.cpu.cache.l2_bytes.has_value());
  EXPECT_FALSE(has_warning(r, "/sys/class/accel"));
}

// A Machine whose every read throws: each probe fails alone and becomes a warning.
class ThrowingMachine final : public Machine {
 public:
  Result<std::string> read_file(std::string_view p) const override {
    throw std::runtime_error("boom reading " + std::string(p));
  }
  Result<std::vector<std::string>> list_dir(std::string_view p) const override {
    throw std::runtime_error("boom listing " + std::string(p));
  }
  bool exists(std::string_view) const override { return false; }
  std::optional<std::string> getenv(std::string_view) const override { return std::nullopt; }
  bool is_local_root() const override { return false; }
  std::string root() const override { return "/nowhere"; }
};

TEST(UglyPaths, ThrowingProbesBecomeWarnings) {
  ThrowingMachine m;
  FakeLoader loader;
  Registry r = detect(m, loader);
  EXPECT_TRUE(has_warning(r, "probe 'cpu' failed: boom"));
  EXPECT_TRUE(has_warning(r, "probe 'accel' failed: boom"));
  EXPECT_TRUE(has_warning(r, "probe 'environment' failed"));
  ASSERT_FALSE(r.devices.empty());
  EXPECT_EQ(r.devices[0].kind, DeviceKind::kCpu);
}

}  // namespace
}  // namespace gantry::hw

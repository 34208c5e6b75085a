// NVML through the loader seam: a fake libnvidia-ml whose functions describe two GPUs.
#include <gtest/gtest.h>

#include <cstring>

#include "hw/hw_test_util.h"

namespace gantry::hw {
namespace {

using testing::FakeLoader;
using testing::FakeMachine;
using testing::find_id;
using testing::fixture;

// nvml.h ABI as the fake implements it (see src/hw/nvml_api.h).
struct PciInfo {
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct Memory {
  unsigned long long total, free, used;
};
struct Utilization {
  unsigned int gpu, memory;
};
using Handle = void*;

int g_init_result = 0;
int g_shutdowns = 0;
const char* kBusIds[] = {"00000000:18:00.0", "00000000:2A:00.0"};

int fake_init() { return g_init_result; }
int fake_shutdown() { return ++g_shutdowns, 0; }
const char* fake_error_string(int r) { return r == 9 ? "Driver Not Loaded" : "Unknown Error"; }
int fake_driver_version(char* buf, unsigned int n) { return std::snprintf(buf, n, "550.54.15"), 0; }
int fake_cuda_version(int* v) { return *v = 12040, 0; }
int fake_count(unsigned int* n) { return *n = 2, 0; }
int fake_handle(unsigned int i, Handle* h) {
  return *h = reinterpret_cast<Handle>(static_cast<uintptr_t>(i + 1)), 0;
}
unsigned idx(Handle h) { return static_cast<unsigned>(reinterpret_cast<uintptr_t>(h)) - 1; }
int fake_name(Handle, char* buf, unsigned int n) { return std::snprintf(buf, n, "NVIDIA H100 80GB HBM3"), 0; }
int fake_uuid(Handle h, char* buf, unsigned int n) {
  return std::snprintf(buf, n, "GPU-%u111-2222", idx(h)), 0;
}
int fake_pci(Handle h, PciInfo* p) {
  std::memset(p, 0, sizeof *p);
  std::strcpy(p->bus_id, kBusIds[idx(h)]);
  p->pci_device_id = (0x2330u << 16) | 0x10de;
  return 0;
}
int fake_memory(Handle h, Memory* m) {
  if (idx(h) == 1) return 3;  // NVML_ERROR_NOT_SUPPORTED
  *m = {85899345920ull, 84000000000ull, 1899345920ull};
  return 0;
}
int fake_cc(Handle, int* major, int* minor) { return *major = 9, *minor = 0, 0; }
int fake_gen(Handle, unsigned int* v) { return *v = 5, 0; }
int fake_width(Handle, unsigned int* v) { return *v = 16, 0; }
int fake_mig(Handle h, unsigned int* cur, unsigned int* pending) {
  return *cur = idx(h) == 0 ? 1 : 0, *pending = 0, 0;
}
int fake_power(Handle, unsigned int* mw) { return *mw = 312500, 0; }
int fake_temp(Handle, int, unsigned int* c) { return *c = 41, 0; }
int fake_util(Handle, Utilization* u) { return u->gpu = 7, u->memory = 1, 0; }

// NVLink: each GPU has four active links to the other one.
int fake_nvlink_state(Handle, unsigned int link, unsigned int* active) {
  if (link >= 4) return 2;  // NVML_ERROR_INVALID_ARGUMENT: no such link
  return *active = 1, 0;
}
int fake_nvlink_version(Handle, unsigned int, unsigned int* v) {
  return *v = 6, 0;
}  // NVML_NVLINK_VERSION_4_0
int fake_nvlink_remote_pci(Handle h, unsigned int, PciInfo* p) {
  std::memset(p, 0, sizeof *p);
  std::strcpy(p->bus_id, kBusIds[1 - idx(h)]);
  return 0;
}
int fake_nvlink_remote_type(Handle, unsigned int, int* type) { return *type = 0, 0; }  // a GPU

std::map<std::string, void*> fake_nvml_symbols() {
  return {
      {"nvmlInit_v2", reinterpret_cast<void*>(&fake_init)},
      {"nvmlShutdown", reinterpret_cast<void*>(&fake_shutdown)},
      {"nvmlErrorString", reinterpret_cast<void*>(&fake_error_string)},
      {"nvmlSystemGetDriverVersion", reinterpret_cast<void*>(&fake_driver_version)},
      {"nvmlSystemGetCudaDriverVersion_v2", reinterpret_cast<void*>(&fake_cuda_version)},
      {"nvmlDeviceGetCount_v2", reinterpret_cast<void*>(&fake_count)},
      {"nvmlDeviceGetHandleByIndex_v2", reinterpret_cast<void*>(&fake_handle)},
      {"nvmlDeviceGetName", reinterpret_cast<void*>(&fake_name)},
      {"nvmlDeviceGetUUID", reinterpret_cast<void*>(&fake_uuid)},
      {"nvmlDeviceGetPciInfo_v3", reinterpret_cast<void*>(&fake_pci)},
      {"nvmlDeviceGetMemoryInfo", reinterpret_cast<void*>(&fake_memory)},
      {"nvmlDeviceGetCudaComputeCapability", reinterpret_cast<void*>(&fake_cc)},
      {"nvmlDeviceGetCurrPcieLinkGeneration", reinterpret_cast<void*>(&fake_gen)},
      {"nvmlDeviceGetCurrPcieLinkWidth", reinterpret_cast<void*>(&fake_width)},
      {"nvmlDeviceGetMigMode", reinterpret_cast<void*>(&fake_mig)},
      {"nvmlDeviceGetPowerUsage", reinterpret_cast<void*>(&fake_power)},
      {"nvmlDeviceGetTemperature", reinterpret_cast<void*>(&fake_temp)},
      {"nvmlDeviceGetUtilizationRates", reinterpret_cast<void*>(&fake_util)},
      {"nvmlDeviceGetNvLinkState", reinterpret_cast<void*>(&fake_nvlink_state)},
      {"nvmlDeviceGetNvLinkVersion", reinterpret_cast<void*>(&fake_nvlink_version)},
      {"nvmlDeviceGetNvLinkRemotePciInfo_v2", reinterpret_cast<void*>(&fake_nvlink_remote_pci)},
      {"nvmlDeviceGetNvLinkRemoteDeviceType", reinterpret_cast<void*>(&fake_nvlink_remote_type)},
  };
}

TEST(Nvml, DevicesComeFromNvmlAndMergeWithSysfs) {
  g_init_result = 0;
  g_shutdowns = 0;
  FakeMachine m(fixture("nvidia-dgx-h100"));
  m.hide("/proc/driver/nvidia");  // NVML is there, so procfs is not needed
  FakeLoader loader;
  loader.add("libnvidia-ml.so.1", fake_nvml_symbols());
  Registry r = detect(m, loader);
  ASSERT_EQ(testing::count_family(r, kFamilyCuda), 2);
  EXPECT_EQ(g_shutdowns, 1);
  const Device* d = find_id(r, "cuda:0");
  EXPECT_EQ(d->sources, std::vector<std::string>{"nvml"});
  EXPECT_EQ(d->pci_bus_id, "0000:18:00.0");
  EXPECT_EQ(d->uuid, "GPU-0111-2222");
  EXPECT_EQ(d->memory_total_bytes, 85899345920ull);
  EXPECT_EQ(d->memory_free_bytes, 84000000000ull);
  EXPECT_EQ(d->memory_used_bytes, 1899345920ull);
  EXPECT_EQ(d->compute_capability, "9.0");
  EXPECT_EQ(d->arch, "sm_90");
  EXPECT_EQ(d->driver_version, "550.54.15");
  EXPECT_EQ(d->cuda_driver_version, "12.4");
  EXPECT_EQ(d->pcie_generation, 5);
  EXPECT_EQ(d->pcie_width, 16);
  EXPECT_EQ(d->mig_enabled, true);
  EXPECT_DOUBLE_EQ(d->power_watts.value_or(0), 312.5);
  EXPECT_EQ(d->temperature_c, 41);
  EXPECT_EQ(d->utilization_percent, 7);
  EXPECT_EQ(d->numa_node, 0);  // NVML does not say; sysfs does
  EXPECT_EQ(d->pci_vendor_id, 0x10deu);
  EXPECT_EQ(d->pci_device_id, 0x2330u);
  const Device* d1 = find_id(r, "cuda:1");
  EXPECT_EQ(d1->pci_bus_id, "0000:2a:00.0");
  EXPECT_FALSE(d1->memory_total_bytes.has_value());  // NVML refused: unknown
  EXPECT_EQ(d1->mig_enabled, false);
}

// NVML lists the GPUs this process may use: the other NVIDIA GPUs on the bus are kept as unavailable, with
// why (here 2 of the fixture's 8 are listed).
TEST(Nvml, GpusOnTheBusThatNvmlLeavesOutAreUnavailable) {
  g_init_result = 0;
  FakeMachine m(fixture("nvidia-dgx-h100"));
  m.hide("/proc/driver/nvidia");
  m.set_link("/sys/bus/pci/devices/0000:3a:00.0/driver", "../../../../bus/pci/drivers/nvidia");
  FakeLoader loader;
  loader.add("libnvidia-ml.so.1", fake_nvml_symbols());
  Registry r = detect(m, loader);
  ASSERT_EQ(testing::count_family(r, kFamilyCuda), 2);
  ASSERT_EQ(r.unavailable.size(), 6u);
  for (const Device& d : r.unavailable) {
    EXPECT_NE(d.pci_bus_id, "0000:18:00.0");  // listed by NVML: usable, not repeated here
    const std::string why = d.unavailable_reason.value_or("");
    if (d.pci_bus_id == "0000:3a:00.0") {
      EXPECT_NE(why.find("NVML does not list it"), std::string::npos) << why;
    } else {
      EXPECT_NE(why.find("no driver is bound"), std::string::npos) << why;
    }
  }
}

TEST(Nvml, InitFailureFallsBackToProcfs) {
  g_init_result = 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  FakeLoader loader;
  loader.add("libnvidia-ml.so.1", fake_nvml_symbols());
  FakeMachine m(fixture("nvidia-dgx-h100"));
  Registry r = detect(m, loader);
  g_init_result = 0;
  EXPECT_EQ(testing::count_family(r, kFamilyCuda), 8);
  bool warned = false;
  for (const auto& w : r.warnings) warned = warned || w.find("Driver Not Loaded") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST(Nvml, MissingRequiredSymbolFallsBack) {
  auto symbols = fake_nvml_symbols();
  symbols.erase("nvmlDeviceGetMemoryInfo");
  FakeLoader loader;
  loader.add("libnvidia-ml.so.1", symbols);
  FakeMachine m(fixture("nvidia-dgx-h100"));
  Registry r = detect(m, loader);
  EXPECT_EQ(testing::count_family(r, kFamilyCuda), 8);
  bool warned = false;
  for (const auto& w : r.warnings)
    warned = warned || w.find("lacks nvmlDeviceGetMemoryInfo") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST(Nvml, OptionalSymbolsMayBeMissing) {
  auto symbols = fake_nvml_symbols();
  symbols.erase("nvmlDeviceGetMigMode");
  symbols.erase("nvmlDeviceGetPowerUsage");
  FakeLoader loader;
  loader.add("libnvidia-ml.so.1", symbols);
  FakeMachine m(fixture("nvidia-dgx-h100"));
  m.hide("/proc/driver/nvidia");
  Registry r = detect(m, loader);
  ASSERT_EQ(testing::count_family(r, kFamilyCuda), 2);
  EXPECT_FALSE(find_id(r, "cuda:0")->mig_enabled.has_value());
  EXPECT_FALSE(find_id(r, "cuda:0")->power_watts.has_value());
  EXPECT_EQ(find_id(r, "cuda:0")->temperature_c, 41);
}

TEST(Nvml, NvLinksAndThePeerMatrix) {
  g_init_result = 0;
  FakeMachine m(fixture("nvidia-dgx-h100"));
  m.hide("/proc/driver/nvidia");
  FakeLoader loader;
  loader.add("libnvidia-ml.so.1", fake_nvml_symbols());
  Registry r = detect(m, loader);
  const Device* d = find_id(r, "cuda:0");
  ASSERT_EQ(d->nvlinks.size(), 4u);
  EXPECT_TRUE(d->nvlinks[3].active);
  EXPECT_EQ(d->nvlinks[3].index, 3);
  EXPECT_EQ(d->nvlinks[0].version, "4.0");
  EXPECT_EQ(d->nvlinks[0].peer_pci_bus_id, "0000:2a:00.0");
  EXPECT_EQ(d->nvlinks[0].peer_type, "gpu");
  ASSERT_EQ(r.io.peers.size(), 1u);
  EXPECT_EQ(r.io.peers[0].type, "nvlink");
  EXPECT_EQ(r.io.peers[0].links, 4);
  EXPECT_EQ(r.io.peers[0].bandwidth_bytes_per_s, 4u * 25'000'000'000u);  // Hopper: 25 GB/s per link
  EXPECT_EQ(d->memory_bandwidth_bytes_per_s, 3'350'000'000'000u);
  EXPECT_EQ(d->memory_bandwidth_source, "catalogue");
}

TEST(Nvml, WithoutNvLinkSymbolsThePeersArePcie) {
  auto symbols = fake_nvml_symbols();
  for (const char* s : {"nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkVersion",
                        "nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemoteDeviceType"})
    symbols.erase(s);
  FakeLoader loader;
  loader.add("libnvidia-ml.so.1", symbols);
  FakeMachine m(fixture("nvidia-dgx-h100"));
  m.hide("/proc/driver/nvidia");
  Registry r = detect(m, loader);
  EXPECT_TRUE(find_id(r, "cuda:0")->nvlinks.empty());
  ASSERT_EQ(r.io.peers.size(), 1u);
  EXPECT_EQ(r.io.peers[0].type, "pcie") << "the capture has no PCI links: the path is not guessed";
}

}  // namespace
}  // namespace gantry::hw

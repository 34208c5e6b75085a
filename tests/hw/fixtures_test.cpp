// Every vendor through a captured fixture tree.
#include <gtest/gtest.h>

#include "hw/hw_test_util.h"

namespace gantry::hw {
namespace {

using testing::count_family;
using testing::detect_fixture;
using testing::find_id;

constexpr uint64_t kGiB = 1024ull * 1024 * 1024;

TEST(Fixtures, NvidiaDgxWithoutNvmlUsesProcfsAndKeepsMemoryUnknown) {
  Registry r = detect_fixture("nvidia-dgx-h100");
  ASSERT_EQ(count_family(r, kFamilyCuda), 8);  // the NVSwitch (class 0x0680) is not a GPU
  const Device* d = find_id(r, "cuda:0");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->kind, DeviceKind::kGpu);
  EXPECT_EQ(d->vendor, "nvidia");
  EXPECT_EQ(d->name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(d->pci_bus_id, "0000:18:00.0");
  EXPECT_EQ(d->uuid, "GPU-0a1f3c2e-5b7d-4c19-8e2f-0b3d9c4e7f100");
  EXPECT_EQ(d->driver_version, "535.104.05");
  EXPECT_EQ(d->compute_capability, "9.0");
  EXPECT_EQ(d->arch, "sm_90");
  EXPECT_EQ(d->numa_node, 0);
  EXPECT_EQ(d->pcie_generation, 5);
  EXPECT_EQ(d->pcie_width, 16);
  EXPECT_FALSE(d->memory_total_bytes.has_value()) << "no NVML: memory must be unknown, not guessed";
  EXPECT_FALSE(d->memory_free_bytes.has_value());
  EXPECT_EQ(find_id(r, "cuda:7")->numa_node, 1);
  EXPECT_EQ(find_id(r, "cuda:7")->pci_bus_id, "0000:db:00.0");
  bool warned = false;
  for (const auto& w : r.warnings) warned = warned || w.find("NVML unavailable") != std::string::npos;
  EXPECT_TRUE(warned);
  EXPECT_EQ(r.cpu.sockets, 2);
  EXPECT_EQ(r.cpu.physical_cores, 16);
  EXPECT_EQ(r.cpu.logical_cores, 32);
  EXPECT_EQ(r.cpu.numa_nodes, 2);
  EXPECT_EQ(r.cpu.cache.l3_bytes, 107520ull * 1024);
  EXPECT_EQ(r.host.memory_total_bytes, 2113378612ull * 1024);
  EXPECT_FALSE(r.host.memory_limit_bytes.has_value());  // memory.max = max
  EXPECT_EQ(r.host.cgroup_version, "v2");
  EXPECT_EQ(r.environment.sys_vendor, "NVIDIA");
  EXPECT_FALSE(r.environment.container.has_value());
}

TEST(Fixtures, AmdMi300xFromSysfsAndKfd) {
  Registry r = detect_fixture("amd-mi300x");
  ASSERT_EQ(count_family(r, kFamilyRocm), 8);  // the 0x14a0 function of the card is not a GPU
  const Device* d = find_id(r, "rocm:0");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->name, "AMD Instinct MI300X OAM");
  EXPECT_EQ(d->vendor, "amd");
  EXPECT_EQ(d->memory_total_bytes, 206141652992ull);
  EXPECT_EQ(d->memory_free_bytes, 206141652992ull - 289000000ull);
  EXPECT_EQ(d->arch, "gfx942");
  EXPECT_EQ(d->cores, 304);
  EXPECT_EQ(d->driver_version, "6.7.0");
  EXPECT_EQ(d->pci_bus_id, "0000:05:00.0");
  EXPECT_TRUE(d->uuid.has_value());
  EXPECT_EQ(find_id(r, "rocm:7")->numa_node, 1);
  EXPECT_EQ(r.cpu.vendor, "AuthenticAMD");
  EXPECT_EQ(r.host.cgroup_version, "v1");
  EXPECT_FALSE(r.host.memory_limit_bytes.has_value()) << "v1 'unlimited' (~2^63) is no limit";
  EXPECT_FALSE(r.host.cpu_quota_cores.has_value()) << "cfs_quota_us -1 is no limit";
}

TEST(Fixtures, AmdMi250xGfx90aHexStepping) {
  Registry r = detect_fixture("amd-mi250x");
  ASSERT_EQ(count_family(r, kFamilyRocm), 2);
  EXPECT_EQ(find_id(r, "rocm:0")->arch, "gfx90a");
  EXPECT_EQ(find_id(r, "rocm:0")->name, "AMD Instinct MI250X");
  EXPECT_EQ(find_id(r, "rocm:0")->cores, 110);
  EXPECT_EQ(find_id(r, "rocm:1")->memory_total_bytes, 68702699520ull);
  EXPECT_EQ(r.cpu.numa_nodes, 4);
  EXPECT_EQ(r.cpu.isa.end(), std::find(r.cpu.isa.begin(), r.cpu.isa.end(), "avx512f"));
}

TEST(Fixtures, IntelLaptopWithNpu) {
  Registry r = detect_fixture("intel-laptop-npu");
  const Device* gpu = find_id(r, "intel-gpu:0");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->kind, DeviceKind::kGpu);
  EXPECT_EQ(gpu->name, "Intel Arc Graphics (Meteor Lake)");
  EXPECT_FALSE(gpu->memory_total_bytes.has_value()) << "an iGPU shares host memory";
  const Device* npu = find_id(r, "intel-npu:0");
  ASSERT_NE(npu, nullptr);
  EXPECT_EQ(npu->kind, DeviceKind::kNpu);
  EXPECT_EQ(npu->vendor, "intel");
  EXPECT_EQ(npu->name, "Intel NPU (Meteor Lake)");
  EXPECT_EQ(npu->pci_bus_id, "0000:00:0b.0");
  EXPECT_EQ(r.devices.size(), 3u);  // CPU, iGPU, NPU; the audio function is ignored
  EXPECT_EQ(r.cpu.logical_cores, 22);
  EXPECT_EQ(r.cpu.physical_cores, 16);
  EXPECT_NE(std::find(r.cpu.isa.begin(), r.cpu.isa.end(), "avx_vnni"), r.cpu.isa.end());
  EXPECT_EQ(std::find(r.cpu.isa.begin(), r.cpu.isa.end(), "avx512f"), r.cpu.isa.end());
  EXPECT_FALSE(r.environment.cloud.has_value());
}

TEST(Fixtures, TpuV5eVm) {
  Registry r = detect_fixture("tpu-v5e-vm");
  ASSERT_EQ(count_family(r, kFamilyTpu), 4);  // gVNIC (same vendor) is not a TPU
  const Device* t = find_id(r, "tpu:0");
  EXPECT_EQ(t->kind, DeviceKind::kTpu);
  EXPECT_EQ(t->name, "Google TPU v5e");
  EXPECT_EQ(t->vendor, "google");
  EXPECT_FALSE(t->memory_total_bytes.has_value());
  EXPECT_EQ(r.environment.cloud, "gcp");
  EXPECT_TRUE(r.environment.virtualized);
}

TEST(Fixtures, TpuFromDevNodesWhenPciIsHidden) {
  testing::FakeMachine m(testing::fixture("tpu-v5e-vm"));
  m.hide("/sys/bus/pci");
  testing::FakeLoader loader;
  Registry r = detect(m, loader);
  EXPECT_EQ(count_family(r, kFamilyTpu), 4);
  EXPECT_EQ(find_id(r, "tpu:3")->name, "Google TPU");
}

TEST(Fixtures, CgroupV2LimitedDockerContainer) {
  Registry r = detect_fixture("container-cgroup2", {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}});
  EXPECT_EQ(r.host.cgroup_version, "v2");
  ASSERT_TRUE(r.host.cpu_quota_cores.has_value());
  EXPECT_DOUBLE_EQ(*r.host.cpu_quota_cores, 2.0);
  EXPECT_EQ(r.host.memory_limit_bytes, 8 * kGiB);
  EXPECT_EQ(r.devices[0].memory_total_bytes, 8 * kGiB) << "the CPU device holds what the container may use";
  EXPECT_EQ(r.environment.container, "docker");
  EXPECT_EQ(r.environment.orchestrator, "kubernetes");
  EXPECT_EQ(r.environment.cloud, "aws");
  EXPECT_EQ(r.devices.size(), 1u);
}

TEST(Fixtures, CgroupV2NestedPathTakesTheTightestLimit) {
  testing::FakeMachine m(testing::fixture("container-cgroup2"));
  m.set_file("/proc/self/cgroup", "0::/kubepods/pod1\n");
  m.set_file("/sys/fs/cgroup/kubepods/pod1/cpu.max", "50000 100000\n");
  m.set_file("/sys/fs/cgroup/kubepods/memory.max", "1073741824\n");
  testing::FakeLoader loader;
  Registry r = detect(m, loader);
  EXPECT_DOUBLE_EQ(r.host.cpu_quota_cores.value_or(0), 0.5);
  EXPECT_EQ(r.host.memory_limit_bytes, kGiB);
}

TEST(Fixtures, CgroupV1Limits) {
  testing::FakeMachine m(testing::fixture("amd-mi300x"));
  m.set_file("/sys/fs/cgroup/memory/memory.limit_in_bytes", "4294967296\n");
  m.set_file("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "350000\n");
  testing::FakeLoader loader;
  Registry r = detect(m, loader);
  EXPECT_EQ(r.host.cgroup_version, "v1");
  EXPECT_EQ(r.host.memory_limit_bytes, 4 * kGiB);
  EXPECT_DOUBLE_EQ(r.host.cpu_quota_cores.value_or(0), 3.5);
}

TEST(Fixtures, HabanaGaudi2) {
  Registry r = detect_fixture("gaudi2");
  ASSERT_EQ(count_family(r, kFamilyGaudi), 2);
  const Device* g = find_id(r, "gaudi:0");
  EXPECT_EQ(g->kind, DeviceKind::kAsic);
  EXPECT_EQ(g->name, "Habana Gaudi2");
  EXPECT_EQ(g->driver_version, "1.17.0-495ab5b");
  EXPECT_EQ(g->pci_bus_id, "0000:19:00.0");
  EXPECT_EQ(find_id(r, "gaudi:1")->numa_node, 1);
}

TEST(Fixtures, AwsInferentia2) {
  Registry r = detect_fixture("aws-inf2");
  ASSERT_EQ(count_family(r, kFamilyNeuron), 1);  // ENA shares the vendor id
  const Device* n = find_id(r, "neuron:0");
  EXPECT_EQ(n->name, "AWS Inferentia2");
  EXPECT_EQ(n->cores, 2);
  EXPECT_EQ(n->driver_version, "2.18.12.0");
  EXPECT_EQ(r.environment.cloud, "aws");
}

TEST(Fixtures, NeuronFromDevNodesWhenPciIsHidden) {
  testing::FakeMachine m(testing::fixture("aws-inf2"));
  m.hide("/sys/bus/pci/devices");
  testing::FakeLoader loader;
  Registry r = detect(m, loader);
  ASSERT_EQ(count_family(r, kFamilyNeuron), 1);
  EXPECT_EQ(find_id(r, "neuron:0")->cores, 2);
}

TEST(Fixtures, QualcommCloudAi100) {
  Registry r = detect_fixture("qaic-ai100");
  const Device* q = find_id(r, "qaic:0");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->kind, DeviceKind::kAsic);
  EXPECT_EQ(q->vendor, "qualcomm");
  EXPECT_EQ(q->name, "Qualcomm Cloud AI 100");
  EXPECT_EQ(q->pcie_generation, 3);
  EXPECT_EQ(q->pcie_width, 8);
}

TEST(Fixtures, AmdXdnaLaptopWithIntegratedRadeon) {
  Registry r = detect_fixture("amd-xdna-laptop");
  const Device* npu = find_id(r, "amd-xdna:0");
  ASSERT_NE(npu, nullptr);
  EXPECT_EQ(npu->kind, DeviceKind::kNpu);
  EXPECT_EQ(npu->name, "AMD XDNA NPU (Phoenix)");
  const Device* gpu = find_id(r, "rocm:0");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->arch, "gfx1103");
  EXPECT_EQ(gpu->memory_total_bytes, 512ull * 1024 * 1024);
}

TEST(Fixtures, ArmGravitonFromSysfsTopology) {
  Registry r = detect_fixture("arm-graviton3");
  EXPECT_EQ(r.cpu.architecture, "aarch64");
  EXPECT_EQ(r.cpu.vendor, "ARM");
  EXPECT_EQ(r.cpu.model, "Neoverse-V1");
  EXPECT_EQ(r.cpu.logical_cores, 4);
  EXPECT_EQ(r.cpu.physical_cores, 4);
  EXPECT_EQ(r.cpu.sockets, 1);
  for (const char* f : {"asimd", "asimddp", "sve", "i8mm", "bf16"}) {
    EXPECT_NE(std::find(r.cpu.isa.begin(), r.cpu.isa.end(), f), r.cpu.isa.end()) << f;
  }
  EXPECT_EQ(std::find(r.cpu.isa.begin(), r.cpu.isa.end(), "sme"), r.cpu.isa.end());
}

TEST(Fixtures, VisibleDevicesByIndexAndUuid) {
  Registry r = detect_fixture("nvidia-dgx-h100", {{"CUDA_VISIBLE_DEVICES", "3,GPU-1a1f"}});
  ASSERT_EQ(count_family(r, kFamilyCuda), 2);
  EXPECT_EQ(find_id(r, "cuda:0")->pci_bus_id, "0000:5d:00.0");  // CUDA order follows the variable
  EXPECT_EQ(find_id(r, "cuda:1")->pci_bus_id, "0000:2a:00.0");
  EXPECT_EQ(r.environment.visible_devices.at("CUDA_VISIBLE_DEVICES"), "3,GPU-1a1f");
}

// ai-hwaccel keeps present-but-unusable devices with available false: so does the registry, apart from the
// usable ones (nothing plans on them), each with why.
TEST(Fixtures, HiddenGpusAreKeptAsUnavailableWithTheVariableThatHidThem) {
  Registry r = detect_fixture("nvidia-dgx-h100", {{"CUDA_VISIBLE_DEVICES", "3,GPU-1a1f"}});
  ASSERT_EQ(count_family(r, kFamilyCuda), 2);
  ASSERT_EQ(r.unavailable.size(), 6u);
  for (size_t i = 0; i < r.unavailable.size(); ++i) {
    const Device& d = r.unavailable[i];
    EXPECT_EQ(d.id, "cuda:unavailable:" + std::to_string(i));
    EXPECT_FALSE(d.available);
    EXPECT_EQ(d.unavailable_reason, "hidden by CUDA_VISIBLE_DEVICES=3,GPU-1a1f");
    EXPECT_NE(d.pci_bus_id, "0000:5d:00.0");  // not one of the two selected
    EXPECT_NE(d.pci_bus_id, "0000:2a:00.0");
  }
  for (const Device& d : r.devices) EXPECT_TRUE(d.available) << d.id;
  // Every GPU is accounted for once: 2 usable + 6 hidden.
  EXPECT_EQ(detect_fixture("nvidia-dgx-h100").unavailable.size(), 0u);
  Registry none = detect_fixture("nvidia-dgx-h100", {{"NVIDIA_VISIBLE_DEVICES", "void"}});
  EXPECT_EQ(count_family(none, kFamilyCuda), 0);
  ASSERT_EQ(none.unavailable.size(), 8u);
  EXPECT_EQ(none.unavailable[0].unavailable_reason, "hidden by NVIDIA_VISIBLE_DEVICES=void");
}

// A GPU on the PCI bus that no driver lists: usable only when the NVIDIA driver holds it (procfs hidden
// from this process), else unavailable with the driver that holds it, or none.
TEST(Fixtures, AGpuWithoutTheNvidiaDriverIsUnavailableWithTheDriverNamed) {
  const std::string gpu = "0000:18:00.0";
  const std::string link = "/sys/bus/pci/devices/" + gpu + "/driver";
  auto detect_with = [&](std::optional<std::string> driver) {
    testing::FakeMachine m(testing::fixture("nvidia-dgx-h100"));
    m.hide("/proc/driver/nvidia");  // the driver lists nothing
    if (driver) m.set_link(link, "../../../../bus/pci/drivers/" + *driver);
    testing::FakeLoader loader;
    return detect(m, loader);
  };
  Registry none = detect_with(std::nullopt);
  EXPECT_EQ(count_family(none, kFamilyCuda), 0);
  ASSERT_EQ(none.unavailable.size(), 8u);
  const Device* d = nullptr;
  for (const Device& u : none.unavailable)
    if (u.pci_bus_id == gpu) d = &u;
  ASSERT_NE(d, nullptr);
  EXPECT_FALSE(d->available);
  EXPECT_EQ(d->family, kFamilyCuda);
  EXPECT_NE(d->unavailable_reason->find("no driver is bound to it"), std::string::npos)
      << *d->unavailable_reason;

  Registry vfio = detect_with("vfio-pci");
  for (const Device& u : vfio.unavailable) {
    if (u.pci_bus_id == gpu) {
      EXPECT_NE(u.unavailable_reason->find("bound to vfio-pci"), std::string::npos) << *u.unavailable_reason;
    }
  }
  Registry nouveau = detect_with("nouveau");
  for (const Device& u : nouveau.unavailable) {
    if (u.pci_bus_id == gpu) {
      EXPECT_NE(u.unavailable_reason->find("nouveau"), std::string::npos) << *u.unavailable_reason;
    }
  }

  // Bound to nvidia: CUDA reaches it though procfs is hidden, so it is a usable device (from sysfs).
  Registry bound = detect_with("nvidia");
  ASSERT_EQ(count_family(bound, kFamilyCuda), 1);
  EXPECT_EQ(find_id(bound, "cuda:0")->pci_bus_id, gpu);
  EXPECT_EQ(bound.unavailable.size(), 7u);
}

TEST(Fixtures, VisibleDevicesStopAtInvalidEntryAndEmptyHidesAll) {
  EXPECT_EQ(
      count_family(detect_fixture("nvidia-dgx-h100", {{"CUDA_VISIBLE_DEVICES", "1,99,2"}}), kFamilyCuda), 1);
  EXPECT_EQ(count_family(detect_fixture("nvidia-dgx-h100", {{"CUDA_VISIBLE_DEVICES", ""}}), kFamilyCuda), 0);
  EXPECT_EQ(count_family(detect_fixture("nvidia-dgx-h100", {{"NVIDIA_VISIBLE_DEVICES", "all"}}), kFamilyCuda),
            8);
  EXPECT_EQ(
      count_family(detect_fixture("nvidia-dgx-h100", {{"NVIDIA_VISIBLE_DEVICES", "void"}}), kFamilyCuda), 0);
  EXPECT_EQ(count_family(detect_fixture("nvidia-dgx-h100",
                                        {{"NVIDIA_VISIBLE_DEVICES", "0,1,2"}, {"CUDA_VISIBLE_DEVICES", "2"}}),
                         kFamilyCuda),
            1);
}

TEST(Fixtures, HipAndRocrVisibleDevices) {
  Registry r =
      detect_fixture("amd-mi300x", {{"ROCR_VISIBLE_DEVICES", "4,5,6"}, {"HIP_VISIBLE_DEVICES", "2"}});
  ASSERT_EQ(count_family(r, kFamilyRocm), 1);
  EXPECT_EQ(find_id(r, "rocm:0")->pci_bus_id, "0000:c6:00.0");
}

TEST(Fixtures, EveryProbeIsTimed) {
  Registry r = detect_fixture("amd-mi300x");
  for (const char* p : {"cpu", "environment", "pci", "nvidia", "amd", "intel_gpu", "accel", "tpu", "neuron",
                        "vulkan", "total"}) {
    ASSERT_TRUE(r.timings_ms.count(p)) << p;
    EXPECT_GE(r.timings_ms.at(p), 0.0);
  }
}

}  // namespace
}  // namespace gantry::hw

namespace gantry::hw {
namespace {

TEST(Fixtures, ThreadedAndInlineFileProbesAgree) {
  for (const char* name : {"nvidia-dgx-h100", "amd-mi300x", "intel-laptop-npu", "gaudi2", "garbage"}) {
    testing::FakeMachine m(testing::fixture(name));
    testing::FakeLoader loader;
    DetectOptions inline_probes, threaded;
    threaded.parallel_file_probes = true;
    Registry a = detect(m, loader, inline_probes);
    Registry b = detect(m, loader, threaded);
    a.timings_ms.clear();
    b.timings_ms.clear();
    EXPECT_EQ(a, b) << name;
  }
}

}  // namespace
}  // namespace gantry::hw

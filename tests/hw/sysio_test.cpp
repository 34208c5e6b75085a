// System I/O: bandwidth tables, the peer matrix, storage, network and RDMA, on fixtures and built trees.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "gantry/core/file_io.h"
#include "gantry/hw/bandwidth.h"
#include "gantry/hw/query.h"
#include "gantry/hw/registry_json.h"
#include "hw/hw_test_util.h"
#include "hw/probes.h"

namespace gantry::hw {
namespace {

namespace fs = std::filesystem;
using testing::count_family;
using testing::detect_fixture;
using testing::find_id;

constexpr uint64_t kGen5x16 = 16ull * (32'000'000'000ull * 128 / 130 / 8);  // 63.0 GB/s

int count_type(const Registry& r, std::string_view type) {
  int n = 0;
  for (const auto& p : r.io.peers) n += p.type == type;
  return n;
}

TEST(Bandwidth, PcieGenerationAndWidthToBytes) {
  EXPECT_EQ(pcie_bandwidth_bytes_per_s(1, 1), 250'000'000u);
  EXPECT_EQ(pcie_bandwidth_bytes_per_s(3, 16), 16ull * 984'615'384u);
  EXPECT_EQ(pcie_bandwidth_bytes_per_s(4, 4), 4ull * 1'969'230'769u);
  EXPECT_EQ(pcie_bandwidth_bytes_per_s(5, 16), kGen5x16);
  EXPECT_EQ(pcie_bandwidth_bytes_per_s(6, 16), 16ull * 7'562'500'000u);
  EXPECT_FALSE(pcie_bandwidth_bytes_per_s(0, 16).has_value());
  EXPECT_FALSE(pcie_bandwidth_bytes_per_s(8, 16).has_value());
  EXPECT_FALSE(pcie_bandwidth_bytes_per_s(4, 0).has_value());
}

TEST(Bandwidth, KnownDevicesByPciIdThenName) {
  const KnownDevice* h100 = find_known_device(0x10de, 0x2330, "");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(h100->id, "h100-80gb");
  EXPECT_EQ(h100->memory_bandwidth_bytes_per_s, 3'350'000'000'000u);
  // The PCI id wins over a misleading name; a name alone is enough when there is no id.
  EXPECT_EQ(find_known_device(0x10de, 0x2331, "NVIDIA H100 80GB HBM3")->id, "h100-pcie");
  EXPECT_EQ(find_known_device(std::nullopt, std::nullopt, "NVIDIA A100 80GB PCIe")->id, "a100-80gb-pcie");
  EXPECT_EQ(find_known_device(std::nullopt, std::nullopt, "NVIDIA A100-SXM4-80GB")->id, "a100-80gb");
  EXPECT_EQ(find_known_device(0x1002, 0x74a1, "anything")->id, "mi300x");
  // A vendor mismatch never matches by name; unknown devices get nothing.
  EXPECT_EQ(find_known_device(0x8086, 0x1234, "Fake H100 80GB HBM3 clone"), nullptr);
  EXPECT_EQ(find_known_device(0x10de, 0x9999, "NVIDIA GeForce GTX 1050"), nullptr);
  EXPECT_EQ(find_known_device(std::nullopt, std::nullopt, ""), nullptr);
  std::set<std::string_view> ids;
  for (const auto& k : known_devices()) {
    EXPECT_TRUE(ids.insert(k.id).second) << "duplicate id " << k.id;
    EXPECT_GT(k.memory_bandwidth_bytes_per_s, 0u) << k.id;
    EXPECT_FALSE(k.source.empty()) << k.id;
    EXPECT_EQ(known_device_by_id(k.id), &k);
  }
}

TEST(Bandwidth, HostMemoryFromThePlatformTableOnlyForFixedPlatforms) {
  CpuInfo cpu;
  cpu.model = "AMD EPYC 9654 96-Core Processor";
  cpu.sockets = 2;
  HostMemoryBandwidth h = host_memory_from_platform(cpu);
  EXPECT_EQ(h.bytes_per_s, 2u * 12 * 4800 * 1'000'000ull * 8);
  EXPECT_EQ(h.source, "catalogue");
  cpu.model = "Intel(R) Xeon(R) Platinum 8480CL";
  cpu.sockets = 1;
  EXPECT_EQ(host_memory_from_platform(cpu).bytes_per_s, 8u * 4800 * 1'000'000ull * 8);
  cpu.model = "Intel(R) Xeon(R) Platinum 8380H CPU @ 2.90GHz";  // Cooper Lake: 6 channels
  EXPECT_EQ(host_memory_from_platform(cpu).bytes_per_s, 6u * 3200 * 1'000'000ull * 8);
  cpu.model = "AMD EPYC 7R13 Processor";
  EXPECT_EQ(host_memory_from_platform(cpu).bytes_per_s, 8u * 3200 * 1'000'000ull * 8);
  for (const char* unknown : {"Intel(R) Core(TM) Ultra 7 155H", "AMD Ryzen 7 7840U w/ Radeon  780M Graphics",
                              "Intel(R) Xeon(R) Processor", "Neoverse-V2", ""}) {
    cpu.model = unknown;
    HostMemoryBandwidth u = host_memory_from_platform(cpu);
    EXPECT_FALSE(u.bytes_per_s.has_value()) << unknown;
    EXPECT_EQ(u.source, "unknown") << unknown;
  }
}

// SMBIOS type 17, 0x28 bytes: 64-bit data width, 32 GiB, DDR5, 5600 rated, 4800 configured.
std::string dimm_raw(uint16_t size_mb, uint8_t type, uint16_t speed, uint16_t configured) {
  std::string raw(0x28, '\0');
  raw[0] = 17;
  raw[1] = 0x28;
  auto put16 = [&](size_t off, uint16_t v) {
    raw[off] = static_cast<char>(v & 0xff);
    raw[off + 1] = static_cast<char>(v >> 8);
  };
  put16(0x08, 72);  // total width with ECC
  put16(0x0A, 64);
  put16(0x0C, size_mb);
  raw[0x12] = static_cast<char>(type);
  put16(0x15, speed);
  put16(0x20, configured);
  return raw + std::string("DIMM_A1\0\0", 9);
}

TEST(Bandwidth, DimmsFromSmbios) {
  auto d = parse_smbios_memory_device(dimm_raw(0x7FFF, 0x22, 5600, 4800));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->type, "DDR5");
  EXPECT_EQ(d->configured_mts, 4800u);
  EXPECT_EQ(d->data_width_bits, 64u);
  auto small = parse_smbios_memory_device(dimm_raw(16384, 0x1A, 3200, 0));
  ASSERT_TRUE(small.has_value());
  EXPECT_EQ(small->size_bytes, 16ull << 30);
  EXPECT_EQ(small->configured_mts, 3200u) << "no configured speed: the rated one";
  auto empty = parse_smbios_memory_device(dimm_raw(0, 0x02, 0, 0));
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(empty->size_bytes, 0u);
  EXPECT_FALSE(parse_smbios_memory_device("\x10\x28").has_value()) << "type 16 is not a memory device";
  EXPECT_FALSE(parse_smbios_memory_device(std::string(4, '\x11')).has_value()) << "truncated";

  HostMemoryBandwidth h = host_memory_from_dimms({*small, *small, *empty});
  EXPECT_EQ(h.bytes_per_s, 2u * 3200 * 1'000'000ull * 8);
  EXPECT_EQ(h.source, "dimm");
  EXPECT_FALSE(host_memory_from_dimms({*empty}).bytes_per_s.has_value());
}

TEST(SysIo, NvidiaH100VmCapture) {
  Registry r = detect_fixture("nvidia-h100-vm", {{"NVIDIA_VISIBLE_DEVICES", "0"}});
  ASSERT_EQ(count_family(r, kFamilyCuda), 1);
  const Device* d = find_id(r, "cuda:0");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(d->pci_bus_id, "0000:00:06.0");
  EXPECT_EQ(d->driver_version, "580.159.04");
  EXPECT_EQ(d->compute_capability, "9.0");
  EXPECT_FALSE(d->memory_total_bytes.has_value()) << "no NVML in a sysroot: memory unknown";
  EXPECT_EQ(d->pcie_generation, 5);
  EXPECT_EQ(d->pcie_width, 16);
  EXPECT_EQ(d->pcie_bandwidth_bytes_per_s, kGen5x16);
  EXPECT_EQ(d->memory_bandwidth_bytes_per_s, 3'350'000'000'000u);
  EXPECT_EQ(d->memory_bandwidth_source, "catalogue");
  EXPECT_TRUE(r.io.peers.empty()) << "one GPU: no pairs";
  EXPECT_EQ(r.io.memory.source, "unknown") << "a VM hides the CPU model: no platform figure";
  EXPECT_FALSE(r.devices[0].memory_bandwidth_bytes_per_s.has_value());
  EXPECT_TRUE(r.io.storage.empty()) << "the capture has no /sys/block";
  EXPECT_EQ(r.cpu.logical_cores, 16);

  // The same machine seen with NVML (schema 1, captured there) agrees on what both paths know.
  auto text = read_file(testing::fixture("nvidia-h100-vm") + "/gantry-detect.json");
  ASSERT_TRUE(text.ok());
  auto nvml = registry_from_json_text(*text);
  ASSERT_TRUE(nvml.ok()) << "a schema-1 document still reads: " << nvml.status().to_string();
  EXPECT_EQ(nvml->schema_version, 1);
  EXPECT_EQ(nvml->io, SystemIo{}) << "schema 1 has no io: unknown";
  const Device* n = find_id(*nvml, "cuda:0");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->name, d->name);
  EXPECT_EQ(n->pci_bus_id, d->pci_bus_id);
  EXPECT_EQ(n->pci_device_id, d->pci_device_id);
  EXPECT_EQ(n->pcie_generation, d->pcie_generation);
  EXPECT_EQ(n->pcie_width, d->pcie_width);
  EXPECT_EQ(n->driver_version, d->driver_version);
  EXPECT_EQ(n->compute_capability, d->compute_capability);
}

TEST(SysIo, DgxPeersByNumaAndInfiniBand) {
  Registry r = detect_fixture("nvidia-dgx-h100");
  ASSERT_EQ(count_family(r, kFamilyCuda), 8);
  ASSERT_EQ(r.io.peers.size(), 28u);  // 8 choose 2
  EXPECT_EQ(count_type(r, "cross-numa"), 16);
  EXPECT_EQ(count_type(r, "pcie"), 12) << "same NUMA node, bridges not captured: not guessed";
  EXPECT_EQ(r.io.peers[0].a, "cuda:0");
  EXPECT_EQ(r.io.peers[0].b, "cuda:1");
  EXPECT_EQ(r.io.peers[0].bandwidth_bytes_per_s, kGen5x16);
  EXPECT_FALSE(r.io.peers[0].links.has_value());
  EXPECT_EQ(find_id(r, "cuda:3")->memory_bandwidth_bytes_per_s, 3'350'000'000'000u);
  EXPECT_EQ(r.io.memory.bytes_per_s, 2u * 8 * 4800 * 1'000'000ull * 8);
  EXPECT_EQ(r.io.memory.source, "catalogue");
  EXPECT_EQ(r.devices[0].memory_bandwidth_bytes_per_s, r.io.memory.bytes_per_s);
  ASSERT_EQ(r.io.rdma.size(), 1u);
  EXPECT_EQ(r.io.rdma[0].name, "mlx5_0");
  EXPECT_EQ(r.io.rdma[0].state, "ACTIVE");
  EXPECT_EQ(r.io.rdma[0].link_layer, "InfiniBand");
  EXPECT_EQ(r.io.rdma[0].rate_bytes_per_s, 50'000'000'000u);
  EXPECT_EQ(r.io.rdma[0].pci_bus_id, "0000:1a:00.0");
  ASSERT_EQ(r.io.network.size(), 1u) << "lo has no device";
  EXPECT_EQ(r.io.network[0].name, "ibp26s0");
  EXPECT_EQ(r.io.network[0].driver, "mlx5_core");
  EXPECT_EQ(r.io.network[0].rdma_devices, std::vector<std::string>{"mlx5_0"});
  EXPECT_FALSE(r.io.network[0].speed_bytes_per_s.has_value());
}

TEST(SysIo, AmdMi300xHiveIsXgmi) {
  Registry r = detect_fixture("amd-mi300x");
  ASSERT_EQ(count_family(r, kFamilyRocm), 8);
  EXPECT_EQ(find_id(r, "rocm:0")->xgmi_hive_id, "0x13de3adfc0d9c301");
  EXPECT_EQ(count_type(r, "xgmi"), 28);
  EXPECT_EQ(find_id(r, "rocm:5")->memory_bandwidth_bytes_per_s, 5'300'000'000'000u);
  EXPECT_EQ(r.io.memory.bytes_per_s, 2u * 12 * 4800 * 1'000'000ull * 8);
}

TEST(SysIo, AmdMi250xWithoutHiveIsPcie) {
  Registry r = detect_fixture("amd-mi250x");
  ASSERT_EQ(r.io.peers.size(), 1u);
  EXPECT_NE(r.io.peers[0].type, "xgmi");
  EXPECT_EQ(find_id(r, "rocm:0")->memory_bandwidth_bytes_per_s, 1'638'400'000'000u);
}

TEST(SysIo, UnknownDevicesGetNoBandwidth) {
  Registry r = detect_fixture("intel-laptop-npu");
  for (const auto& d : r.devices) EXPECT_FALSE(d.memory_bandwidth_bytes_per_s.has_value()) << d.id;
  EXPECT_EQ(r.io.memory.source, "unknown");
  // The garbage fixture's GPUs have unreadable names but real PCI ids (an H100, an MI300X): the id decides.
  Registry g = detect_fixture("garbage");
  EXPECT_EQ(find_id(g, "cuda:0")->memory_bandwidth_bytes_per_s, 3'350'000'000'000u);
  EXPECT_EQ(find_id(g, "rocm:0")->memory_bandwidth_bytes_per_s, 5'300'000'000'000u);
}

TEST(SysIo, EveryFixtureCarriesIo) {
  for (const char* name : {"nvidia-dgx-h100", "nvidia-h100-vm", "amd-mi300x", "amd-mi250x",
                           "intel-laptop-npu", "tpu-v5e-vm", "container-cgroup2", "gaudi2", "aws-inf2",
                           "qaic-ai100", "amd-xdna-laptop", "arm-graviton3", "garbage"}) {
    Registry r = detect_fixture(name);
    ASSERT_TRUE(r.timings_ms.count("io")) << name;
    auto j = registry_to_json(r);
    ASSERT_TRUE(j.contains("io")) << name;
    for (const char* k : {"host_memory_bandwidth", "peers", "storage", "network", "rdma"})
      EXPECT_TRUE(j["io"].contains(k)) << name << " " << k;
  }
  EXPECT_EQ(detect_fixture("aws-inf2").io.network.at(0).driver, "ena");
  EXPECT_EQ(detect_fixture("tpu-v5e-vm").io.network.at(0).driver, "gvnic");
  EXPECT_EQ(detect_fixture("arm-graviton3").io.memory.bytes_per_s, 8u * 4800 * 1'000'000ull * 8);
}

// A sysfs-like tree built in a temporary directory, with real symbolic links.
class Tree {
 public:
  Tree()
      : root_(fs::temp_directory_path() /
              ("gantry-sysio-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++))) {
    fs::create_directories(root_);
  }
  ~Tree() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  void file(const std::string& path, const std::string& text) {
    fs::create_directories((root_ / path.substr(1)).parent_path());
    std::ofstream(root_ / path.substr(1)) << text << "\n";
  }
  void link(const std::string& path, const std::string& target) {
    fs::create_directories((root_ / path.substr(1)).parent_path());
    fs::create_directory_symlink(target, root_ / path.substr(1));
  }
  std::string root() const { return root_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path root_;
};

TEST(SysIo, PciePathsGiveSwitchHostAndNuma) {
  Tree t;
  // GPUs A and B under one switch (16:00.0), C under another root port of the same root complex, D on
  // another root complex of the same NUMA node, E on NUMA node 1.
  const std::map<std::string, std::string> paths = {
      {"0000:18:00.0", "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0"},
      {"0000:19:00.0", "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0"},
      {"0000:20:00.0", "pci0000:15/0000:15:02.0/0000:20:00.0"},
      {"0000:40:00.0", "pci0000:3f/0000:3f:01.0/0000:40:00.0"},
      {"0000:90:00.0", "pci0000:8f/0000:8f:01.0/0000:90:00.0"},
  };
  std::vector<Device> devices;
  for (const auto& [bus, path] : paths) {
    t.file("/sys/devices/" + path + "/numa_node", bus == "0000:90:00.0" ? "1" : "0");
    t.link("/sys/bus/pci/devices/" + bus, "../../../devices/" + path);
    Device d;
    d.id = "cuda:" + std::to_string(devices.size());
    d.family = "cuda";
    d.pci_bus_id = bus;
    d.numa_node = bus == "0000:90:00.0" ? 1 : 0;
    d.pcie_bandwidth_bytes_per_s = bus == "0000:20:00.0" ? 1000 : 2000;
    devices.push_back(d);
  }
  testing::FakeMachine m(t.root());
  auto peers = internal::compute_peers(m, devices);
  ASSERT_EQ(peers.size(), 10u);
  auto type = [&](const std::string& a, const std::string& b) {
    for (const auto& p : peers) {
      if (p.a == a && p.b == b) return p.type;
    }
    return std::string("none");
  };
  EXPECT_EQ(type("cuda:0", "cuda:1"), "pcie-switch");
  EXPECT_EQ(type("cuda:0", "cuda:2"), "pcie-host");
  EXPECT_EQ(type("cuda:0", "cuda:3"), "pcie-host");
  EXPECT_EQ(type("cuda:0", "cuda:4"), "cross-numa");
  EXPECT_EQ(type("cuda:2", "cuda:3"), "pcie-host");
  EXPECT_EQ(peers[1].bandwidth_bytes_per_s, 1000u) << "the slower link of the pair";
  // Without NUMA figures and without links, nothing is known of the path.
  for (auto& d : devices) d.numa_node.reset();
  testing::FakeMachine bare(testing::fixture("garbage"));
  for (const auto& p : internal::compute_peers(bare, devices)) EXPECT_EQ(p.type, "pcie");
}

TEST(SysIo, XgmiBandwidthFromKfdLinks) {
  Tree t;
  const std::string nodes = "/sys/class/kfd/kfd/topology/nodes";
  t.file(nodes + "/0/properties", "cpu_cores_count 96\nlocation_id 0\ndomain 0");
  t.file(nodes + "/1/properties", "simd_count 1216\nlocation_id 1280\ndomain 0");  // 0000:05:00.0
  t.file(nodes + "/2/properties", "simd_count 1216\nlocation_id 9728\ndomain 0");  // 0000:26:00.0
  t.file(nodes + "/1/io_links/0/properties", "type 2\nnode_from 1\nnode_to 0\nmax_bandwidth 32000");  // PCIe
  t.file(nodes + "/1/p2p_links/0/properties", "type 11\nnode_from 1\nnode_to 2\nmax_bandwidth 64000");
  std::vector<Device> devices(3);
  const char* buses[] = {"0000:05:00.0", "0000:26:00.0", "0000:46:00.0"};
  for (size_t i = 0; i < devices.size(); ++i) {
    devices[i].id = "rocm:" + std::to_string(i);
    devices[i].family = "rocm";
    devices[i].pci_bus_id = buses[i];
    devices[i].xgmi_hive_id = "0x13de3adfc0d9c301";
  }
  testing::FakeMachine m(t.root());
  auto peers = internal::compute_peers(m, devices);
  ASSERT_EQ(peers.size(), 3u);
  for (const auto& p : peers) EXPECT_EQ(p.type, "xgmi");
  EXPECT_EQ(peers[0].bandwidth_bytes_per_s, 64'000'000'000u) << "KFD's max_bandwidth is MB/s";
  EXPECT_FALSE(peers[1].bandwidth_bytes_per_s.has_value()) << "no KFD link listed: unknown";
}

TEST(SysIo, NvlinkPeersDirectAndThroughSwitch) {
  std::vector<Device> devices(3);
  for (size_t i = 0; i < devices.size(); ++i) {
    devices[i].id = "cuda:" + std::to_string(i);
    devices[i].family = "cuda";
    devices[i].compute_capability = "9.0";
    devices[i].pci_bus_id = "0000:1" + std::to_string(i) + ":00.0";
  }
  // 0 and 1: four direct links; 2: none (PCIe only).
  for (int l = 0; l < 4; ++l) {
    devices[0].nvlinks.push_back(NvLink{l, true, "4.0", "0000:11:00.0", "gpu"});
    devices[1].nvlinks.push_back(NvLink{l, true, "4.0", "0000:10:00.0", "gpu"});
  }
  devices[1].nvlinks.push_back(NvLink{4, false, std::nullopt, std::nullopt, std::nullopt});
  testing::FakeMachine m(testing::fixture("garbage"));
  auto peers = internal::compute_peers(m, devices);
  ASSERT_EQ(peers.size(), 3u);
  EXPECT_EQ(peers[0].type, "nvlink");
  EXPECT_EQ(peers[0].links, 4);
  EXPECT_EQ(peers[0].bandwidth_bytes_per_s, 100'000'000'000u);
  EXPECT_EQ(peers[1].type, "pcie");
  // Every GPU on NVSwitches (a DGX): 18 links each to switches.
  for (auto& d : devices) {
    d.nvlinks.clear();
    for (int l = 0; l < 18; ++l) d.nvlinks.push_back(NvLink{l, true, "4.0", "0000:05:00.0", "switch"});
  }
  peers = internal::compute_peers(m, devices);
  for (const auto& p : peers) {
    EXPECT_EQ(p.type, "nvlink");
    EXPECT_EQ(p.links, 18);
    EXPECT_EQ(p.bandwidth_bytes_per_s, 450'000'000'000u);
  }
}

TEST(SysIo, StorageNetworkAndTheDeviceUnderAPath) {
  Tree t;
  const std::string nvme = "/sys/devices/pci0000:00/0000:00:1d.0/0000:3b:00.0/nvme/nvme0/nvme0n1";
  t.file(nvme + "/size", "1953525168");
  t.file(nvme + "/queue/rotational", "0");
  t.file(nvme + "/removable", "0");
  t.file(nvme + "/device/model", "Samsung SSD 990 PRO 1TB                 ");
  t.file(nvme + "/nvme0n1p2/partition", "2");
  t.link("/sys/block/nvme0n1", "../devices/pci0000:00/0000:00:1d.0/0000:3b:00.0/nvme/nvme0/nvme0n1");
  t.link("/sys/dev/block/259:2",
         "../../devices/pci0000:00/0000:00:1d.0/0000:3b:00.0/nvme/nvme0/nvme0n1/nvme0n1p2");
  t.file("/sys/bus/pci/devices/0000:3b:00.0/current_link_speed", "16.0 GT/s PCIe");
  t.file("/sys/bus/pci/devices/0000:3b:00.0/current_link_width", "4");
  const std::string sda = "/sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda";
  t.file(sda + "/size", "7814037168");
  t.file(sda + "/queue/rotational", "1");
  t.file(sda + "/removable", "0");
  t.file(sda + "/device/model", "WDC WD40EFRX-68N");
  t.link("/sys/block/sda", "../devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda");
  t.link("/sys/dev/block/8:0",
         "../../devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda");
  t.file("/sys/block/loop0/size", "0");
  t.file("/sys/class/net/eth0/speed", "25000");
  t.file("/sys/class/net/eth0/operstate", "up");
  t.file("/sys/class/net/eth0/device/uevent", "DRIVER=ice\nPCI_SLOT_NAME=0000:4b:00.0");
  t.file("/sys/class/net/eth1/speed", "-1");
  t.file("/sys/class/net/eth1/operstate", "down");
  t.file("/sys/class/net/eth1/device/uevent", "DRIVER=ice\nPCI_SLOT_NAME=0000:4b:00.1");
  t.file("/sys/class/net/docker0/operstate", "up");  // virtual: no device
  t.file("/sys/class/infiniband/irdma0/device/uevent", "DRIVER=ice\nPCI_SLOT_NAME=0000:4b:00.0");
  t.file("/sys/class/infiniband/irdma0/ports/1/state", "4: ACTIVE");
  t.file("/sys/class/infiniband/irdma0/ports/1/rate", "25 Gb/sec (1X EDR)");
  t.file("/sys/class/infiniband/irdma0/ports/1/link_layer", "Ethernet");

  testing::FakeMachine m(t.root());
  std::vector<std::string> warnings;
  auto storage = internal::probe_storage(m, warnings);
  ASSERT_EQ(storage.size(), 2u) << "loop devices are left out";
  const BlockDevice& n = storage[0];
  EXPECT_EQ(n.name, "nvme0n1");
  EXPECT_TRUE(n.nvme);
  EXPECT_EQ(n.rotational, false);
  EXPECT_EQ(n.model, "Samsung SSD 990 PRO 1TB");
  EXPECT_EQ(n.size_bytes, 1953525168ull * 512);
  EXPECT_EQ(n.pci_bus_id, "0000:3b:00.0");
  EXPECT_EQ(n.link_bytes_per_s, pcie_bandwidth_bytes_per_s(4, 4));
  EXPECT_EQ(storage[1].name, "sda");
  EXPECT_EQ(storage[1].rotational, true);
  EXPECT_FALSE(storage[1].nvme);
  EXPECT_FALSE(storage[1].link_bytes_per_s.has_value());

  SystemIo io;
  internal::probe_network(m, io, warnings);
  ASSERT_EQ(io.network.size(), 2u) << "docker0 is virtual";
  EXPECT_EQ(io.network[0].name, "eth0");
  EXPECT_EQ(io.network[0].speed_bytes_per_s, 25000ull * 125000);
  EXPECT_EQ(io.network[0].driver, "ice");
  EXPECT_EQ(io.network[0].rdma_devices, std::vector<std::string>{"irdma0"});
  EXPECT_FALSE(io.network[1].speed_bytes_per_s.has_value()) << "-1 while the link is down";
  EXPECT_EQ(io.network[1].operstate, "down");
  EXPECT_TRUE(io.network[1].rdma_devices.empty());
  ASSERT_EQ(io.rdma.size(), 1u);
  EXPECT_EQ(io.rdma[0].rate_bytes_per_s, 25'000'000'000u / 8);
  EXPECT_EQ(io.rdma[0].link_layer, "Ethernet");
  EXPECT_TRUE(warnings.empty()) << warnings.front();

  m.set_device_of("/models/m.gguf", 259, 2);
  m.set_device_of("/data/big.gguf", 8, 0);
  m.set_device_of("/overlay/m.gguf", 0, 52);
  auto on_nvme = storage_for_path(m, "/models/m.gguf");
  ASSERT_TRUE(on_nvme.ok()) << on_nvme.status().to_string();
  EXPECT_EQ(on_nvme->name, "nvme0n1") << "the partition's disk";
  EXPECT_EQ(on_nvme->link_bytes_per_s, n.link_bytes_per_s);
  auto on_sda = storage_for_path(m, "/data/big.gguf");
  ASSERT_TRUE(on_sda.ok()) << on_sda.status().to_string();
  EXPECT_EQ(on_sda->name, "sda");
  auto overlay = storage_for_path(m, "/overlay/m.gguf");
  ASSERT_FALSE(overlay.ok());
  EXPECT_EQ(overlay.status().code(), StatusCode::kNotFound);
  EXPECT_NE(overlay.status().message().find("/overlay/m.gguf"), std::string::npos);
  EXPECT_FALSE(storage_for_path(m, "/nowhere").ok());

  // Registry-level: detect() carries the same storage.
  testing::FakeLoader loader;
  Registry r = detect(m, loader);
  EXPECT_EQ(r.io.storage, storage);
}

TEST(SysIo, StorageForPathOnThisMachine) {
  const std::string path = std::string(GANTRY_SOURCE_DIR) + "/CMakeLists.txt";
  auto b = storage_for_path(path);
  if (!b.ok()) {
    ASSERT_EQ(b.status().code(), StatusCode::kNotFound) << b.status().to_string();
    GTEST_SKIP() << "this machine shows no block device under the source tree: " << b.status().message();
  }
  EXPECT_FALSE(b->name.empty());
  DetectOptions no_vulkan;
  no_vulkan.use_vulkan = false;
  Registry r = detect_local(no_vulkan);
  bool listed = false;
  for (const auto& s : r.io.storage) listed = listed || s.name == b->name;
  EXPECT_TRUE(listed) << b->name << " is not in the registry's storage list";
}

}  // namespace
}  // namespace gantry::hw

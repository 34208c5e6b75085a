// Registry: every compute device on one machine (each listed once), the CPU and host memory, the
// environment it runs in, and what went wrong while looking. Plain data; built by detect().
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::hw {

// kRemote: a device of another host, reached through ggml's RPC protocol (gantry/hw/rpc.h). The protocol
// does not say what the device is (ggml itself treats every RPC device as a GPU: an offload target).
enum class DeviceKind { kCpu, kGpu, kNpu, kTpu, kAsic, kRemote };

std::string_view device_kind_name(DeviceKind kind);  // "cpu", "gpu", "npu", "tpu", "asic", "remote"
Result<DeviceKind> parse_device_kind(std::string_view name);

// Software families a backend targets. Names are stable JSON strings.
inline constexpr std::string_view kFamilyCpu = "cpu";
inline constexpr std::string_view kFamilyCuda = "cuda";                 // NVIDIA
inline constexpr std::string_view kFamilyRocm = "rocm";                 // AMD Instinct/Radeon (amdgpu)
inline constexpr std::string_view kFamilyIntelGpu = "intel-gpu";        // i915 / xe
inline constexpr std::string_view kFamilyIntelNpu = "intel-npu";        // intel_vpu
inline constexpr std::string_view kFamilyXdna = "amd-xdna";             // amdxdna
inline constexpr std::string_view kFamilyTpu = "tpu";                   // Google
inline constexpr std::string_view kFamilyGaudi = "gaudi";               // Habana
inline constexpr std::string_view kFamilyNeuron = "neuron";             // AWS Inferentia/Trainium
inline constexpr std::string_view kFamilyQaic = "qaic";                 // Qualcomm Cloud AI
inline constexpr std::string_view kFamilyGraphcore = "graphcore";       // Graphcore IPU (/dev/ipuN)
inline constexpr std::string_view kFamilyGroq = "groq";                 // Groq LPU (/dev/groqN)
inline constexpr std::string_view kFamilyCerebras = "cerebras";         // Cerebras WSE (/dev/cerebras*)
inline constexpr std::string_view kFamilySamsungNpu = "samsung-npu";    // Samsung Exynos NPU
inline constexpr std::string_view kFamilyMediatekApu = "mediatek-apu";  // MediaTek APU / MDLA
inline constexpr std::string_view kFamilyVulkan = "vulkan";             // seen only through Vulkan
inline constexpr std::string_view kFamilyRpc = "rpc";                   // another host's device, ggml RPC
// Families some backends target that discovery never reports on Linux (so their providers find no device).
inline constexpr std::string_view kFamilyApple = "apple";      // Apple GPU / Neural Engine (CoreML)
inline constexpr std::string_view kFamilyDirectX = "directx";  // DirectML on Windows

// One NVLink of an NVIDIA GPU, as NVML reports it.
struct NvLink {
  int index = 0;
  bool active = false;
  std::optional<std::string> version;          // "4.0" (nvmlNvlinkVersion_t decoded)
  std::optional<std::string> peer_pci_bus_id;  // the GPU or NVSwitch at the other end
  std::optional<std::string> peer_type;        // "gpu", "switch", "ibmnpu"; nullopt when NVML cannot say
  bool operator==(const NvLink&) const = default;
};

// How a remote device (DeviceKind::kRemote) is reached, and what the link measured when it was probed.
struct RemoteLink {
  std::string endpoint;                          // "host:port" of the RPC server, as given
  int device_index = 0;                          // the device's index on that server
  std::string protocol;                          // the server's RPC protocol version, "7.0.0"
  std::optional<double> round_trip_s;            // median of small request/response exchanges
  std::optional<uint64_t> upload_bytes_per_s;    // a few MiB sent to the device, less one round trip
  std::optional<uint64_t> download_bytes_per_s;  // a few MiB read back, less one round trip
  bool operator==(const RemoteLink&) const = default;
};

struct Device {
  std::string id;  // "cuda:0", "rocm:1", "cpu:0", "rpc:0", ... unique in a registry
  DeviceKind kind = DeviceKind::kGpu;
  std::string family;  // one of kFamily*
  std::string vendor;  // "nvidia", "amd", "intel", "google", "habana", "aws", "qualcomm", ...
  std::string name;
  std::optional<std::string> uuid;
  std::optional<std::string> pci_bus_id;  // "0000:1b:00.0", lower case
  std::optional<uint32_t> pci_vendor_id;
  std::optional<uint32_t> pci_device_id;
  std::optional<int> numa_node;
  // Memory the device owns; nullopt = unknown (never guessed).
  std::optional<uint64_t> memory_total_bytes;
  std::optional<uint64_t> memory_free_bytes;
  std::optional<uint64_t> memory_used_bytes;
  std::optional<std::string> compute_capability;  // NVIDIA "9.0"
  std::optional<std::string> arch;                // "sm_90", "gfx942", ...
  std::optional<std::string> driver_version;
  std::optional<std::string> cuda_driver_version;  // NVIDIA: highest CUDA the driver supports
  std::optional<int> pcie_generation;
  std::optional<int> pcie_width;
  std::optional<bool> mig_enabled;
  std::optional<double> power_watts;
  std::optional<int> temperature_c;
  std::optional<int> utilization_percent;
  std::optional<int> cores;          // compute cores/engines where the driver reports them
  std::vector<std::string> sources;  // probes that saw it: "nvml", "procfs", "sysfs", "vulkan", ...
  // System I/O (schema 2).
  // Peak memory bandwidth of the device's own memory (bytes/s) and where the figure comes from:
  // "catalogue" (the known-device table, gantry/hw/bandwidth.h) for accelerators; for the CPU the host
  // memory figure ("dimm" or "catalogue"). Never guessed: unknown devices stay nullopt.
  std::optional<uint64_t> memory_bandwidth_bytes_per_s;
  std::optional<std::string> memory_bandwidth_source;
  std::optional<uint64_t> pcie_bandwidth_bytes_per_s;  // per direction, from pcie_generation x pcie_width
  std::vector<NvLink> nvlinks;                         // NVIDIA through NVML; empty when none or unknown
  std::optional<std::string> xgmi_hive_id;             // AMD: GPUs of one hive are linked by xGMI ("0x...")
  std::optional<RemoteLink> remote;                    // kRemote devices only
  // Whether this process can use the device (ai-hwaccel's `available`). Registry::devices holds only usable
  // ones; a device present but unusable is in Registry::unavailable with available false and the reason
  // ("hidden by CUDA_VISIBLE_DEVICES=1", "no driver is bound to it").
  bool available = true;
  std::optional<std::string> unavailable_reason;

  bool operator==(const Device&) const = default;
};

// The id budgets, plans and placements name a device by: "cpu" for host memory (one domain, however many
// sockets), else "<family>:<index>" ("cuda:0", "rocm:1"), the registry's own id for an accelerator.
std::string memory_device_id(std::string_view family, int index);
std::string memory_device_id(const Device& device);
// Whether a memory device id names host memory ("cpu"), rather than an accelerator's own memory.
inline bool is_host_memory(std::string_view memory_device_id) { return memory_device_id == kFamilyCpu; }
// A device's index among the devices of its family (the number after ':' in its id); 0 for the CPU.
int family_index(const Device& device);

struct CacheInfo {
  std::optional<uint64_t> l1d_bytes, l1i_bytes, l2_bytes, l3_bytes;  // per instance seen by cpu0
  bool operator==(const CacheInfo&) const = default;
};

struct CpuInfo {
  std::string vendor;        // "GenuineIntel", "AuthenticAMD", "ARM", ...
  std::string model;         // "Intel(R) Xeon(R) Platinum 8480+"
  std::string architecture;  // "x86_64", "aarch64"
  int sockets = 0;
  int physical_cores = 0;
  int logical_cores = 0;
  std::vector<std::string> isa;  // inference-relevant features, lower case as in /proc/cpuinfo
  CacheInfo cache;
  int numa_nodes = 0;
  bool operator==(const CpuInfo&) const = default;
};

struct HostInfo {
  std::optional<uint64_t> memory_total_bytes;
  std::optional<uint64_t> memory_available_bytes;
  // Container limits (cgroup v2 cpu.max/memory.max, v1 cfs quota/limit_in_bytes); nullopt = none.
  std::optional<double> cpu_quota_cores;
  std::optional<uint64_t> memory_limit_bytes;
  std::optional<std::string> cgroup_version;  // "v1" / "v2"
  bool operator==(const HostInfo&) const = default;
};

struct EnvironmentInfo {
  std::optional<std::string> container;                              // "docker", "podman", "containerd", ...
  std::optional<std::string> orchestrator;                           // "kubernetes"
  std::optional<std::string> cloud;                                  // "aws", "gcp", "azure", "oci", ...
  std::optional<std::string> sys_vendor, product_name, bios_vendor;  // DMI
  bool virtualized = false;                                          // the CPU reports a hypervisor
  std::map<std::string, std::string> visible_devices;                // CUDA_VISIBLE_DEVICES=... as set
  std::string sysroot = "/";
  bool operator==(const EnvironmentInfo&) const = default;
};

// How two accelerators reach each other. Types, best first: "nvlink" (direct or through NVSwitch),
// "xgmi" (AMD Infinity Fabric), "pcie-switch" (a PCIe switch below the root port is common to both),
// "pcie-host" (one root complex, or two root complexes of one NUMA node), "cross-numa" (different NUMA nodes:
// traffic crosses the CPU interconnect), "pcie" (PCIe, the path between them not readable).
struct PeerLink {
  std::string a, b;  // device ids, a listed before b in Registry::devices
  std::string type;
  std::optional<int> links;                       // NVLink: active links between them (or to the switch)
  std::optional<uint64_t> bandwidth_bytes_per_s;  // per direction, where known
  bool operator==(const PeerLink&) const = default;
};

// Host (CPU) memory bandwidth: peak from the DIMMs (SMBIOS type 17: populated DIMMs x configured speed x data
// width, an upper bound: two DIMMs on one channel share it) or from the CPU platform catalogue (channels x
// speed per socket x sockets); `measured` from `gantry detect --measure-bandwidth` (a triad).
struct HostMemoryBandwidth {
  std::optional<uint64_t> bytes_per_s;
  std::string source = "unknown";     // "dimm", "catalogue", "unknown"
  std::optional<std::string> detail;  // "8 x DDR5-4800 per socket x 2 sockets"
  std::optional<uint64_t> measured_bytes_per_s;
  bool operator==(const HostMemoryBandwidth&) const = default;
};

// A block device from /sys/block (loop, ram and zram devices are left out).
struct BlockDevice {
  std::string name;  // "nvme0n1", "sda", "vda"
  std::optional<std::string> model;
  std::optional<uint64_t> size_bytes;
  std::optional<bool> rotational;
  bool removable = false;
  bool nvme = false;
  std::optional<std::string> pci_bus_id;     // the controller, where the sysfs path names it
  std::optional<uint64_t> link_bytes_per_s;  // NVMe: the controller's PCIe link, per direction
  bool operator==(const BlockDevice&) const = default;
};

// A network interface from /sys/class/net backed by a device (virtual ones and lo are left out).
struct NetInterface {
  std::string name;
  std::optional<uint64_t> speed_bytes_per_s;  // the negotiated link speed; nullopt when the driver hides it
  std::optional<std::string> operstate;       // "up", "down", ...
  std::optional<std::string> driver;
  std::optional<std::string> pci_bus_id;
  std::vector<std::string> rdma_devices;  // RDMA devices on the same PCI function
  bool operator==(const NetInterface&) const = default;
};

// An RDMA device from /sys/class/infiniband (InfiniBand, RoCE, EFA), its best active port.
struct RdmaDevice {
  std::string name;  // "mlx5_0"
  std::optional<std::string> pci_bus_id;
  std::optional<std::string> state;       // of the port: "ACTIVE", "DOWN", ...
  std::optional<std::string> link_layer;  // "InfiniBand", "Ethernet"
  std::optional<uint64_t> rate_bytes_per_s;
  int ports = 0;
  bool operator==(const RdmaDevice&) const = default;
};

struct SystemIo {
  HostMemoryBandwidth memory;
  std::vector<PeerLink> peers;  // one per pair of accelerators that can talk (same family), a before b
  std::vector<BlockDevice> storage;
  std::vector<NetInterface> network;
  std::vector<RdmaDevice> rdma;
  bool operator==(const SystemIo&) const = default;
};

// 2: devices carry memory/PCIe bandwidth, NVLinks and xGMI hives; the registry carries `io`.
inline constexpr int kRegistrySchemaVersion = 2;

struct Registry {
  int schema_version = kRegistrySchemaVersion;
  HostInfo host;
  CpuInfo cpu;
  std::vector<Device> devices;  // the CPU first, then accelerators in probe order
  // Devices present on the machine that this process cannot use, each with `unavailable_reason`. Kept
  // apart so that nothing plans on them; their ids ("cuda:unavailable:0") never collide with a usable one.
  std::vector<Device> unavailable;
  SystemIo io;
  EnvironmentInfo environment;
  std::vector<std::string> warnings;
  std::map<std::string, double> timings_ms;  // per probe, plus "total"
  bool operator==(const Registry&) const = default;
};

}  // namespace gantry::hw

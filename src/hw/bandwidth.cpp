// The known-device table, PCIe link rates, the CPU platform memory table and SMBIOS DIMM decoding.
#include "gantry/hw/bandwidth.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "probe_util.h"

namespace gantry::hw {
namespace {

constexpr uint64_t kGBps = 1000ull * 1000 * 1000;  // datasheets count 1e9 bytes
constexpr uint64_t kGiB = 1024ull * 1024 * 1024;   // memory sizes are binary (HBM stacks)
constexpr uint64_t kMB = 1000ull * 1000;           // on-chip SRAM is given in decimal MB
constexpr uint32_t kNvidia = 0x10de, kAmd = 0x1002, kHabana = 0x1da3;

bool contains_ci(std::string_view hay, std::string_view needle) {
  return internal::to_lower(hay).find(internal::to_lower(needle)) != std::string::npos;
}

}  // namespace

const std::vector<KnownDevice>& known_devices() {
  // Order matters for name matching: more specific names first ("A100 80GB PCIe" before "A100 80GB").
  // Figures per device as the driver lists it (an MI250X is two devices of 1638.4 GB/s each).
  static const std::vector<KnownDevice> kTable = {
      {"h100-80gb",
       "NVIDIA H100 80GB SXM5",
       kNvidia,
       {0x2330},
       {"H100 80GB HBM3", "H100 SXM"},
       3350 * kGBps,
       "NVIDIA H100 datasheet (SXM5: 3.35 TB/s)"},
      {"h100-pcie",
       "NVIDIA H100 PCIe 80GB",
       kNvidia,
       {0x2331},
       {"H100 PCIe"},
       2000 * kGBps,
       "NVIDIA H100 datasheet (PCIe: 2 TB/s)"},
      {"h100-nvl",
       "NVIDIA H100 NVL 94GB",
       kNvidia,
       {0x2321},
       {"H100 NVL"},
       3900 * kGBps,
       "NVIDIA H100 datasheet (NVL: 3.9 TB/s)"},
      {"h200",
       "NVIDIA H200 141GB SXM",
       kNvidia,
       {0x2335},
       {"H200"},
       4800 * kGBps,
       "NVIDIA H200 datasheet (4.8 TB/s)"},
      {"a100-80gb-pcie",
       "NVIDIA A100 80GB PCIe",
       kNvidia,
       {0x20b5},
       {"A100 80GB PCIe"},
       1935 * kGBps,
       "NVIDIA A100 datasheet (80GB PCIe: 1935 GB/s)"},
      {"a100-80gb",
       "NVIDIA A100 80GB SXM4",
       kNvidia,
       {0x20b2},
       {"A100-SXM4-80GB", "A100 80GB"},
       2039 * kGBps,
       "NVIDIA A100 datasheet (80GB SXM: 2039 GB/s)"},
      {"a100-40gb",
       "NVIDIA A100 40GB",
       kNvidia,
       {0x20b0, 0x20f1},
       {"A100-SXM4-40GB", "A100-PCIE-40GB"},
       1555 * kGBps,
       "NVIDIA A100 datasheet (40GB: 1555 GB/s)"},
      {"l40s", "NVIDIA L40S", kNvidia, {0x26b9}, {"L40S"}, 864 * kGBps, "NVIDIA L40S datasheet (864 GB/s)"},
      {"l4", "NVIDIA L4", kNvidia, {0x27b8}, {"NVIDIA L4"}, 300 * kGBps, "NVIDIA L4 datasheet (300 GB/s)"},
      {"a10g",
       "NVIDIA A10G",
       kNvidia,
       {0x2237},
       {"A10G"},
       600 * kGBps,
       "NVIDIA A10 datasheet (600 GB/s); AWS's A10G is an A10 variant"},
      {"a10",
       "NVIDIA A10",
       kNvidia,
       {0x2236},
       {"NVIDIA A10"},
       600 * kGBps,
       "NVIDIA A10 datasheet (600 GB/s)"},
      {"t4", "NVIDIA T4", kNvidia, {0x1eb8}, {"Tesla T4"}, 320 * kGBps, "NVIDIA T4 datasheet (320 GB/s)"},
      {"v100",
       "NVIDIA V100",
       kNvidia,
       {0x1db1, 0x1db4, 0x1db5, 0x1db6},
       {"V100"},
       900 * kGBps,
       "NVIDIA V100 datasheet (900 GB/s)"},
      {"rtx-4090",
       "NVIDIA GeForce RTX 4090",
       kNvidia,
       {0x2684},
       {"RTX 4090"},
       1008 * kGBps,
       "NVIDIA Ada Lovelace whitepaper (RTX 4090: 1008 GB/s)"},
      {"mi325x",
       "AMD Instinct MI325X",
       kAmd,
       {0x74a5},
       {"MI325X"},
       6000 * kGBps,
       "AMD Instinct MI325X datasheet (6 TB/s)"},
      {"mi300x",
       "AMD Instinct MI300X",
       kAmd,
       {0x74a1},
       {"MI300X"},
       5300 * kGBps,
       "AMD Instinct MI300X datasheet (5.3 TB/s)"},
      {"mi300a",
       "AMD Instinct MI300A",
       kAmd,
       {0x74a0},
       {"MI300A"},
       5300 * kGBps,
       "AMD Instinct MI300A datasheet (5.3 TB/s)"},
      {"mi250x-gcd",
       "AMD Instinct MI250X/MI250 (one GCD)",
       kAmd,
       {0x7408, 0x740c},
       {"MI250"},
       1638400ull * 1000 * 1000,
       "AMD Instinct MI250X datasheet (3.2768 TB/s for the two GCDs of one OAM)"},
      {"mi210",
       "AMD Instinct MI210",
       kAmd,
       {0x740f},
       {"MI210"},
       1638400ull * 1000 * 1000,
       "AMD Instinct MI210 datasheet (1.6384 TB/s)"},
      {"mi100",
       "AMD Instinct MI100",
       kAmd,
       {0x738c},
       {"MI100"},
       1228800ull * 1000 * 1000,
       "AMD Instinct MI100 datasheet (1.2288 TB/s)"},
      {"gaudi2",
       "Habana Gaudi2",
       kHabana,
       {0x1020},
       {"Gaudi2"},
       2450 * kGBps,
       "Intel Gaudi2 datasheet (2.45 TB/s, 96 GB HBM2E)",
       96 * kGiB},
      {"inferentia2",
       "AWS Inferentia2",
       0,
       {},
       {"Inferentia2"},
       820 * kGBps,
       "AWS Inferentia2 documentation (820 GB/s and 32 GB HBM per chip)",
       32 * kGiB},
      {"tpu-v5e",
       "Google TPU v5e",
       0,
       {},
       {"TPU v5e"},
       819 * kGBps,
       "Google Cloud TPU v5e documentation (819 GB/s and 16 GB HBM per chip)",
       16 * kGiB},
      // Seen only as device nodes (device_node_probe.cpp): their memory is on-chip SRAM.
      {"graphcore-ipu",
       "Graphcore IPU (GC200)",
       0,
       {},
       {"Graphcore IPU"},
       47500 * kGBps,
       "Graphcore GC200 IPU datasheet (900 MB In-Processor-Memory at 47.5 TB/s per IPU)",
       900 * kMB},
      {"groq-lpu",
       "Groq LPU",
       0,
       {},
       {"Groq LPU"},
       80000 * kGBps,
       "Groq LPU documentation (230 MB on-die SRAM at 80 TB/s per chip)",
       230 * kMB},
      {"cerebras-wse3",
       "Cerebras WSE-3",
       0,
       {},
       {"Cerebras Wafer-Scale Engine"},
       21000000 * kGBps,
       "Cerebras WSE-3 datasheet (44 GB on-chip SRAM at 21 PB/s)",
       44 * 1000 * kMB},
  };
  return kTable;
}

const KnownDevice* find_known_device(std::optional<uint32_t> pci_vendor, std::optional<uint32_t> pci_device,
                                     std::string_view name) {
  const auto& table = known_devices();
  if (pci_vendor && pci_device) {
    for (const auto& k : table) {
      if (k.pci_vendor == *pci_vendor &&
          std::find(k.pci_devices.begin(), k.pci_devices.end(), *pci_device) != k.pci_devices.end())
        return &k;
    }
  }
  if (name.empty()) return nullptr;
  for (const auto& k : table) {
    if (pci_vendor && k.pci_vendor != 0 && k.pci_vendor != *pci_vendor) continue;
    for (std::string_view m : k.match) {
      if (contains_ci(name, m)) return &k;
    }
  }
  return nullptr;
}

const KnownDevice* known_device_by_id(std::string_view id) {
  for (const auto& k : known_devices()) {
    if (k.id == id) return &k;
  }
  return nullptr;
}

std::optional<uint64_t> pcie_bandwidth_bytes_per_s(int generation, int width) {
  if (width < 1 || width > 32) return std::nullopt;
  uint64_t lane = 0;  // bytes/s per lane per direction
  switch (generation) {
    case 1:
      lane = 250'000'000;  // 2.5 GT/s, 8b/10b
      break;
    case 2:
      lane = 500'000'000;
      break;
    case 3:
      lane = 8'000'000'000ull * 128 / 130 / 8;
      break;
    case 4:
      lane = 16'000'000'000ull * 128 / 130 / 8;
      break;
    case 5:
      lane = 32'000'000'000ull * 128 / 130 / 8;
      break;
    case 6:
      lane = 64'000'000'000ull * 242 / 256 / 8;  // PAM4, 256-byte FLITs with 242 bytes of payload
      break;
    case 7:
      lane = 128'000'000'000ull * 242 / 256 / 8;
      break;
    default:
      return std::nullopt;
  }
  return lane * static_cast<uint64_t>(width);
}

namespace {

struct Platform {
  int channels;
  int mts;
  const char* type;
};

// The 4-character part number after `key` ("EPYC 9654", "Platinum 8480CL"), or "".
std::string part_after(std::string_view model, std::string_view key) {
  const size_t pos = model.find(key);
  if (pos == std::string_view::npos) return "";
  std::string_view rest = model.substr(pos + key.size());
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  size_t n = 0;
  while (n < rest.size() && std::isalnum(static_cast<unsigned char>(rest[n]))) ++n;
  return std::string(rest.substr(0, n));
}

std::optional<Platform> epyc(std::string_view model) {
  const std::string p = part_after(model, "EPYC");
  if (p.size() != 4) return std::nullopt;
  const char series = p[0], gen = p[3];
  if (series == '7' && gen == '1') return Platform{8, 2666, "DDR4"};                  // Naples
  if (series == '7' && (gen == '2' || gen == '3')) return Platform{8, 3200, "DDR4"};  // Rome, Milan
  if (series == '9' && gen == '4') return Platform{12, 4800, "DDR5"};                 // Genoa
  if (series == '9' && gen == '5') return Platform{12, 6000, "DDR5"};                 // Turin
  if (series == '8' && gen == '4') return Platform{6, 4800, "DDR5"};                  // Siena
  return std::nullopt;
}

std::optional<Platform> xeon_scalable(std::string_view model) {
  std::string p;
  for (const char* tier : {"Platinum", "Gold", "Silver", "Bronze"}) {
    if (p.empty()) p = part_after(model, tier);
  }
  if (p.size() < 4 || !std::isdigit(static_cast<unsigned char>(p[0])) ||
      !std::isdigit(static_cast<unsigned char>(p[1])))
    return std::nullopt;
  const char tier = p[0], gen = p[1];
  const std::string suffix = p.substr(4);
  const bool top = tier == '8' || tier == '6';  // Platinum and Gold 6xxx run the fastest memory
  switch (gen) {
    case '2':  // Cascade Lake
      return Platform{6, top ? 2933 : 2666, "DDR4"};
    case '3':  // Ice Lake; Cooper Lake (an H suffix) has 6 channels
      if (!suffix.empty() && suffix[0] == 'H') return Platform{6, 3200, "DDR4"};
      return Platform{8, top ? 3200 : (tier == '5' ? 2933 : 2666), "DDR4"};
    case '4':  // Sapphire Rapids
      return Platform{8, top ? 4800 : (tier == '5' ? 4400 : 4000), "DDR5"};
    case '5':  // Emerald Rapids
      return Platform{8, top ? 5600 : (tier == '5' ? 5200 : 4400), "DDR5"};
    default:
      return std::nullopt;
  }
}

std::optional<Platform> arm_server(std::string_view model) {
  if (model == "Neoverse-V1") return Platform{8, 4800, "DDR5"};  // AWS Graviton3
  if (model == "Neoverse-N1") return Platform{8, 3200, "DDR4"};  // AWS Graviton2, Ampere Altra
  return std::nullopt;  // Neoverse-V2 is both Graviton4 (DDR5) and Grace (LPDDR5X)
}

}  // namespace

HostMemoryBandwidth host_memory_from_platform(const CpuInfo& cpu) {
  HostMemoryBandwidth h;
  std::optional<Platform> p = epyc(cpu.model);
  if (!p) p = xeon_scalable(cpu.model);
  if (!p) p = arm_server(cpu.model);
  if (!p) return h;
  const int sockets = std::max(1, cpu.sockets);
  h.bytes_per_s = static_cast<uint64_t>(p->channels) * p->mts * 1'000'000ull * 8 * sockets;
  h.source = "catalogue";
  h.detail =
      fmt::format("{} x {}-{} per socket x {} socket{} (platform peak; a VM or container gets a share)",
                  p->channels, p->type, p->mts, sockets, sockets == 1 ? "" : "s");
  return h;
}

std::optional<Dimm> parse_smbios_memory_device(std::string_view raw) {
  auto byte = [&](size_t off) { return static_cast<uint8_t>(raw[off]); };
  auto word = [&](size_t off) { return static_cast<uint32_t>(byte(off) | (byte(off + 1) << 8)); };
  if (raw.size() < 0x17 || byte(0) != 17) return std::nullopt;
  const size_t len = byte(1);
  if (len < 0x17 || len > raw.size()) return std::nullopt;
  Dimm d;
  const uint32_t width = word(0x0A);
  d.data_width_bits = width == 0xFFFF ? 0 : width;
  const uint32_t size = word(0x0C);
  if (size == 0x7FFF && len >= 0x20) {
    d.size_bytes = static_cast<uint64_t>(word(0x1C) | (static_cast<uint64_t>(word(0x1E)) << 16)) << 20;
  } else if (size != 0xFFFF && size != 0) {
    d.size_bytes =
        (size & 0x8000) ? static_cast<uint64_t>(size & 0x7FFF) << 10 : static_cast<uint64_t>(size) << 20;
  }
  switch (byte(0x12)) {
    case 0x18:
      d.type = "DDR3";
      break;
    case 0x1A:
      d.type = "DDR4";
      break;
    case 0x1D:
      d.type = "LPDDR3";
      break;
    case 0x1E:
      d.type = "LPDDR4";
      break;
    case 0x22:
      d.type = "DDR5";
      break;
    case 0x23:
      d.type = "LPDDR5";
      break;
    default:
      break;
  }
  uint32_t speed = word(0x15);
  if (len >= 0x22 && word(0x20) != 0 && word(0x20) != 0xFFFF) speed = word(0x20);  // configured speed
  d.configured_mts = speed == 0xFFFF ? 0 : speed;
  return d;
}

HostMemoryBandwidth host_memory_from_dimms(const std::vector<Dimm>& dimms) {
  HostMemoryBandwidth h;
  uint64_t total = 0;
  int n = 0;
  uint32_t mts = 0;
  std::string type;
  for (const Dimm& d : dimms) {
    if (d.size_bytes == 0 || d.configured_mts == 0 || d.data_width_bits == 0) continue;
    total += static_cast<uint64_t>(d.configured_mts) * 1'000'000ull * d.data_width_bits / 8;
    ++n;
    mts = d.configured_mts;
    type = d.type;
  }
  if (n == 0) return h;
  h.bytes_per_s = total;
  h.source = "dimm";
  h.detail = fmt::format("{} populated DIMM{} ({}-{}; an upper bound: DIMMs sharing a channel share it)", n,
                         n == 1 ? "" : "s", type.empty() ? "unknown type" : type, mts);
  return h;
}

}  // namespace gantry::hw

// Bandwidth figures the registry reports, each from one place:
//  - known_devices(): THE table of accelerators Gantry knows by PCI id or name, with their datasheet
//    (peak) memory bandwidth. The registry marks a figure from it source "catalogue"; the planner's
//    what-if catalogue (data/catalogue.json) takes the bandwidth of the accelerators listed here from it,
//    by `id`, so the two cannot disagree. A device not in the table has no figure: never guessed.
//  - host memory: the DIMMs (SMBIOS) when readable, else the CPU platform table (memory channels and
//    speed per socket), else unknown.
//  - PCIe: generation x width.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/hw/registry.h"

namespace gantry::hw {

struct KnownDevice {
  std::string_view id;    // stable id shared with data/catalogue.json: "h100-80gb"
  std::string_view name;  // marketing name
  uint32_t pci_vendor = 0;
  std::vector<uint32_t> pci_devices;          // PCI device ids of this model (empty: matched by name only)
  std::vector<std::string_view> match;        // substrings of a driver-reported name (case-insensitive)
  uint64_t memory_bandwidth_bytes_per_s = 0;  // datasheet peak, per device as the driver lists it
  std::string_view source;                    // the datasheet the figure comes from
  // The datasheet's memory per device, for accelerators whose driver reports none (TPU, Gaudi, Neuron): the
  // advice may assume it, saying so (gantry/hw/advice.h); the registry never does. 0: not listed.
  uint64_t memory_bytes = 0;
};

const std::vector<KnownDevice>& known_devices();

// The device by PCI ids first (exact), else by name substring; nullptr when unknown.
const KnownDevice* find_known_device(std::optional<uint32_t> pci_vendor, std::optional<uint32_t> pci_device,
                                     std::string_view name);
const KnownDevice* known_device_by_id(std::string_view id);

// Bytes/s per direction of a PCIe link: per-lane rate after encoding (8b/10b to gen 2, 128b/130b for
// gen 3-5, FLIT for gen 6-7) x width. nullopt for an unknown generation or width.
std::optional<uint64_t> pcie_bandwidth_bytes_per_s(int generation, int width);

// Host memory bandwidth from the CPU platform table (channels x MT/s x 8 bytes per socket x sockets):
// only platforms whose memory configuration the CPU fixes (server parts); laptop/desktop CPUs that take
// several memory types stay unknown. Source "catalogue"; nullopt bytes when unknown.
HostMemoryBandwidth host_memory_from_platform(const CpuInfo& cpu);

// One SMBIOS type-17 (memory device) structure as /sys/firmware/dmi/entries/17-*/raw holds it.
struct Dimm {
  uint64_t size_bytes = 0;      // 0: slot empty
  uint32_t configured_mts = 0;  // configured speed (MT/s), else the rated speed
  uint32_t data_width_bits = 0;
  std::string type;  // "DDR4", "DDR5", "LPDDR5", ... or "" when unknown
};
std::optional<Dimm> parse_smbios_memory_device(std::string_view raw);
// Populated DIMMs x speed x width: an upper bound (two DIMMs on one channel share it). Source "dimm".
HostMemoryBandwidth host_memory_from_dimms(const std::vector<Dimm>& dimms);

// A STREAM-style triad (a[i] = b[i] + s * c[i] over three arrays of `array_bytes` each) on `threads`
// threads: the arrays are touched once outside the timing, then passes run until `budget_ms` has passed
// (at least two). Returns the best pass in bytes/s, counting the three arrays moved (STREAM's convention;
// write-allocate traffic is not counted). The one host-memory measurement: `gantry detect
// --measure-bandwidth` and the planner's speed prediction both use it, with one difference they state:
// `huge_pages` asks for transparent huge pages (detect: the memory system's figure, and first touch of arrays
// larger than the LLC fast enough to stay within ~0.3 s); without them (the planner) the triad sees the 4
// KiB-page TLB behaviour that llama.cpp's mmap'd weights see, which in a VM can be half the huge-page figure.
uint64_t measure_triad_bandwidth(int threads, uint64_t array_bytes, int budget_ms, bool huge_pages);

// The array size for `cpu`: 2 x its last-level cache (all sockets; the three arrays together 6 x), at least
// 64 MiB and at most 256 MiB, so the arrays never fit in cache and the probe stays within ~0.5 s.
uint64_t triad_array_bytes(const CpuInfo& cpu);

}  // namespace gantry::hw

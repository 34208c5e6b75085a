// What a registry adds up to, and what it suggests per device (ai-hwaccel's totals and advice): the
// machine's memory totals, each device's own memory (the driver's figure, else the datasheet's with that
// said, else unknown with the reason), and the precisions a model should run at on it, best first, with the
// assumption they rest on. Plain functions over a Registry; `gantry detect --json` prints them ("totals",
// and "advice" per device), and plan/shard.h shards a model over accelerator memory with them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gantry/hw/registry.h"

namespace gantry::hw {

struct Totals {
  uint64_t total_memory_bytes = 0;              // host memory + the accelerator memory below
  uint64_t total_accelerator_memory_bytes = 0;  // accelerators whose own memory the driver reports
  bool has_accelerator = false;                 // a local device other than the CPU
  std::vector<std::string> memory_unknown;      // accelerators (ids) left out of the totals: memory unknown
};

// Accelerators here are local devices other than the CPU (remote ones belong to another host); NPUs and
// integrated GPUs that work in host memory add nothing of their own.
Totals registry_totals(const Registry& registry);

// A device's own memory.
struct DeviceMemory {
  std::optional<uint64_t> bytes;  // the memory a model may assume it has
  // "driver" (the registry's figure: NVML, amdgpu sysfs, habanalabs dram_size, ...), "datasheet"
  // (the driver reports none; the known-device table's figure for this model, gantry/hw/bandwidth.h),
  // "host" (it has none of its own: it works in host memory, bytes = the host's), "unknown".
  std::string source;
  std::string reason;  // for every source but "driver": why, in words
};
DeviceMemory device_memory(const Registry& registry, const Device& device);

// Precisions ("bf16", "fp16", "int8", "int4": model::Precision's names), best first: a model runs at the
// first that fits. Per kind, as ai-hwaccel advises: BF16 on TPU, Gaudi and Neuron; INT8 on NPUs and
// Qualcomm Cloud AI; FP16 -> INT8 -> INT4 on GPUs (and remote GPUs); the CPU: FP32 -> INT8 -> INT4.
struct PrecisionAdvice {
  std::vector<std::string> precisions;
  std::string assumption;  // what the order rests on (the vendor's native format, not probed)
};
PrecisionAdvice precision_advice(const Device& device);

// Bits per weight of a precision named above (fp32 32 ... int4 4); 0 for another name.
int precision_bits(std::string_view precision);

}  // namespace gantry::hw

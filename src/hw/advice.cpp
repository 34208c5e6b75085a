#include "gantry/hw/advice.h"

#include "gantry/hw/bandwidth.h"

namespace gantry::hw {
namespace {

bool is_accelerator(const Device& d) { return d.kind != DeviceKind::kCpu && d.kind != DeviceKind::kRemote; }

// Devices that work in host memory: NPUs, and integrated GPUs (which the driver lists with no memory).
bool uses_host_memory(const Device& d) {
  if (d.family == kFamilyIntelNpu || d.family == kFamilyXdna || d.family == kFamilySamsungNpu ||
      d.family == kFamilyMediatekApu)
    return true;
  return d.family == kFamilyIntelGpu && !d.memory_total_bytes;
}

std::string why_unknown(const Device& d) {
  if (d.family == kFamilyTpu)
    return "the TPU driver exposes no memory size in sysfs (libtpu reports it to the program that opens the "
           "chip), and " +
           d.name + " is not in Gantry's device table";
  if (d.family == kFamilyGaudi)
    return "habanalabs exposes no dram_size for this device (hl-smi reports it), and " + d.name +
           " is not in Gantry's device table";
  if (d.family == kFamilyNeuron)
    return "the Neuron driver exposes no memory size in sysfs (neuron-ls reports it), and " + d.name +
           " is not in Gantry's device table";
  if (d.family == kFamilyQaic)
    return "the qaic driver exposes no memory size in sysfs (qaic-util reports it; Cloud AI 100 cards ship "
           "with 16 or 32 GB)";
  if (d.family == kFamilyCuda) return "NVML is not available, so the GPU's memory is not known";
  return "the driver reports no memory size for " + d.name;
}

}  // namespace

DeviceMemory device_memory(const Registry& r, const Device& d) {
  DeviceMemory m;
  if (d.memory_total_bytes) {
    m.bytes = d.memory_total_bytes;
    m.source = "driver";
    return m;
  }
  if (uses_host_memory(d)) {
    m.bytes = r.host.memory_limit_bytes ? r.host.memory_limit_bytes : r.host.memory_total_bytes;
    m.source = "host";
    m.reason = d.name + " has no memory of its own: it works in host memory (shared with the CPU)";
    return m;
  }
  if (const KnownDevice* k = find_known_device(d.pci_vendor_id, d.pci_device_id, d.name);
      k && k->memory_bytes > 0) {
    m.bytes = k->memory_bytes;
    m.source = "datasheet";
    m.reason = "the driver reports no memory size; assumed from the datasheet: " + std::string(k->source);
    return m;
  }
  m.source = "unknown";
  m.reason = why_unknown(d);
  return m;
}

Totals registry_totals(const Registry& r) {
  Totals t;
  t.total_memory_bytes =
      r.host.memory_limit_bytes ? *r.host.memory_limit_bytes : r.host.memory_total_bytes.value_or(0);
  for (const Device& d : r.devices) {
    if (!is_accelerator(d)) continue;
    t.has_accelerator = true;
    if (uses_host_memory(d)) continue;  // counted with the host
    if (!d.memory_total_bytes) {
      t.memory_unknown.push_back(d.id);
      continue;
    }
    t.total_accelerator_memory_bytes += *d.memory_total_bytes;
  }
  t.total_memory_bytes += t.total_accelerator_memory_bytes;
  return t;
}

PrecisionAdvice precision_advice(const Device& d) {
  PrecisionAdvice a;
  if (d.kind == DeviceKind::kCpu) {
    a.precisions = {"fp32", "int8", "int4"};
    a.assumption =
        "a CPU runs FP32 natively; INT8 and INT4 weights (GGUF Q8_0, Q4) trade a little accuracy for a "
        "quarter or an eighth of the memory and bandwidth";
  } else if (d.family == kFamilyTpu || d.family == kFamilyGaudi || d.family == kFamilyNeuron) {
    a.precisions = {"bf16", "int8"};
    a.assumption = "BF16 is the native format of " + d.name +
                   "'s matrix units (the vendor's documentation; not probed); INT8 where its compiler "
                   "quantises";
  } else if (d.family == kFamilyGraphcore || d.family == kFamilyGroq || d.family == kFamilyCerebras) {
    a.precisions = {"fp16", "int8"};
    a.assumption = "FP16 is the native format of " + d.name +
                   "'s compute (the vendor's documentation; not probed); INT8 where its compiler quantises. "
                   "Its memory is on-chip SRAM: a model larger than it is spread over several chips";
  } else if (d.kind == DeviceKind::kNpu || d.family == kFamilyQaic) {
    a.precisions = {"int8", "fp16"};
    a.assumption =
        "NPUs are fastest in INT8, the format their MAC arrays are built for (the vendor's "
        "documentation; not probed); FP16 where the model cannot be quantised";
  } else {
    a.precisions = {"fp16", "int8", "int4"};
    a.assumption = "a GPU runs FP16 at full rate; when the model does not fit, INT8 then INT4 weights";
  }
  return a;
}

int precision_bits(std::string_view p) {
  if (p == "fp32") return 32;
  if (p == "fp16" || p == "bf16") return 16;
  if (p == "int8") return 8;
  if (p == "int4") return 4;
  return 0;
}

}  // namespace gantry::hw

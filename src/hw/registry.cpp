#include "gantry/hw/registry.h"

namespace gantry::hw {

std::string_view device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu:
      return "cpu";
    case DeviceKind::kGpu:
      return "gpu";
    case DeviceKind::kNpu:
      return "npu";
    case DeviceKind::kTpu:
      return "tpu";
    case DeviceKind::kAsic:
      return "asic";
  }
  return "unknown";
}

Result<DeviceKind> parse_device_kind(std::string_view name) {
  for (DeviceKind k :
       {DeviceKind::kCpu, DeviceKind::kGpu, DeviceKind::kNpu, DeviceKind::kTpu, DeviceKind::kAsic}) {
    if (device_kind_name(k) == name) return k;
  }
  return InvalidArgument("unknown device kind '" + std::string(name) +
                         "' (expected cpu, gpu, npu, tpu or asic)");
}

}  // namespace gantry::hw

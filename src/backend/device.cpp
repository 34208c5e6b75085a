#include "gantry/backend/device.h"

#include "gantry/core/enum_names.h"

namespace gantry::backend {

namespace {

constexpr auto kDeviceKinds = enum_names<DeviceKind>("device kind", {{DeviceKind::kCpu, "cpu"},
                                                                     {DeviceKind::kNvidiaGpu, "nvidia-gpu"},
                                                                     {DeviceKind::kAmdGpu, "amd-gpu"},
                                                                     {DeviceKind::kIntelGpu, "intel-gpu"},
                                                                     {DeviceKind::kAppleGpu, "apple-gpu"},
                                                                     {DeviceKind::kNpu, "npu"},
                                                                     {DeviceKind::kOther, "other"}});

}  // namespace

std::string_view device_kind_name(DeviceKind kind) { return kDeviceKinds.name_of(kind, "other"); }

std::string device_id(DeviceKind kind, int index) {
  switch (kind) {
    case DeviceKind::kCpu:
      return "cpu";
    case DeviceKind::kNvidiaGpu:
      return "cuda:" + std::to_string(index);
    case DeviceKind::kAmdGpu:
      return "rocm:" + std::to_string(index);
    default:
      return std::string(device_kind_name(kind)) + ":" + std::to_string(index);
  }
}

const DeviceInfo* MachineView::find(DeviceKind kind, int index) const {
  for (const auto& d : devices)
    if (d.kind == kind && d.index == index) return &d;
  return nullptr;
}

std::vector<const DeviceInfo*> MachineView::all_of(DeviceKind kind) const {
  std::vector<const DeviceInfo*> out;
  for (const auto& d : devices)
    if (d.kind == kind) out.push_back(&d);
  return out;
}

}  // namespace gantry::backend

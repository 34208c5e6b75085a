#include "gantry/hw/registry.h"

#include "gantry/core/enum_names.h"

namespace gantry::hw {

namespace {

constexpr auto kDeviceKinds = enum_names<DeviceKind>("device kind", {{DeviceKind::kCpu, "cpu"},
                                                                     {DeviceKind::kGpu, "gpu"},
                                                                     {DeviceKind::kNpu, "npu"},
                                                                     {DeviceKind::kTpu, "tpu"},
                                                                     {DeviceKind::kAsic, "asic"}});

}  // namespace

std::string_view device_kind_name(DeviceKind kind) { return kDeviceKinds.name_of(kind); }

Result<DeviceKind> parse_device_kind(std::string_view name) { return kDeviceKinds.parse(name); }

}  // namespace gantry::hw

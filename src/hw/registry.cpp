#include "gantry/hw/registry.h"

#include <charconv>

#include "gantry/core/enum_names.h"

namespace gantry::hw {

namespace {

constexpr auto kDeviceKinds = enum_names<DeviceKind>("device kind", {{DeviceKind::kCpu, "cpu"},
                                                                     {DeviceKind::kGpu, "gpu"},
                                                                     {DeviceKind::kNpu, "npu"},
                                                                     {DeviceKind::kTpu, "tpu"},
                                                                     {DeviceKind::kAsic, "asic"},
                                                                     {DeviceKind::kRemote, "remote"}});

}  // namespace

std::string_view device_kind_name(DeviceKind kind) { return kDeviceKinds.name_of(kind); }

Result<DeviceKind> parse_device_kind(std::string_view name) { return kDeviceKinds.parse(name); }

std::string memory_device_id(std::string_view family, int index) {
  if (family == kFamilyCpu) return std::string(kFamilyCpu);
  return std::string(family) + ":" + std::to_string(index);
}

std::string memory_device_id(const Device& device) {
  return device.kind == DeviceKind::kCpu ? std::string(kFamilyCpu) : device.id;
}

int family_index(const Device& device) {
  const auto colon = device.id.rfind(':');
  if (device.kind == DeviceKind::kCpu || colon == std::string::npos) return 0;
  int index = 0;
  const char* first = device.id.data() + colon + 1;
  const char* last = device.id.data() + device.id.size();
  const auto [end, ec] = std::from_chars(first, last, index);
  return ec == std::errc() && end == last ? index : 0;
}

}  // namespace gantry::hw

// Queries over a Registry: the best device, and the devices that satisfy a requirement.
// Versions are compared numerically (gantry::Version): "9.0" < "11.8".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/hw/machine.h"
#include "gantry/hw/registry.h"

namespace gantry::hw {

struct Requirement {
  std::optional<DeviceKind> kind;
  std::optional<std::string> family;         // kFamily*
  std::optional<uint64_t> min_memory_bytes;  // a device whose memory is unknown does not qualify
  std::optional<std::string> min_compute_capability;
  std::optional<std::string> min_driver_version;
  std::optional<std::string> min_cuda_version;
};

// The devices of one family (kFamily*) in registry order, and the `index`-th of them (its id's number:
// "cuda", 1 -> cuda:1); nullptr when there is none. The CPU is family kFamilyCpu, index 0.
std::vector<const Device*> family_devices(const Registry& registry, std::string_view family);
const Device* find_device(const Registry& registry, std::string_view family, int index);

// Higher is better: accelerators over the CPU, then by memory, then by compute capability.
double device_rank(const Device& device);

// The device with the highest rank (the CPU when nothing else exists); nullptr when empty.
const Device* best_device(const Registry& registry);
const Device* best_device(const Registry&& registry) = delete;  // the result would dangle

// Devices that meet every set field of `requirement`, best first. InvalidArgument when a version
// in the requirement does not parse.
Result<std::vector<const Device*>> find_devices(const Registry& registry, const Requirement& requirement);
Result<std::vector<const Device*>> find_devices(const Registry&& registry,
                                                const Requirement& requirement) = delete;

// The block device (the whole disk, as /sys/block lists it) holding file `path` on `machine`: the file's
// st_dev, then /sys/dev/block/MAJOR:MINOR. NotFound when the filesystem has no block device (overlay,
// tmpfs, NFS) or sysfs does not show it; the message names the path. For load-time estimates.
Result<BlockDevice> storage_for_path(const Machine& machine, std::string_view path);
// The same on this computer.
Result<BlockDevice> storage_for_path(std::string_view path);

}  // namespace gantry::hw

// storage_for_path: the block device under a file (the model), for load-time estimates.
#include "gantry/hw/query.h"
#include "probes.h"

namespace gantry::hw {

Result<BlockDevice> storage_for_path(const Machine& m, std::string_view path) {
  auto dev = m.device_of(path);
  if (!dev.ok())
    return Status(dev.status().code(),
                  "block device of " + std::string(path) + ": " + dev.status().message());
  const auto [major, minor] = *dev;
  const std::string number = std::to_string(major) + ":" + std::to_string(minor);
  if (major == 0) {
    return NotFound(std::string(path) + " is on a filesystem without a block device (device " + number +
                    ": overlay, tmpfs or a network filesystem), so its read bandwidth is unknown");
  }
  // "../../devices/pci0000:00/0000:00:1d.0/0000:3b:00.0/nvme/nvme0/nvme0n1/nvme0n1p2": the disk is the
  // component after "block/" (virtual devices) or the first one after the controller that /sys/block lists.
  const std::string sys = "/sys/dev/block/" + number;
  std::string disk;
  if (auto link = m.read_link(sys); link.ok()) {
    const auto parts = internal::split(*link, '/');
    for (size_t i = 0; i < parts.size() && disk.empty(); ++i) {
      if (!parts[i].empty() && parts[i] != "." && parts[i] != ".." &&
          m.exists("/sys/block/" + std::string(parts[i])))
        disk = std::string(parts[i]);
    }
  } else if (auto uevent = m.read_file(sys + "/uevent"); uevent.ok()) {
    auto kv = internal::parse_key_values(*uevent, '=');
    if (kv["DEVTYPE"] == "disk") disk = kv["DEVNAME"];
  }
  if (disk.empty()) {
    return NotFound("block device of " + std::string(path) + ": device " + number + " is not in /sys/block");
  }
  std::vector<std::string> warnings;
  auto b = internal::read_block_device(m, disk, warnings);
  if (!b) return NotFound("block device of " + std::string(path) + ": /sys/block/" + disk + " vanished");
  return *b;
}

Result<BlockDevice> storage_for_path(std::string_view path) {
  return storage_for_path(*make_disk_machine("/"), path);
}

}  // namespace gantry::hw

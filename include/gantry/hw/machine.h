// Machine: how every hardware probe reads the computer it describes — files under a root directory
// (the real "/" or a captured fixture tree, "sysroot") and environment variables. Probes never call
// open()/getenv() themselves, so tests drive them with fixture trees and injected failures.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::hw {

class Machine {
 public:
  virtual ~Machine() = default;

  // The whole content of `path` ("/proc/meminfo", as seen on the described machine).
  // NotFound when absent, IoError (message names the path and errno text) when unreadable.
  virtual Result<std::string> read_file(std::string_view path) const = 0;

  // Entry names in directory `path`, sorted, without "." and "..". NotFound when absent.
  virtual Result<std::vector<std::string>> list_dir(std::string_view path) const = 0;

  virtual bool exists(std::string_view path) const = 0;

  // The target of symbolic link `path` as stored (sysfs links are relative: "../../devices/pci0000:00/...").
  // NotFound when absent or not a link. Default: NotFound (a machine that cannot show links).
  virtual Result<std::string> read_link(std::string_view path) const;

  // The device number (major, minor) of the filesystem holding `path` (stat's st_dev), for finding the
  // block device under a model file. Default: Unavailable.
  virtual Result<std::pair<unsigned, unsigned>> device_of(std::string_view path) const;

  virtual std::optional<std::string> getenv(std::string_view name) const = 0;

  // True when paths resolve against this very computer's "/" (so in-process libraries such as
  // NVML, Vulkan or hwloc describe the same machine as the files do).
  virtual bool is_local_root() const = 0;

  // The root directory, for messages ("/" or the sysroot path).
  virtual std::string root() const = 0;
};

// Environment variables: the process's own (nullopt) or a fixed set (tests).
using EnvOverride = std::optional<std::map<std::string, std::string>>;

// Reads files under `root` ("/" for this machine) and the given environment.
std::unique_ptr<Machine> make_disk_machine(std::string root = "/", EnvOverride env = std::nullopt);

}  // namespace gantry::hw

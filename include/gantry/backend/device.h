// DeviceInfo: what the backend layer needs to know about one device, as plain data.
//
// The hardware registry (gantry/hw) describes the machine in detail; the factory and backends only
// need this small view, which tests can also build by hand ("fake devices").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/version.h"

namespace gantry::backend {

enum class DeviceKind { kCpu, kNvidiaGpu, kAmdGpu, kIntelGpu, kAppleGpu, kNpu, kOther };

// "cpu", "nvidia-gpu", "amd-gpu", "intel-gpu", "apple-gpu", "npu", "other".
std::string_view device_kind_name(DeviceKind kind);

// The id of one device as memory budgets, plans and the hardware registry name it: "cpu" for the host,
// else "<family>:<index>" ("cuda:0", "rocm:1", "intel-gpu:0", "npu:0").
std::string device_id(DeviceKind kind, int index);

struct DeviceInfo {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;                        // per kind: GPU 0, GPU 1, ...; 0 for the host CPU
  std::string name;                     // "NVIDIA H100 80GB HBM3", "AMD EPYC 7B13"
  uint64_t total_memory_mb = 0;         // device memory (VRAM) for GPUs, RAM for the CPU
  uint64_t free_memory_mb = 0;          // 0 = unknown
  std::optional<Version> cuda_version;  // highest CUDA the driver supports (NVIDIA only)
  std::optional<Version> driver_version;
  std::optional<Version> compute_capability;  // e.g. 9.0
};

// The machine as the factory sees it: its devices (the CPU included) and which optional runtime
// libraries are present.
struct MachineView {
  std::vector<DeviceInfo> devices;

  const DeviceInfo* find(DeviceKind kind, int index) const;
  std::vector<const DeviceInfo*> all_of(DeviceKind kind) const;
  bool has(DeviceKind kind) const { return !all_of(kind).empty(); }
};

}  // namespace gantry::backend

// The machine `gantry plan` plans for (this one, or one captured under --sysroot), and this machine as a
// what-if target / for --speed: how each of its devices gets its speed figures. The policy is here; the
// timings that run llama.cpp's kernels are the llama backend's (above plan/), so they come in as
// DeviceTimers (the CLI passes gantry/backend/llama's; tests pass fakes).
//
// Per device, in the order of `devices`:
// - the CPU, on this machine (`local`): next to remote devices (which are timed on one generic product),
// timed
//   on that same product with the model's weight type (q8_0 without a GGUF) — timers.cpu_product; else, for
//   a GGUF, on the model's own matrices — timers.cpu_on_model (a failure is noted and falls through); else
//   plan::cpu_speed from the ISA and clock with a measured memory triad and thread barrier. Not local: the
//   ISA and clock alone (no bandwidth, no barrier).
// - a remote device: timed through RPC on its endpoint (timers.remote); a failure is noted, and the device
//   gets no figures.
// - a GPU: the catalogue's figures for the accelerator it recognises by name (none when it does not), with
//   the registry's memory bandwidth (hw's known-device table) in place of the catalogue's when it has one.
// Load time: the read bandwidth of the block device holding the model file (local only; else unknown,
// said why). The note says where the load figure comes from, then what could not be timed ("; "-joined).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/hw/query.h"
#include "gantry/hw/registry.h"
#include "gantry/hw/rpc.h"
#include "gantry/plan/catalogue.h"
#include "gantry/plan/model_profile.h"
#include "gantry/plan/planner.h"
#include "gantry/plan/speed.h"
#include "gantry/plan/what_if.h"

namespace gantry::plan {

// The machine to plan for: this one (detected), or the one captured under `sysroot` (proc/, sys/). NotFound
// when `sysroot` is not a directory; InvalidArgument when it has no readable proc/meminfo (planning against
// "0 B free" would only mislead).
Result<hw::Registry> machine_to_plan_for(const std::string& sysroot);

// The threads a speed prediction assumes: `requested` when > 0, else the physical cores (the logical ones
// when those are unknown), at least 1.
int speed_threads(const hw::CpuInfo& cpu, int requested);

// What times a device. An unset timer counts as one that failed ("not timed").
struct DeviceTimers {
  // This CPU on a generic product of `weight_type` (llama::measure_cpu_speed).
  std::function<Result<DeviceSpeed>(int threads, const std::string& weight_type)> cpu_product;
  // This CPU on the GGUF's own matrices (llama::measure_cpu_model_speed).
  std::function<Result<DeviceSpeed>(const std::string& model_path, const ModelProfile& model,
                                    const hw::CpuInfo& cpu, double ghz, int threads)>
      cpu_on_model;
  // A remote device through RPC (llama::measure_remote_speed).
  std::function<Result<DeviceSpeed>(const hw::RpcEndpoint& server, int device_index,
                                    const std::string& weight_type, double round_trip_s)>
      remote;
  // Bytes/s of a memory triad, and one barrier's seconds, on `threads` threads.
  std::function<double(int threads)> memory_bandwidth = [](int t) { return measure_memory_bandwidth(t); };
  std::function<double(int threads)> thread_barrier = [](int t) { return measure_thread_barrier(t); };
  // The block device holding a file.
  std::function<Result<hw::BlockDevice>(const std::string& path)> storage_for_path =
      [](const std::string& p) { return hw::storage_for_path(p); };
};

struct ThisMachineRequest {
  const hw::Registry* registry = nullptr;
  std::vector<Device> devices;           // devices_from_registry(*registry), RPC devices included
  const Catalogue* catalogue = nullptr;  // null: GPUs get no catalogue figures
  int threads = 1;
  bool local = true;                   // false: planning for a captured --sysroot (nothing is timed)
  std::string model_path;              // for the load time and timers.cpu_on_model
  const ModelProfile* gguf = nullptr;  // the GGUF planned, when there is one
};

struct ThisMachine {
  WhatIfTarget target;  // id "this", one DeviceSpeed per device
  std::string note;     // where the load figure comes from; what could not be timed
};

ThisMachine this_machine(const ThisMachineRequest& request, const DeviceTimers& timers);

}  // namespace gantry::plan

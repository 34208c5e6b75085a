#include "gantry/plan/machine.h"

#include <algorithm>
#include <filesystem>

#include "gantry/hw/detect.h"
#include "gantry/hw/loader.h"
#include "gantry/hw/machine.h"

namespace gantry::plan {
namespace {

namespace fs = std::filesystem;

// "; "-joins `more` onto `note`.
void add_note(std::string& note, const std::string& more) { note += (note.empty() ? "" : "; ") + more; }

DeviceSpeed cpu_speed_of(const ThisMachineRequest& q, const DeviceTimers& timers, bool any_remote, double ghz,
                         std::string& note) {
  const hw::Registry& r = *q.registry;
  Result<DeviceSpeed> timed = Unavailable("not timed");
  const std::string weight_type = q.gguf ? q.gguf->weight_type : "q8_0";
  if (q.local && any_remote) {
    // Next to remote devices (timed on one generic product), this CPU is timed on the same product.
    if (timers.cpu_product) timed = timers.cpu_product(q.threads, weight_type);
  } else if (q.local && q.gguf) {
    // Timed on the model's own matrices.
    if (timers.cpu_on_model) timed = timers.cpu_on_model(q.model_path, *q.gguf, r.cpu, ghz, q.threads);
    if (!timed.ok()) {
      add_note(note, "cpu: not timed on the model (" + timed.status().message() +
                         "), so a memory triad and the ISA instead");
    }
  }
  if (timed.ok()) return *timed;
  const double bandwidth = q.local && timers.memory_bandwidth ? timers.memory_bandwidth(q.threads) : 0;
  // The per-node overhead.
  const double barrier = q.local && timers.thread_barrier ? timers.thread_barrier(q.threads) : 0;
  return cpu_speed(r.cpu, q.threads, ghz, bandwidth, barrier);
}

// Another host's device, timed through RPC (the protocol does not say what it is).
DeviceSpeed remote_speed_of(const ThisMachineRequest& q, const DeviceTimers& timers, const Device& d,
                            std::string& note) {
  auto e = hw::parse_rpc_endpoint(d.remote->endpoint);
  Result<DeviceSpeed> s = e.status();
  if (e.ok()) {
    s = timers.remote ? timers.remote(*e, d.remote->device_index, q.gguf ? q.gguf->weight_type : "q8_0",
                                      d.remote->round_trip_s.value_or(0))
                      : Result<DeviceSpeed>(Unavailable("not timed"));
  }
  if (s.ok()) return *s;
  add_note(note, d.id + ": no speed: " + s.status().message());
  return {};
}

DeviceSpeed gpu_speed_of(const ThisMachineRequest& q, const Device& d) {
  const Accelerator* a = q.catalogue ? q.catalogue->match_device(d.name) : nullptr;
  DeviceSpeed s = a ? gpu_speed(a->memory_bandwidth_gb_s, a->fp16_dense_tflops, a->name) : DeviceSpeed{};
  for (const auto& hd : q.registry->devices) {
    if (hd.id != d.id || !hd.memory_bandwidth_bytes_per_s) continue;
    s.memory_bandwidth = static_cast<double>(*hd.memory_bandwidth_bytes_per_s);
    s.bandwidth_efficiency = kPeakBandwidthEfficiency;
    s.bandwidth_source = hd.memory_bandwidth_source.value_or("catalogue");
  }
  return s;
}

}  // namespace

Result<hw::Registry> machine_to_plan_for(const std::string& sysroot) {
  if (sysroot.empty()) return hw::detect_local();
  std::error_code ec;
  if (!fs::is_directory(sysroot, ec)) {
    return NotFound("--sysroot " + sysroot +
                    " is not a directory (expected a captured machine: proc/, sys/)");
  }
  auto machine = hw::make_disk_machine(sysroot);
  auto loader = hw::make_null_loader();
  hw::Registry r = hw::detect(*machine, *loader);
  if (!r.host.memory_total_bytes) {
    return InvalidArgument(
        "--sysroot " + sysroot +
        " has no readable proc/meminfo, so its memory is unknown and nothing can be planned");
  }
  return r;
}

int speed_threads(const hw::CpuInfo& cpu, int requested) {
  if (requested > 0) return requested;
  return std::max(1, cpu.physical_cores > 0 ? cpu.physical_cores : cpu.logical_cores);
}

ThisMachine this_machine(const ThisMachineRequest& q, const DeviceTimers& timers) {
  const hw::Registry& r = *q.registry;
  ThisMachine out;
  WhatIfTarget& t = out.target;
  std::string note;  // what could not be timed
  t.id = "this";
  t.description = "this machine: " + (r.cpu.model.empty() ? std::string("CPU") : r.cpu.model);
  t.devices = q.devices;
  const double ghz = cpu_ghz(r.environment.sysroot).value_or(0);
  const bool any_remote =
      std::any_of(q.devices.begin(), q.devices.end(), [](const Device& d) { return d.remote.has_value(); });
  for (const auto& d : q.devices) {
    if (!is_gpu(d)) {
      t.speeds.push_back(cpu_speed_of(q, timers, any_remote, ghz, note));
    } else if (d.remote) {
      t.description += ", " + d.id + " (" + d.remote->endpoint + ")";
      t.speeds.push_back(remote_speed_of(q, timers, d, note));
    } else {
      t.description += ", " + d.name;
      t.speeds.push_back(gpu_speed_of(q, d));
    }
  }
  std::string load_note;
  if (!q.local) {
    load_note = "load time unknown: a captured --sysroot has no model file on its disks";
  } else if (auto b = timers.storage_for_path ? timers.storage_for_path(q.model_path)
                                              : Result<hw::BlockDevice>(Unavailable("not looked up"));
             b.ok()) {
    const StorageBandwidth sb = storage_read_bandwidth(*b);
    t.storage_bytes_per_s = sb.bytes_per_s;
    load_note = sb.bytes_per_s > 0 ? "load: " + sb.description : "load time unknown: " + sb.description;
  } else {
    load_note = "load time unknown: " + b.status().message();
  }
  out.note = note.empty() ? load_note : load_note + "; " + note;
  return out;
}

}  // namespace gantry::plan

// Where the instances of one model go: the manifest's hardware_requirements.strategy and instance count
// turned into one Placement per instance, before anything is loaded (plain data: tested on the fixture
// machines without a GPU).
//
//   strategy        devices                                              instances
//   auto            the factory's devices (device_id, or each of gpu_device_ids)   per_device on each
//   pool            the one with the most free budget among gpu_device_ids (or     per_device on it
//                   every device of the family), chosen at each load
//   round-robin,    each of gpu_device_ids (or every device of the family)         per_device on each
//   data-parallel
//   tensor-parallel, one model split over gpu_device_ids by the backend (llama.cpp   1
//   pipeline        row / layer split); refused for a backend that cannot split
// On the CPU there is one device: per_device instances there, each with an equal share of the physical
// cores as intra-op threads unless threads were given. A text-generating model (llama.cpp) always gets one
// instance: the Runtime turns the count into parallel sequences of its context instead, and refuses
// round-robin / data-parallel over several devices for it with the reason.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/backend/placement.h"
#include "gantry/core/status.h"
#include "gantry/hw/registry.h"

namespace gantry::runtime {

struct InstanceLayout {
  std::vector<backend::Placement> instances;  // one per instance; device_ids = its device(s)
  std::vector<std::string> devices;           // memory device id per instance ("cpu", "cuda:1")
  std::string reason;                         // how the devices were chosen, for logs and messages
};

struct InstanceRequest {
  backend::Placement chosen;     // the factory's choice: provider, device_ids, strategy, threads
  std::string_view family;       // the provider's device family (hw::kFamily*)
  std::vector<int> listed;       // the manifest's gpu_device_ids (empty: none listed)
  int per_device = 1;            // instances per device (>= 1)
  bool text_generation = false;  // the backend generates text (llama.cpp)
  bool model_parallel = false;   // the backend can split one model over devices
  // Bytes still free in the budget of a memory device ("cuda:1"); for `pool`.
  std::function<uint64_t(const std::string&)> free_bytes;
};

// InvalidArgument for a count below 1, Unsupported for a combination the backend cannot do (with why).
Result<InstanceLayout> plan_instances(const InstanceRequest& request, const hw::Registry& machine);

}  // namespace gantry::runtime

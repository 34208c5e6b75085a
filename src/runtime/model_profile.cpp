#include "gantry/runtime/model_profile.h"

namespace gantry::runtime {

std::vector<plan::Device> devices_from_registry(const hw::Registry& registry) {
  std::vector<plan::Device> out;
  plan::Device cpu;
  cpu.id = "cpu";
  cpu.name = registry.cpu.model.empty() ? "CPU" : registry.cpu.model;
  cpu.total_bytes = registry.host.memory_total_bytes.value_or(0);
  cpu.free_bytes = registry.host.memory_available_bytes.value_or(cpu.total_bytes);
  if (registry.host.memory_limit_bytes) {
    cpu.total_bytes = std::min(cpu.total_bytes, *registry.host.memory_limit_bytes);
    cpu.free_bytes = std::min(cpu.free_bytes, *registry.host.memory_limit_bytes);
  }
  out.push_back(cpu);
  for (const auto& d : registry.devices) {
    if (d.kind != hw::DeviceKind::kGpu || !d.memory_total_bytes) continue;
    plan::Device g;
    g.id = d.id;
    g.name = d.name;
    g.is_gpu = true;
    g.total_bytes = *d.memory_total_bytes;
    g.free_bytes = d.memory_free_bytes.value_or(*d.memory_total_bytes);
    out.push_back(g);
  }
  return out;
}

}  // namespace gantry::runtime

#include "gantry/runtime/instance_layout.h"

#include <algorithm>

#include "gantry/hw/query.h"
#include "gantry/memory/budget.h"

namespace gantry::runtime {

namespace {

std::string ids_text(const std::vector<int>& ids) {
  std::string s;
  for (int i : ids) s += (s.empty() ? "" : ",") + std::to_string(i);
  return s;
}

}  // namespace

Result<InstanceLayout> plan_instances(const InstanceRequest& r, const hw::Registry& machine) {
  if (r.per_device < 1)
    return InvalidArgument("a model needs at least 1 instance per device, got " +
                           std::to_string(r.per_device));
  const model::Strategy strategy_kind = r.chosen.strategy;
  const std::string strategy(model::strategy_name(strategy_kind));
  const bool split =
      strategy_kind == model::Strategy::kTensorParallel || strategy_kind == model::Strategy::kPipeline;
  if (split && !r.model_parallel && !r.text_generation)
    return Unsupported("strategy '" + strategy +
                       "' splits one model over devices, which this backend cannot do (ONNX Runtime runs a "
                       "session on one device); use pool, round-robin or data-parallel");
  InstanceLayout out;
  auto add = [&](const std::vector<int>& ids, int count) {
    for (int k = 0; k < count; ++k) {
      backend::Placement p = r.chosen;
      p.device_ids = ids;
      out.instances.push_back(std::move(p));
      out.devices.push_back(hw::memory_device_id(r.family, ids.empty() ? 0 : ids.front()));
    }
  };

  if (r.family == hw::kFamilyCpu) {
    const int count = r.text_generation ? 1 : r.per_device;
    add({}, count);
    if (count > 1 && r.chosen.intra_op_threads == 0) {
      // Each instance gets its share of the cores; together they use the machine once.
      const int cores = std::max(
          1, machine.cpu.physical_cores > 0 ? machine.cpu.physical_cores : machine.cpu.logical_cores);
      for (auto& p : out.instances) p.intra_op_threads = std::max(1, cores / count);
    }
    out.reason = std::to_string(count) + " instance(s) on the CPU";
    return out;
  }

  // The devices a strategy may use: those listed, or every device of the family.
  std::vector<int> pool_ids = r.listed;
  if (pool_ids.empty())
    for (const hw::Device* d : hw::family_devices(machine, r.family))
      pool_ids.push_back(hw::family_index(*d));
  if (pool_ids.empty()) return Unavailable("no " + std::string(r.family) + " device on this machine");

  if (split) {
    std::vector<int> ids = r.chosen.device_ids.size() > 1 ? r.chosen.device_ids : pool_ids;
    add(ids, 1);
    out.reason =
        "strategy " + strategy + ": one model split over " + std::string(r.family) + ":" + ids_text(ids);
    return out;
  }
  if (strategy_kind == model::Strategy::kPool) {
    int best = pool_ids.front();
    uint64_t best_free = 0;
    for (int id : pool_ids) {
      const uint64_t f = r.free_bytes ? r.free_bytes(hw::memory_device_id(r.family, id)) : 0;
      if (f > best_free) {
        best = id;
        best_free = f;
      }
    }
    add({best}, r.text_generation ? 1 : r.per_device);
    out.reason = "strategy pool: " + hw::memory_device_id(r.family, best) + " has the most free memory (" +
                 memory::format_bytes(best_free) + ") of " + std::string(r.family) + ":" + ids_text(pool_ids);
    return out;
  }
  std::vector<int> devices;
  if (strategy_kind == model::Strategy::kRoundRobin || strategy_kind == model::Strategy::kDataParallel)
    devices = pool_ids;
  else  // auto: the factory's devices
    devices = r.chosen.device_ids.empty() ? std::vector<int>{0} : r.chosen.device_ids;
  if (r.text_generation && devices.size() > 1)
    return Unsupported("strategy '" + strategy + "' puts one copy of the model on each of " +
                       std::string(r.family) + ":" + ids_text(devices) +
                       "; llama.cpp runs concurrent requests as parallel sequences of one context instead "
                       "(runtime.peak_concurrency or --parallel), or splits one copy with tensor-parallel or "
                       "pipeline");
  for (int id : devices) add({id}, r.text_generation ? 1 : r.per_device);
  out.reason = "strategy " + strategy + ": " + std::to_string(out.instances.size()) + " instance(s) on " +
               std::string(r.family) + ":" + ids_text(devices);
  return out;
}

}  // namespace gantry::runtime

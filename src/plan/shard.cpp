#include "gantry/plan/shard.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "gantry/core/checked_math.h"
#include "gantry/hw/advice.h"
#include "gantry/model/memory_rule.h"

namespace gantry::plan {
namespace {

std::string gib(uint64_t bytes) {
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1ull << 30));
}

}  // namespace

Result<ShardPlan> shard_over_accelerators(const hw::Registry& r, uint64_t parameters, std::string_view only) {
  if (parameters == 0) return InvalidArgument("a model of 0 parameters has nothing to shard");
  // The family with the most memory (each device's as advice assumes it); ties: the registry's order.
  std::map<std::string, std::vector<const hw::Device*>> families;
  std::vector<std::string> order;
  for (const hw::Device& d : r.devices) {
    if (d.kind == hw::DeviceKind::kCpu || d.kind == hw::DeviceKind::kRemote) continue;
    if (!only.empty() && d.family != only) continue;
    if (!families.count(d.family)) order.push_back(d.family);
    families[d.family].push_back(&d);
  }
  if (!only.empty() && order.empty())
    return InvalidArgument("this machine has no " + std::string(only) + " device to shard over");
  const hw::Device* cpu = nullptr;
  for (const hw::Device& d : r.devices)
    if (d.kind == hw::DeviceKind::kCpu) cpu = &d;
  std::string best;
  uint64_t best_total = 0;
  std::string unknown;
  for (const std::string& f : order) {
    const hw::DeviceMemory m = hw::device_memory(r, *families[f].front());
    if (!m.bytes) {
      unknown += (unknown.empty() ? "" : "; ") + families[f].front()->id + ": " + m.reason;
      continue;
    }
    const uint64_t total = m.source == "host" ? *m.bytes : saturating_mul(*m.bytes, families[f].size());
    if (best.empty() || total > best_total) best = f, best_total = total;
  }
  ShardPlan p;
  std::vector<const hw::Device*> devices;
  hw::DeviceMemory memory;
  if (!best.empty()) {
    devices = families[best];
    memory = hw::device_memory(r, *devices.front());
  } else if (!unknown.empty()) {
    return FailedPrecondition("cannot shard over the accelerators: their memory is unknown (" + unknown +
                              ")");
  } else if (cpu) {
    devices = {cpu};
    memory = {r.host.memory_limit_bytes ? r.host.memory_limit_bytes : r.host.memory_total_bytes, "host",
              "no accelerator: the model runs in host memory"};
    if (!memory.bytes) return FailedPrecondition("no accelerator, and the host's memory is unknown");
  } else {
    return FailedPrecondition("the registry lists no device");
  }
  const hw::Device& first = *devices.front();
  const hw::PrecisionAdvice advice = hw::precision_advice(first);
  p.family = first.family;
  p.device_memory_bytes = *memory.bytes;
  // Devices working in host memory share one pool: sharding over them gains nothing.
  p.available = memory.source == "host" ? 1 : static_cast<int>(devices.size());
  p.basis.push_back(fmt::format("{} x {} with {} each ({}{})", devices.size(), first.name, gib(*memory.bytes),
                                memory.source, memory.reason.empty() ? "" : ": " + memory.reason));
  p.basis.push_back("precisions in order " + fmt::format("{}", fmt::join(advice.precisions, " > ")) + ": " +
                    advice.assumption);
  p.basis.push_back(
      "memory: the weights at that precision as the model's size, then the one rule of thumb (" +
      std::string(model::kRuleOfThumbBasis) + ")");
  for (const std::string& precision : advice.precisions) {
    const int bits = hw::precision_bits(precision);
    const uint64_t weights = saturating_mul(parameters, static_cast<uint64_t>(bits)) / 8;
    const uint64_t bytes = model::rule_of_thumb_bytes(weights);
    const uint64_t n = (bytes + p.device_memory_bytes - 1) / p.device_memory_bytes;
    p.precision = precision;
    p.bytes = bytes;
    p.devices = static_cast<int>(std::min<uint64_t>(n, 1u << 30));
    if (n <= static_cast<uint64_t>(p.available)) {
      p.fits = true;
      p.per_device_bytes = (bytes + n - 1) / n;
      for (uint64_t i = 0; i < n; ++i) p.device_ids.push_back(devices[i]->id);
      p.basis.push_back(fmt::format("{} at {}: {} over {} device(s), {} each", gib(weights), precision,
                                    gib(bytes), n, gib(p.per_device_bytes)));
      return p;
    }
  }
  p.per_device_bytes = p.devices > 0 ? (p.bytes + p.devices - 1) / static_cast<uint64_t>(p.devices) : 0;
  p.basis.push_back(
      fmt::format("does not fit: at {} the model needs {}, {} device(s) of {}; the machine has {}",
                  p.precision, gib(p.bytes), p.devices, gib(p.device_memory_bytes), p.available));
  return p;
}

}  // namespace gantry::plan

// Sharding a model over accelerator memory (ai-hwaccel's plan): which accelerators, at which precision,
// over how many of them. The accelerators are those of the family with the most memory; the precision is
// the first of their advice (gantry/hw/advice.h) at which the model fits on the devices there are; the
// memory a model needs is its weights at that precision plus the one rule of thumb for activations
// (gantry/model/memory_rule.h, + 25 %), split evenly. Every assumption it rests on is in `basis`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/hw/registry.h"

namespace gantry::plan {

struct ShardPlan {
  bool fits = false;
  std::string family;     // the accelerators it shards over (hw::kFamily*); "cpu" when there are none
  std::string precision;  // "bf16", "fp16", "int8", "int4", "fp32"
  int devices = 0;        // how many of them (<= the machine's); when it does not fit, how many it would take
  int available = 0;      // how many the machine has
  uint64_t bytes = 0;     // the model at that precision, with activations
  uint64_t per_device_bytes = 0;     // its share on each
  uint64_t device_memory_bytes = 0;  // one device's memory, as assumed
  std::vector<std::string> device_ids;
  std::vector<std::string> basis;  // the assumptions, one per line (memory source, precision, rule of thumb)
};

// A model of `parameters` weights, over `family`'s devices (empty: the family with the most memory; ties go
// to the one listed first). InvalidArgument for 0 parameters or a family the machine lacks;
// FailedPrecondition, with the reason, when the accelerators' memory is unknown (neither the driver nor the
// datasheet says).
Result<ShardPlan> shard_over_accelerators(const hw::Registry& registry, uint64_t parameters,
                                          std::string_view family = {});

}  // namespace gantry::plan

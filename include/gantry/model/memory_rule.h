// The one rule of thumb for a model's memory when nothing better is known (no engine dry run, no measured
// profile): its weights take the file's size, and activations and the runtime's arena a quarter more.
//
// One definition for every layer that needs it: the backends' default estimate_memory (what admission
// reserves), the planner's generic estimate (`gantry plan MODEL.onnx`) and the device advice. The seeds
// disagreed (ai-hwaccel +20 %; Gantry had +25 % in the backend registry and +50 % with a 16 MiB floor in the
// planner): +25 % is what loading has always reserved, so no model that fit a budget stops fitting, and a
// measured profile (`gantry plan MODEL.onnx --measure`) replaces the rule where one exists
// (docs/from-the-seeds.md).
#pragma once

#include <cstdint>
#include <string_view>

namespace gantry::model {

// Activations and arena over the weights, as a fraction of the file's size.
inline constexpr uint64_t kActivationShareDenominator = 4;  // +25 %

inline constexpr uint64_t rule_of_thumb_activation_bytes(uint64_t file_bytes) {
  return file_bytes / kActivationShareDenominator;
}

// Weights plus activations: the memory a model of `file_bytes` is assumed to need (saturating).
inline constexpr uint64_t rule_of_thumb_bytes(uint64_t file_bytes) {
  const uint64_t extra = rule_of_thumb_activation_bytes(file_bytes);
  return file_bytes > UINT64_MAX - extra ? UINT64_MAX : file_bytes + extra;
}

// How messages name the rule.
inline constexpr std::string_view kRuleOfThumbBasis = "model file size + 25% for activations";

}  // namespace gantry::model

// `gantry plan MODEL.onnx [--measure] [--batch N] [--shape NAME=D0,D1,...]`: an ONNX model's memory,
// measured.
//
// --measure loads the model with the runtime's pool at the base batch sizes (1 and 2, or the model's fixed
// batch) and at --batch, runs it once on synthesised inputs each time and reads the pool's ledger
// (gantry/runtime/onnx_measure.h); the profile is cached, and later plans (and the runtime's budget) use it.
// Without --measure a cached profile is shown when there is one, else the rule of thumb. A batch that was
// not measured is predicted from two measured ones ("predicted from 1 and 2"); at a measured batch that is
// not a base batch, the prediction from the others is shown next to the measurement, with its error.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "gantry/backend/factory.h"
#include "gantry/hw/registry.h"
#include "gantry/plan/planner.h"

namespace gantry::cli {

struct OnnxPlanRequest {
  std::string model;
  std::optional<int64_t> batch;     // --batch when given
  std::vector<std::string> shapes;  // --shape values
  bool measure = false;
  bool json = false;
  backend::ProviderPolicy policy = backend::ProviderPolicy::kFastest;
  std::string provider;                   // --provider: only this one
  const hw::Registry* machine = nullptr;  // the machine planned for (measured only when local)
  bool local = true;                      // false with --sysroot: nothing can be measured
  std::vector<plan::Device> devices;
};

// Plans and prints; returns the exit code (0, 1 runtime failure, 2 bad usage).
int run_onnx_plan(const OnnxPlanRequest& request, std::ostream& out, std::ostream& err);

}  // namespace gantry::cli

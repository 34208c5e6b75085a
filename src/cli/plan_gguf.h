// `gantry plan MODEL.gguf`: llama.cpp's exact memory plan over the devices (gantry/plan/planner.h), and with
// --what-if the same against catalogue hardware, with --speed the predicted tokens/s on this machine, with
// --measure llama.cpp's real allocations loading the model as planned, next to the prediction.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "gantry/plan/catalogue.h"
#include "gantry/plan/machine.h"
#include "gantry/plan/model_profile.h"
#include "gantry/plan/planner.h"

namespace gantry::cli {

struct GgufPlanRequest {
  std::string model;          // the .gguf file
  plan::PlanOptions options;  // from the flags
  bool json = false;
  bool speed = false;
  bool measure = false;
  std::string what_if;
  const plan::Catalogue* catalogue = nullptr;  // set when what_if needs it (and for --speed on GPUs)
  std::vector<plan::Device> devices;
  // This machine as a what-if target / for --speed, timed on `model` (built on demand: it times things).
  std::function<plan::ThisMachine(const plan::ModelProfile& model)> this_machine;
};

// Plans and prints; returns the exit code (0, 1 runtime failure, 2 bad usage).
int run_gguf_plan(const GgufPlanRequest& request, std::ostream& out, std::ostream& err);

}  // namespace gantry::cli

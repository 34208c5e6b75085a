// `gantry plan` for what people download: a Hugging Face checkpoint (a directory, its
// model.safetensors.index.json, one .safetensors file, or the same over http(s)) planned from config.json and
// the safetensors headers alone, and a model known only by its parameter count (--params 70B). Reading,
// estimating and choosing the quantisation are plan/'s (checkpoint_source.h, params_estimate.h,
// checkpoint_plan.h); this prints what they found.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "gantry/plan/catalogue.h"
#include "gantry/plan/params_estimate.h"
#include "gantry/plan/planner.h"
#include "gantry/plan/what_if.h"

namespace gantry::cli {

// What the checkpoint planner needs from `gantry plan`'s flags and machine.
struct CheckpointPlanRequest {
  std::string spec;         // path or URL (empty with --params)
  plan::ParamsSpec params;  // used when params.params is set
  std::string quant;        // "", a file type, or "all"
  bool ctx_given = false;
  plan::PlanOptions options;
  bool json = false;
  bool speed = false;
  std::string what_if;
  const plan::Catalogue* catalogue = nullptr;  // set when what_if or speed needs it
  std::vector<plan::Device> devices;
  // This machine as a what-if target / for --speed (built on demand: it may time a memory triad).
  std::function<plan::WhatIfTarget()> this_machine;
};

// Plans and prints; returns the exit code (0, 1 runtime failure, 2 bad usage).
int run_checkpoint_plan(const CheckpointPlanRequest& request, std::ostream& out, std::ostream& err);

}  // namespace gantry::cli

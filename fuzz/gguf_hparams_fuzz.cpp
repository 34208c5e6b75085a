// libFuzzer target for what a GGUF's metadata makes Gantry compute: the hyperparameter validator (the gate
// before llama.cpp), the planner's profile, and a plan at a small and at the model's own context. Seeds
// (fuzz/seeds/make_gguf_seeds.py) are a valid model and copies with one field wrong. Any crash, sanitizer
// report, hang or unbounded allocation is a bug. (Links gantry_plan, as fuzz/CMakeLists.txt.)
#include <cstddef>
#include <cstdint>
#include <span>

#include "gantry/model/gguf.h"
#include "gantry/model/gguf_hparams.h"
#include "gantry/plan/gguf_profile.h"
#include "gantry/plan/planner.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = gantry::model::GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!file.ok()) return 0;
  for (const auto& [key, value] : file->metadata()) {
    if (const auto* a = value.as_array(); a && a->size() > 0) (void)a->at(a->size() - 1).to_string(2);
  }
  auto h = gantry::model::read_hyperparameters(*file);
  auto profile = gantry::plan::profile_from_gguf(*file);
  if (h.ok() != profile.ok()) __builtin_trap();  // the profile accepts exactly what the validator accepts
  if (!profile.ok()) return 0;
  const std::vector<gantry::plan::Device> devices = {
      gantry::plan::memory_target("cpu", "CPU", false, 1ull << 30, 1ull << 30)};
  for (uint32_t ctx : {512u, 0u}) {
    gantry::plan::PlanOptions o;
    o.n_ctx = ctx;
    (void)gantry::plan::plan_gguf(*profile, o, devices);
  }
  return 0;
}

// libFuzzer target for the GGUF reader (untrusted bytes) and what consumes its result: the planner profile
// adapter, the planner itself and value rendering. Any crash, sanitizer report or unbounded allocation is a
// bug.
#include <cstddef>
#include <cstdint>
#include <span>

#include "gantry/model/gguf.h"
#include "gantry/plan/planner.h"
#include "gantry/runtime/model_profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = gantry::model::GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!file.ok()) return 0;
  for (const auto& [key, value] : file->metadata()) (void)value.to_string(4);
  for (const auto& t : file->tensors()) (void)file->tensor_data(t);
  auto profile = gantry::runtime::profile_from_gguf(*file);
  if (!profile.ok()) return 0;
  gantry::plan::PlanOptions o;
  o.n_ctx = 512;
  (void)gantry::plan::plan_gguf(*profile, o, {{"cpu", "CPU", false, 1ull << 33, 1ull << 33}});
  return 0;
}

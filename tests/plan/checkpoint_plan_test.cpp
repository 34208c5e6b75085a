// A checkpoint at the quantisations --quant asks for (gantry/plan/checkpoint_plan.h): which types, their
// profiles largest first, and the largest that fits with the context it leaves.
#include "gantry/plan/checkpoint_plan.h"

#include <gtest/gtest.h>

#include "gantry/plan/params_estimate.h"

namespace gantry::plan {
namespace {

ConvertedCheckpoint small_model() {
  // Llama 3.2 1B's 1.24B parameters: its shape as published, 16 layers, 131072 tokens of training context.
  auto r = params_checkpoint({.params = "1.24B"});
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  auto c = convert_checkpoint(r->config_json, r->tensors);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return *c;
}

TEST(CheckpointPlan, RequestedTypes) {
  const ConvertedCheckpoint c = small_model();
  auto as_converted = requested_file_types("", &c);
  ASSERT_TRUE(as_converted.ok());
  ASSERT_EQ(as_converted->size(), 1u);
  EXPECT_EQ((*as_converted)[0].name, c.converted_type.name);
  EXPECT_EQ((*requested_file_types("", nullptr))[0].name, "bf16");  // not converted: as stored
  EXPECT_EQ((*requested_file_types("Q4_K_M", &c))[0].name, "q4_k_m");
  auto all = requested_file_types("all", &c);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), file_types().size() - 1);
  for (const auto& t : *all) EXPECT_NE(t.name, "f32");
  auto bad = requested_file_types("q9_z", &c);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--quant q9_z: not a type llama-quantize writes"), std::string::npos)
      << bad.status().message();
}

Device cpu_with(uint64_t bytes) { return memory_target("cpu", "CPU", false, bytes, bytes); }

TEST(CheckpointPlan, CandidatesLargestFirstAndTheLargestThatFitsIsChosen) {
  const ConvertedCheckpoint c = small_model();
  auto cands = profile_candidates(c, *requested_file_types("all", &c), "m");
  ASSERT_TRUE(cands.ok()) << cands.status().to_string();
  ASSERT_GE(cands->size(), 10u);
  for (size_t i = 1; i < cands->size(); ++i)
    EXPECT_GE((*cands)[i - 1].profile.total_weight_bytes(), (*cands)[i].profile.total_weight_bytes());
  EXPECT_EQ((*cands)[0].profile.name, "m (llama, 16 layers, " + std::string((*cands)[0].type.name) + ")");

  PlanOptions o;
  o.n_gpu_layers = 0;
  // Room for everything: the largest is chosen, at 4096 tokens (no context asked for), and every one
  // leaves a context.
  auto big = plan_candidates(*cands, o, false, {cpu_with(1ull << 40)});
  ASSERT_TRUE(big.ok()) << big.status().to_string();
  ASSERT_TRUE(big->has_value());
  EXPECT_EQ(**big, 0u);
  for (const auto& k : *cands) {
    EXPECT_EQ(k.plan.n_ctx, 4096u) << k.type.name;
    EXPECT_TRUE(k.plan.fits) << k.type.name;
    EXPECT_EQ(k.max_context, 131072u) << k.type.name;  // the training context
  }

  // Memory between the third's and the second's plan: the third is the largest that fits.
  const uint64_t second = (*cands)[1].plan.totals.total(), third = (*cands)[2].plan.totals.total();
  ASSERT_GT(second, third);
  auto mid = plan_candidates(*cands, o, false, {cpu_with((second + third) / 2)});
  ASSERT_TRUE(mid.ok());
  ASSERT_TRUE(mid->has_value());
  EXPECT_EQ(**mid, 2u);
  EXPECT_FALSE((*cands)[1].plan.fits);
  EXPECT_EQ((*cands)[1].max_context, 0u);
  EXPECT_GE((*cands)[2].max_context, 4096u);
  EXPECT_LT((*cands)[2].max_context, 131072u);

  // Too little for any.
  auto none = plan_candidates(*cands, o, false, {cpu_with(1u << 20)});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(CheckpointPlan, OneCandidateIsPlannedAtTheContextAsked) {
  const ConvertedCheckpoint c = small_model();
  auto one = profile_candidates(c, *requested_file_types("q8_0", &c), "m");
  ASSERT_TRUE(one.ok());
  PlanOptions o;
  o.n_ctx = 2048;
  o.n_gpu_layers = 0;
  auto r = plan_candidates(*one, o, true, {cpu_with(1ull << 40)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, std::optional<size_t>(0));
  EXPECT_EQ((*one)[0].plan.n_ctx, 2048u);
  EXPECT_EQ((*one)[0].max_context, 0u);  // only asked of several
  // The planner's errors come through.
  o.n_batch = 0;
  auto bad = plan_candidates(*one, o, true, {cpu_with(1ull << 40)});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gantry::plan

// What-if planning: targets from a catalogue, the quantisation each needs, sorting by cost, and what is
// missing when nothing fits.
#include "gantry/plan/what_if.h"

#include <gtest/gtest.h>

namespace gantry::plan {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

// An f16 model: 8 layers of 256 MiB (2 GiB of layers), 16 bits per weight.
ModelProfile f16_model() {
  ModelProfile m;
  m.name = "f16-model";
  m.n_embd = 2048;
  m.n_vocab = 32000;
  m.n_ctx_train = 4096;
  m.input_weight_bytes = 64 * kMiB;
  m.output_weight_bytes = 64 * kMiB;
  for (int i = 0; i < 8; ++i) m.layers.push_back({256 * kMiB, 16, 4, 128, 128, 5632, false});
  m.n_params = m.total_weight_bytes() / 2;
  m.file_bytes = m.total_weight_bytes();
  m.weight_type = "f16";
  return m;
}

Catalogue catalogue() {
  auto c = parse_catalogue(R"({
    "schema_version": 1, "catalogue_version": "t",
    "accelerators": [
      {"id": "big", "name": "Big", "memory_gib": 40, "memory_bandwidth_gb_s": 2000, "fp16_dense_tflops": 300,
       "source": "t"},
      {"id": "small", "name": "Small", "memory_gib": 2, "memory_bandwidth_gb_s": 300, "fp16_dense_tflops": 100,
       "source": "t"},
      {"id": "tiny", "name": "Tiny", "memory_gib": 0.75, "memory_bandwidth_gb_s": 100, "fp16_dense_tflops": 10,
       "source": "t"}],
    "instances": [
      {"id": "c-big", "provider": "c", "name": "big1", "accelerator": "big", "count": 1, "interconnect": "-",
       "host_memory_gib": 64, "storage_bandwidth_gb_s": 2, "price_usd_per_hour": 4, "price_date": "2026-11-24",
       "price_source": "t"},
      {"id": "c-big4", "provider": "c", "name": "big4", "accelerator": "big", "count": 4, "interconnect": "nv",
       "host_memory_gib": 256, "storage_bandwidth_gb_s": 2, "price_usd_per_hour": 12,
       "price_date": "2026-11-24", "price_source": "t"},
      {"id": "c-small", "provider": "c", "name": "small1", "accelerator": "small", "count": 1,
       "interconnect": "-", "host_memory_gib": 16, "storage_bandwidth_gb_s": 1, "price_usd_per_hour": 0.5,
       "price_date": "2026-11-24", "price_source": "t"}]})",
                           "t.json");
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return *c;
}

PlanOptions opts() {
  PlanOptions o;
  o.n_ctx = 1024;
  o.n_ubatch = 128;
  return o;
}

TEST(WhatIf, ResolvesTargets) {
  const Catalogue c = catalogue();
  auto t = resolve_targets(c, "big, 2xbig ,c-big4", std::nullopt);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[1].devices.size(), 3u);  // host + 2 GPUs
  EXPECT_EQ(device_free_bytes((*t)[1].devices[1]), 40 * kGiB - kGpuReserveBytes);
  // 2 x the per-GPU share of the cheapest big instance: c-big4 at 12/4 = 3 per GPU.
  EXPECT_DOUBLE_EQ(*(*t)[1].price_usd_per_hour, 6.0);
  EXPECT_DOUBLE_EQ(*(*t)[2].price_usd_per_hour, 12.0);
  EXPECT_FALSE(resolve_targets(c, "tiny", std::nullopt)->front().price_usd_per_hour.has_value());
  auto bad = resolve_targets(c, "big,h100", std::nullopt);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"h100\""), std::string::npos);
  EXPECT_NE(bad.status().message().find("c-small"), std::string::npos);  // lists the known ids
  EXPECT_FALSE(resolve_targets(c, "this", std::nullopt).ok());
  WhatIfTarget self;
  self.id = "this";
  auto all = resolve_targets(c, "all", self);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 3u + 3u + 1u);
  EXPECT_EQ(all->back().id, "this");
}

TEST(WhatIf, QuantisationNeededToFit) {
  const Catalogue c = catalogue();
  const ModelProfile m = f16_model();  // ~2.1 GiB of f16 weights
  auto big = evaluate_target(m, opts(), *resolve_targets(c, "big", std::nullopt)->begin());
  ASSERT_TRUE(big.ok()) << big.status().to_string();
  EXPECT_TRUE(big->fits);
  EXPECT_EQ(big->quantisation, "as-is");
  EXPECT_EQ(big->weight_bytes, m.total_weight_bytes());
  // Small (2 GiB - reserve): f16 does not fit, Q8_0 (8.5 bits: ~1.1 GiB) does: the largest that fits.
  auto small = evaluate_target(m, opts(), *resolve_targets(c, "small", std::nullopt)->begin());
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE(small->fits);
  EXPECT_EQ(small->quantisation, "Q8_0");
  EXPECT_NEAR(static_cast<double>(small->weight_bytes), m.total_weight_bytes() * 8.5 / 16, 8.0);
  EXPECT_TRUE(small->speed.known);
  EXPECT_GT(small->speed.generation_tokens_per_s, 0);
  // Tiny (0.75 GiB - 0.5 GiB reserve = 256 MiB): not even Q2_K (~400 MiB) fits; says what is missing.
  auto tiny = evaluate_target(m, opts(), *resolve_targets(c, "tiny", std::nullopt)->begin());
  ASSERT_TRUE(tiny.ok());
  EXPECT_FALSE(tiny->fits);
  EXPECT_EQ(tiny->quantisation, "");
  EXPECT_NE(tiny->missing.find("Q2_K"), std::string::npos) << tiny->missing;
  EXPECT_NE(tiny->missing.find("gpu:0 needs"), std::string::npos) << tiny->missing;
  EXPECT_FALSE(tiny->usd_per_million_tokens.has_value());
}

TEST(WhatIf, SortedByCostWithUnpricedAndMisfitsLast) {
  const Catalogue c = catalogue();
  auto targets = resolve_targets(c, "tiny,big,c-big4,c-small,small", std::nullopt);
  ASSERT_TRUE(targets.ok());
  auto r = what_if(f16_model(), opts(), c, *targets);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->results.size(), 5u);
  std::vector<std::string> order;
  for (const auto& x : r->results) order.push_back(x.target.id);
  // $/M tokens = $/h / (tokens/s x 3600) x 1e6. c-small and small cost the same per hour and are equally
  // fast (same GPU), big (3/h) is cheaper per token than c-big4 (12/h, same speed: layers run in turn).
  for (size_t i = 0; i + 1 < 4; ++i) {
    EXPECT_LE(*r->results[i].usd_per_million_tokens, *r->results[i + 1].usd_per_million_tokens) << i;
  }
  EXPECT_EQ(order.back(), "tiny");
  const auto& x = r->results.front();
  EXPECT_NEAR(*x.usd_per_million_tokens,
              *x.target.price_usd_per_hour / (x.speed.generation_tokens_per_s * 3600) * 1e6, 1e-9);
  EXPECT_TRUE(r->missing.empty());
  const auto j = what_if_to_json(*r);
  EXPECT_TRUE(j["fits_anywhere"].get<bool>());
  EXPECT_EQ(j["targets"][4]["target"], "tiny");
  EXPECT_TRUE(j["targets"][4]["speed"].is_null());
  EXPECT_FALSE(what_if_to_text(*r).empty());
}

TEST(WhatIf, TooBigForEveryTargetSaysWhatIsMissing) {
  const Catalogue c = catalogue();
  auto r = what_if(f16_model(), opts(), c, *resolve_targets(c, "tiny", std::nullopt));
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->missing.find("fits none of the 1 targets"), std::string::npos) << r->missing;
  EXPECT_NE(r->missing.find("tiny"), std::string::npos) << r->missing;
  EXPECT_FALSE(what_if_to_json(*r)["fits_anywhere"].get<bool>());
}

TEST(WhatIf, RequantisedScalesEveryWeight) {
  const ModelProfile m = f16_model();
  const ModelProfile q = requantised(m, 4.0);  // a quarter of 16 bits
  EXPECT_EQ(q.layers[0].weight_bytes, 64 * kMiB);
  EXPECT_EQ(q.output_weight_bytes, 16 * kMiB);
  EXPECT_EQ(q.file_bytes, m.file_bytes / 4);
  EXPECT_EQ(q.n_params, m.n_params);
}

}  // namespace
}  // namespace gantry::plan

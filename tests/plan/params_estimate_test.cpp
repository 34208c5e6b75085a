// `gantry plan --params`: a parameter count becomes a llama-shaped bf16 checkpoint that says it is an
// estimate (gantry/plan/params_estimate.h), and the converter takes it as it takes a real one.
#include "gantry/plan/params_estimate.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gantry/plan/checkpoint.h"

namespace gantry::plan {
namespace {

TEST(ParamCount, Parses) {
  EXPECT_EQ(*parse_param_count("70B"), 70'000'000'000u);
  EXPECT_EQ(*parse_param_count("7.6b"), 7'600'000'000u);
  EXPECT_EQ(*parse_param_count("500M"), 500'000'000u);
  EXPECT_EQ(*parse_param_count("8e9"), 8'000'000'000u);
  EXPECT_EQ(*parse_param_count("1.5T "), 1'500'000'000'000u);
  EXPECT_EQ(*parse_param_count("3G"), 3'000'000'000u);
  EXPECT_EQ(*parse_param_count("2000k"), 2'000'000u);
  for (const char* bad : {"", "seventy", "70X", "B", "0.5M", "200T", "7B7", "nan", "-7B"}) {
    auto r = parse_param_count(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("--params"), std::string::npos) << r.status().message();
  }
}

uint32_t config_field(const CheckpointRead& r, const char* key) {
  return nlohmann::json::parse(r.config_json).at(key).get<uint32_t>();
}

TEST(ParamsCheckpoint, NearPublishedCountKeepsThatModelsShape) {
  auto r = params_checkpoint({.params = "70B"});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->label, "70B");
  EXPECT_EQ(r->bytes_read, 0u);
  EXPECT_EQ(r->files, 0u);
  ASSERT_EQ(r->assumptions.size(), 2u);
  EXPECT_NE(r->assumptions[0].find("shaped like Llama 3.1 70B: 80 layers (as published)"), std::string::npos)
      << r->assumptions[0];
  EXPECT_EQ(config_field(*r, "num_hidden_layers"), 80u);
  EXPECT_EQ(config_field(*r, "num_key_value_heads"), 8u);
  // Untied: the embedding, 9 tensors a layer, the norm and lm_head; every byte bf16 and counted.
  ASSERT_EQ(r->tensors.size(), 1u + 9 * 80 + 2);
  uint64_t bytes = 0;
  for (const auto& t : r->tensors) {
    EXPECT_EQ(t.dtype, DType::kBFloat16) << t.name;
    uint64_t n = 2;
    for (uint64_t d : t.shape) n *= d;
    EXPECT_EQ(t.bytes, n) << t.name;
    bytes += t.bytes;
  }
  EXPECT_EQ(r->stored_bytes, bytes);
  EXPECT_NEAR(static_cast<double>(bytes) / 2, 70.6e9, 0.1e9);  // Llama 3.1 70B's 70.6B parameters
  // The converter plans it as it plans a real checkpoint.
  auto conv = convert_checkpoint(r->config_json, r->tensors);
  ASSERT_TRUE(conv.ok()) << conv.status().to_string();
  EXPECT_EQ(conv->hparams.n_layer, 80u);
}

TEST(ParamsCheckpoint, OtherCountsScaleTheLayersAndGivenFieldsWin) {
  auto seven = params_checkpoint({.params = "7B"});
  ASSERT_TRUE(seven.ok());
  EXPECT_NE(seven->assumptions[0].find("Llama 3.1 8B"), std::string::npos) << seven->assumptions[0];
  EXPECT_NE(seven->assumptions[0].find("(scaled to the parameter count)"), std::string::npos);
  EXPECT_LT(config_field(*seven, "num_hidden_layers"), 32u);

  auto given = params_checkpoint({.params = "7B", .layers = 30, .heads = 16});
  ASSERT_TRUE(given.ok()) << given.status().to_string();
  EXPECT_NE(given->assumptions[0].find("30 layers (given)"), std::string::npos) << given->assumptions[0];
  EXPECT_EQ(config_field(*given, "num_attention_heads"), 16u);
  EXPECT_EQ(config_field(*given, "num_key_value_heads"), 8u);  // the shape's, fewer than the heads
  auto few = params_checkpoint({.params = "7B", .heads = 4});
  ASSERT_TRUE(few.ok());
  EXPECT_EQ(config_field(*few, "num_key_value_heads"), 4u);  // never more KV heads than heads

  auto bad = params_checkpoint({.params = "7B", .heads = 7});  // 7 does not divide 4096
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("7 heads"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(params_checkpoint({.params = "seventy"}).ok());
}

}  // namespace
}  // namespace gantry::plan

// read_hyperparameters: the one gate before llama.cpp. The real tiny model passes; the same model with one
// hyperparameter that llama.cpp would assert on (or divide by) is refused with the key's name.
#include "gantry/model/gguf_hparams.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>

#include "model/gguf_builder.h"
#include "model/gguf_patch.h"

namespace gantry::model {
namespace {

std::string tiny_bytes() {
  std::ifstream in(GANTRY_DEPS_DIR "/models/tiny-llama.gguf", std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Result<GgufHyperparameters> read_patched(const std::string& key, double value) {
  const std::string bytes = testing::patch_gguf_scalar(tiny_bytes(), key, value);
  GANTRY_ASSIGN_OR_RETURN(
      GgufFile f, GgufFile::parse(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
                                  "patched.gguf"));
  return read_hyperparameters(f);
}

TEST(GgufHyperparameters, TheTinyModelPasses) {
  const std::string bytes = tiny_bytes();
  ASSERT_GT(bytes.size(), 1000u) << "tiny-llama.gguf missing: run 'make setup'";
  auto f = GgufFile::parse(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), "tiny");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto h = read_hyperparameters(*f);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(h->architecture, "llama");
  EXPECT_GT(h->n_layer, 0u);
  EXPECT_EQ(h->n_head.size(), h->n_layer);
  EXPECT_GT(h->n_head_kv[0], 0u);
  EXPECT_EQ(h->n_head[0] % h->n_head_kv[0], 0u);
  EXPECT_EQ(h->n_vocab, 32000u);
}

struct BadValue {
  const char* key;
  double value;
  const char* says;  // part of the message
};

class OneBadHyperparameter : public ::testing::TestWithParam<BadValue> {};

TEST_P(OneBadHyperparameter, IsRefusedWithTheKeyNamed) {
  const BadValue& b = GetParam();
  auto h = read_patched(b.key, b.value);
  ASSERT_FALSE(h.ok()) << b.key << " = " << b.value << " was accepted";
  EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(h.status().message().find(b.key), std::string::npos) << h.status().message();
  EXPECT_NE(h.status().message().find(b.says), std::string::npos) << h.status().message();
  EXPECT_NE(h.status().message().find("patched.gguf"), std::string::npos) << h.status().message();
}

const double kNaN = std::numeric_limits<double>::quiet_NaN();
INSTANTIATE_TEST_SUITE_P(
    Tiny, OneBadHyperparameter,
    ::testing::Values(BadValue{"llama.block_count", 0, "outside 1..512"},
                      BadValue{"llama.block_count", 4294967295.0, "outside 1..512"},
                      // Fewer blocks than the tensors name (found by gguf_hparams_fuzz: the planner refused
                      // what the validator let through).
                      BadValue{"llama.block_count", 1, "names layer 1"},
                      BadValue{"llama.embedding_length", 0, "outside"},
                      BadValue{"llama.context_length", 0, "outside"},
                      BadValue{"llama.attention.head_count_kv", 0, "divide head_count"},
                      BadValue{"llama.attention.head_count_kv", 3, "divide head_count"},
                      BadValue{"llama.attention.head_count", 100000, "outside"},
                      BadValue{"llama.attention.layer_norm_rms_epsilon", kNaN, "not a finite number"},
                      BadValue{"llama.attention.layer_norm_rms_epsilon", -1e-5, "not a finite number"},
                      BadValue{"llama.feed_forward_length", 4294967295.0, "outside"}));

TEST(GgufHyperparameters, ExpertCountsAreChecked) {
  testing::GgufBuilder b;
  b.header(0, 5)
      .kv_str("general.architecture", "llama")
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.embedding_length", 8)
      .kv_u32("llama.context_length", 16)
      .kv_u32("llama.expert_used_count", 2);  // used experts without any experts
  auto f = GgufFile::parse(b.bytes, "experts.gguf");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto h = read_hyperparameters(*f);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("llama.expert_used_count"), std::string::npos) << h.status().message();
}

TEST(GgufHyperparameters, MissingArchitectureIsNamed) {
  testing::GgufBuilder b;
  b.header(0, 1).kv_u32("llama.block_count", 1);
  auto f = GgufFile::parse(b.bytes, "noarch.gguf");
  ASSERT_TRUE(f.ok());
  auto h = read_hyperparameters(*f);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("general.architecture"), std::string::npos);
}

}  // namespace
}  // namespace gantry::model

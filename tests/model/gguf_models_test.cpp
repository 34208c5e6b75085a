// The reader on the models set-up generates (scripts/models/gguf_llama.py): values match what the generator
// wrote, and every truncation of a real file is refused cleanly.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "gantry/model/gguf.h"

namespace gantry::model {
namespace {

const std::string kModels = GANTRY_DEPS_DIR "/models/";

#define REQUIRE_MODEL(name)                                                            \
  if (!std::filesystem::exists(kModels + name)) {                                      \
    FAIL() << kModels << name << " is missing: run 'make setup' to generate it"; \
  }

TEST(GgufModels, TinyLlamaMatchesTheGenerator) {
  REQUIRE_MODEL("tiny-llama.gguf");
  auto r = GgufFile::open(kModels + "tiny-llama.gguf");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const GgufFile& f = *r;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.architecture(), "llama");
  EXPECT_EQ(f.get_string("general.name"), "gantry-tiny-llama");
  EXPECT_EQ(f.get_uint("llama.block_count"), 2u);
  EXPECT_EQ(f.get_uint("llama.embedding_length"), 64u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count"), 4u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(f.get_uint("llama.feed_forward_length"), 128u);
  EXPECT_EQ(f.get_uint("llama.context_length"), 2048u);
  EXPECT_NEAR(*f.get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-9);
  const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_NE(tokens->as_array(), nullptr);
  EXPECT_EQ(tokens->as_array()->size(), 32000u);
  EXPECT_EQ(*tokens->as_array()->at(1).as_string(), "<s>");
  EXPECT_EQ(f.find("tokenizer.ggml.scores")->as_array()->element_type(), GgufType::kFloat32);
  EXPECT_EQ(f.find("tokenizer.ggml.add_bos_token")->as_bool(), true);
  EXPECT_NE(f.get_string("tokenizer.chat_template")->find("<|im_start|>"), std::string::npos);

  ASSERT_EQ(f.tensors().size(), 1u + 2 * 9 + 2);
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type.type, GgmlType::kF16);
  EXPECT_EQ(embd->dims, (std::vector<uint64_t>{64, 32000}));
  const GgufTensorInfo* k = f.find_tensor("blk.1.attn_k.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->dims, (std::vector<uint64_t>{64, 32}));  // 2 KV heads x 16
  const GgufTensorInfo* norm = f.find_tensor("blk.0.attn_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->type.type, GgmlType::kF32);
  // The generator wrote 1 + N(0, 0.01) for norms: the mapped bytes must read back as such.
  auto data = f.tensor_data(*norm);
  ASSERT_EQ(data.size(), 64u * 4);
  for (size_t i = 0; i < 64; ++i) {
    float v;
    std::memcpy(&v, data.data() + 4 * i, 4);
    EXPECT_GT(v, 0.9f);
    EXPECT_LT(v, 1.1f);
  }
  uint64_t sum = 0;
  for (const auto& t : f.tensors()) sum += t.size_bytes;
  EXPECT_EQ(sum, 8340736u);  // llama_model_size() as llama.cpp printed it at set-up
}

TEST(GgufModels, QuantisedBenchModels) {
  REQUIRE_MODEL("bench-100m-q8_0.gguf");
  for (const auto& [file, type, bytes] : {std::tuple{"bench-100m-q8_0.gguf", GgmlType::kQ8_0, 132516864ull},
                                          std::tuple{"bench-100m-q4_0.gguf", GgmlType::kQ4_0, 76528128ull}}) {
    auto r = GgufFile::open(kModels + file);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->get_uint("llama.block_count"), 12u);
    EXPECT_EQ(r->get_uint("llama.attention.head_count_kv"), 4u);
    EXPECT_EQ(r->tensors().size(), 1u + 12 * 9 + 2);
    EXPECT_EQ(r->find_tensor("blk.5.ffn_down.weight")->type.type, type) << file;
    EXPECT_EQ(r->find_tensor("blk.5.ffn_down.weight")->dims, (std::vector<uint64_t>{2048, 768}));
    uint64_t sum = 0;
    for (const auto& t : r->tensors()) sum += t.size_bytes;
    EXPECT_EQ(sum, bytes) << file << ": llama_model_size() as llama.cpp printed it at set-up";
  }
}

TEST(GgufModels, TruncatedTinyModelIsAlwaysRefused) {
  REQUIRE_MODEL("tiny-llama.gguf");
  std::ifstream in(kModels + "tiny-llama.gguf", std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  auto full = GgufFile::parse(bytes, "tiny");
  ASSERT_TRUE(full.ok());
  uint64_t data_end = 0;
  for (const auto& t : full->tensors())
    data_end = std::max(data_end, full->data_offset() + t.offset + t.size_bytes);
  // Section boundaries: header, each metadata entry's neighbourhood, tensor infos, data start; plus a stride.
  std::vector<size_t> cuts = {0,
                              3,
                              4,
                              7,
                              8,
                              15,
                              16,
                              23,
                              24,
                              25,
                              static_cast<size_t>(full->data_offset()) - 1,
                              static_cast<size_t>(full->data_offset()),
                              static_cast<size_t>(data_end) - 1};
  for (size_t n = 0; n < 128; ++n) cuts.push_back(n);  // header and the first metadata entries, byte by byte
  for (size_t n = 128; n < full->data_offset(); n += full->data_offset() / 60 + 1) cuts.push_back(n);
  for (size_t n = full->data_offset(); n < data_end; n += (data_end - full->data_offset()) / 20 + 1)
    cuts.push_back(n);
  for (size_t n : cuts) {
    auto r = GgufFile::parse(std::span(bytes).first(n), "tiny");
    EXPECT_FALSE(r.ok()) << "truncated to " << n << " bytes was accepted";
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << r.status().to_string();
      EXPECT_NE(r.status().message().find("tiny"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace gantry::model

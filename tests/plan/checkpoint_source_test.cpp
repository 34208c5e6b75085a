// What `gantry plan` reads of a checkpoint (gantry/plan/checkpoint_source.h): which specs are checkpoints,
// the short name of one, and config.json plus the safetensors headers read from a directory, an index's
// file or one .safetensors file, and nothing of the tensor data.
#include "gantry/plan/checkpoint_source.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace gantry::plan {
namespace {

namespace fs = std::filesystem;

// A directory with config.json and one model.safetensors holding a bf16 [512, 1024] tensor (1 MiB) and an
// f32 [1024] one.
class CheckpointDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tpl[] = "/tmp/gantry-ckpt-source-XXXXXX";
    dir_ = ::mkdtemp(tpl);
    const std::string header =
        R"({"model.embed_tokens.weight":{"dtype":"BF16","shape":[512,1024],"data_offsets":[0,1048576]},)"
        R"("model.norm.weight":{"dtype":"F32","shape":[1024],"data_offsets":[1048576,1052672]}})";
    std::ofstream f(dir_ / "model.safetensors", std::ios::binary);
    const uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) f.put(static_cast<char>((n >> (8 * i)) & 0xff));
    f << header << std::string(1052672, '\0');
    std::ofstream(dir_ / "config.json") << kConfig;
  }
  void TearDown() override { fs::remove_all(dir_); }

  static constexpr const char* kConfig = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 1024})";
  fs::path dir_;
};

TEST(CheckpointSpec, UrlsDirectoriesIndexesAndSafetensorsAreCheckpoints) {
  EXPECT_TRUE(is_checkpoint_spec("https://huggingface.co/Qwen/Qwen2.5-7B-Instruct"));
  EXPECT_TRUE(is_checkpoint_spec("http://localhost:8000/m/"));
  EXPECT_TRUE(is_checkpoint_spec("/models/m/model.safetensors.index.json"));
  EXPECT_TRUE(is_checkpoint_spec("/models/m/model.safetensors"));
  EXPECT_TRUE(is_checkpoint_spec(fs::temp_directory_path().string()));
  EXPECT_FALSE(is_checkpoint_spec("/models/m/model.gguf"));
  EXPECT_FALSE(is_checkpoint_spec("/nonexistent/model.onnx"));
  EXPECT_FALSE(is_checkpoint_spec("ftp://host/m"));
}

TEST(CheckpointSpec, NameIsTheCheckpointsDirectory) {
  EXPECT_EQ(checkpoint_name("/models/Qwen2.5-7B-Instruct"), "Qwen2.5-7B-Instruct");
  EXPECT_EQ(checkpoint_name("/models/Qwen2.5-7B-Instruct/"), "Qwen2.5-7B-Instruct");
  EXPECT_EQ(checkpoint_name("/models/m/model.safetensors.index.json"), "m");
  EXPECT_EQ(checkpoint_name("./m/model.safetensors"), "m");
  EXPECT_EQ(checkpoint_name("https://huggingface.co/ORG/NAME/resolve/main/model.safetensors?x=1"), "NAME");
  EXPECT_EQ(checkpoint_name("https://huggingface.co/ORG/NAME"), "NAME");
  EXPECT_EQ(checkpoint_name("model.safetensors"), "model.safetensors");  // nothing else to go by
}

TEST_F(CheckpointDir, ReadsConfigAndHeadersOnly) {
  for (const fs::path& spec : {dir_, dir_ / "model.safetensors"}) {
    SCOPED_TRACE(spec.string());
    auto r = read_checkpoint(spec.string());
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->label, spec.string());
    EXPECT_EQ(r->config_json, kConfig);
    EXPECT_EQ(r->files, 1u);
    EXPECT_EQ(r->stored_bytes, 1052672u);
    EXPECT_TRUE(r->assumptions.empty());
    ASSERT_EQ(r->tensors.size(), 2u);
    const CheckpointTensor* embd = nullptr;
    for (const auto& t : r->tensors)
      if (t.name == "model.embed_tokens.weight") embd = &t;
    ASSERT_NE(embd, nullptr);
    EXPECT_EQ(embd->dtype, DType::kBFloat16);
    EXPECT_EQ(embd->shape, (std::vector<uint64_t>{512, 1024}));  // as in the header: outermost first
    EXPECT_EQ(embd->bytes, 1048576u);
    // The header and config.json, not the megabyte of data.
    EXPECT_GE(r->bytes_read, std::string(kConfig).size());
    EXPECT_LT(r->bytes_read, 64u << 10);
  }
}

TEST_F(CheckpointDir, WithoutConfigJsonIsNotFound) {
  fs::remove(dir_ / "config.json");
  auto r = read_checkpoint(dir_.string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("no config.json"), std::string::npos) << r.status().message();
  // One file: its config.json is the one beside it, and its absence is named.
  auto one = read_checkpoint((dir_ / "model.safetensors").string());
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.status().message().find("its config.json"), std::string::npos) << one.status().message();
}

TEST_F(CheckpointDir, AnotherWeightFormatIsRefused) {
  // A .npy file (1-D, two floats): weights the reader knows, but not a checkpoint.
  const fs::path npy = dir_ / "w.npy";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  header.resize(128 - 10 - 1, ' ');  // magic, version and length (10 bytes), then 64-byte aligned
  header += '\n';
  std::ofstream f(npy, std::ios::binary);
  f << "\x93NUMPY" << '\x01' << '\x00' << static_cast<char>(header.size()) << '\x00' << header
    << std::string(8, '\0');
  f.close();
  auto r = read_checkpoint(npy.string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().to_string();
  EXPECT_NE(r.status().message().find("not a safetensors checkpoint"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace gantry::plan

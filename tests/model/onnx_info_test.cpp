// ONNX model info: the real pretrained models fetched at set-up, and bad files.
#include "gantry/model/onnx_info.h"

#include <gtest/gtest.h>

#include <random>

#include "core/temp_dir.h"
#include "gantry/core/file_io.h"
#include "model/tiny_onnx.h"

namespace gantry::model {
namespace {

namespace fs = std::filesystem;
const fs::path kModels = fs::path(GANTRY_DEPS_DIR) / "models";

const OnnxValueInfo& find(const std::vector<OnnxValueInfo>& values, const std::string& name) {
  for (const auto& v : values)
    if (v.name == name) return v;
  static const OnnxValueInfo kNone;
  ADD_FAILURE() << "no value named " << name;
  return kNone;
}

TEST(OnnxInfo, SileroVadV5) {
  const fs::path path = kModels / "silero_vad_v5.onnx";
  if (!fs::exists(path)) FAIL() << path << " missing: run 'make setup'";
  auto info = read_onnx_info(path);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->file_size, fs::file_size(path));
  EXPECT_EQ(info->ir_version, 8);
  EXPECT_EQ(info->producer_name, "spox");
  EXPECT_EQ(info->default_opset(), 16);
  ASSERT_EQ(info->inputs.size(), 3u);
  const auto& input = find(info->inputs, "input");
  EXPECT_EQ(input.dtype, DType::kFloat32);
  EXPECT_EQ(input.shape, Shape({Shape::kDynamic, Shape::kDynamic}));
  EXPECT_EQ(input.shape_text(), "[?,?]");
  const auto& state = find(info->inputs, "state");
  EXPECT_EQ(state.dtype, DType::kFloat32);
  EXPECT_EQ(state.shape_text(), "[2,?,128]");
  const auto& sr = find(info->inputs, "sr");
  EXPECT_EQ(sr.dtype, DType::kInt64);
  EXPECT_EQ(sr.shape, Shape());  // scalar
  EXPECT_EQ(sr.shape_text(), "[]");
  ASSERT_EQ(info->outputs.size(), 2u);
  EXPECT_EQ(find(info->outputs, "output").shape_text(), "[?,1]");
  EXPECT_EQ(find(info->outputs, "stateN").shape_text(), "[?,?,?]");
}

TEST(OnnxInfo, PaddleOcrModels) {
  struct Want {
    const char* file;
    int64_t opset;
    const char* input_shape;
    const char* output;
    const char* output_shape;
  };
  for (const auto& w :
       {Want{"ch_PP-OCRv4_det_infer.onnx", 11,
             "[p2o.DynamicDimension.0,3,p2o.DynamicDimension.1,"
             "p2o.DynamicDimension.2]",
             "sigmoid_0.tmp_0", "[p2o.DynamicDimension.3,1,p2o.DynamicDimension.4,p2o.DynamicDimension.5]"},
        Want{"ch_PP-OCRv4_rec_infer.onnx", 9, "[p2o.DynamicDimension.0,3,48,p2o.DynamicDimension.1]",
             "softmax_11.tmp_0", "[p2o.DynamicDimension.2,p2o.DynamicDimension.3,6625]"},
        Want{"ch_ppocr_mobile_v2.0_cls_infer.onnx", 9,
             "[p2o.DynamicDimension.0,3,p2o.DynamicDimension.1,p2o.DynamicDimension.2]", "softmax_0.tmp_0",
             "[p2o.DynamicDimension.3,2]"}}) {
    const fs::path path = kModels / "paddleocr" / w.file;
    if (!fs::exists(path)) FAIL() << path << " missing: run 'make setup'";
    auto info = read_onnx_info(path);
    ASSERT_TRUE(info.ok()) << info.status().to_string();
    EXPECT_EQ(info->default_opset(), w.opset) << w.file;
    ASSERT_EQ(info->inputs.size(), 1u) << w.file << ": initializers must not be listed as inputs";
    EXPECT_EQ(info->inputs[0].name, "x");
    EXPECT_EQ(info->inputs[0].dtype, DType::kFloat32);
    EXPECT_EQ(info->inputs[0].shape_text(), w.input_shape) << w.file;
    EXPECT_EQ(info->inputs[0].shape->rank(), 4u);
    ASSERT_EQ(info->outputs.size(), 1u);
    EXPECT_EQ(info->outputs[0].name, w.output);
    EXPECT_EQ(info->outputs[0].shape_text(), w.output_shape) << w.file;
    EXPECT_GT(info->node_count, 10u);
    EXPECT_EQ(info->initializer_count, 0u) << "paddle2onnx keeps weights in Constant nodes";
    EXPECT_EQ(info->file_size, fs::file_size(path));
  }
}

TEST(OnnxInfo, TinyModelNamedDims) {
  const std::string bytes = test_util::tiny_onnx_bytes();
  auto info = parse_onnx_info(std::as_bytes(std::span<const char>(bytes.data(), bytes.size())));
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->producer_name, "gantry-test");
  EXPECT_EQ(info->inputs[0].shape_text(), "[batch,4]");
  EXPECT_EQ(info->inputs[0].dim_names, (std::vector<std::string>{"batch", ""}));
}

TEST(OnnxInfo, BadFilesAreClearErrors) {
  test_util::TempDir dir;
  auto missing = read_onnx_info(dir.path() / "missing.onnx");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("missing.onnx"), std::string::npos);

  ASSERT_TRUE(write_file(dir.path() / "empty.onnx", "").ok());
  auto empty = read_onnx_info(dir.path() / "empty.onnx");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos);

  // Truncated at many lengths, of a real model when present (else the tiny one).
  std::string bytes = test_util::tiny_onnx_bytes();
  if (fs::exists(kModels / "silero_vad_v5.onnx")) bytes = *read_file(kModels / "silero_vad_v5.onnx");
  for (size_t n : {size_t{1}, size_t{2}, size_t{7}, size_t{16}, size_t{100}, size_t{1000}, bytes.size() / 3,
                   bytes.size() / 2, bytes.size() - 100, bytes.size() - 1}) {
    if (n >= bytes.size()) continue;
    ASSERT_TRUE(write_file(dir.path() / "cut.onnx", bytes.substr(0, n)).ok());
    auto r = read_onnx_info(dir.path() / "cut.onnx");
    ASSERT_FALSE(r.ok()) << "truncated to " << n << " of " << bytes.size() << " bytes parsed";
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << r.status().to_string();
    EXPECT_NE(r.status().message().find("cut.onnx"), std::string::npos);
  }
  std::mt19937 rng(99);
  for (int i = 0; i < 20; ++i) {
    std::string noise(1 + rng() % 5000, '\0');
    for (auto& c : noise) c = static_cast<char>(rng());
    auto r = parse_onnx_info(std::as_bytes(std::span<const char>(noise.data(), noise.size())), "noise");
    EXPECT_FALSE(r.ok()) << "random bytes parsed as a model";
  }
  ASSERT_TRUE(write_file(dir.path() / "text.onnx", "this is a text file, not a model\n").ok());
  EXPECT_FALSE(read_onnx_info(dir.path() / "text.onnx").ok());
  fs::create_directories(dir.path() / "adir.onnx");
  EXPECT_FALSE(read_onnx_info(dir.path() / "adir.onnx").ok());
}

}  // namespace
}  // namespace gantry::model

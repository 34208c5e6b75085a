// OnnxModel::open_bytes: a model in memory gives the file's outputs, also on shape-bucket sessions made
// later from the bytes it keeps (the caller's copy is gone by then), and damaged bytes are errors.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "backend/onnx/onnx_test_util.h"
#include "gantry/backend/onnx/onnx_model.h"

namespace gantry::onnx {
namespace {

using testing::kMlp;

std::shared_ptr<const std::string> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::make_shared<const std::string>(std::istreambuf_iterator<char>(in),
                                             std::istreambuf_iterator<char>());
}

std::span<const std::byte> span_of(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

TEST(OpenBytes, BucketSessionsMadeLaterFromTheKeptBytesMatchTheFile) {
  REQUIRE_MODEL(kMlp);
  backend::Placement p = testing::one_thread();
  p.onnx.bucket_dim_granularity = 4;
  p.onnx.bucket_dims = {{"input", {"batch"}}, {"logits", {"batch"}}};
  auto from_file = OnnxModel::open(kMlp, p);
  ASSERT_TRUE(from_file.ok()) << from_file.status().to_string();
  Result<std::unique_ptr<OnnxModel>> from_bytes = Internal("not opened");
  {
    auto bytes = read_bytes(kMlp);
    from_bytes = OnnxModel::open_bytes(span_of(*bytes), bytes, "mlp_64_128_10.onnx", p);
  }  // only the model holds the bytes now
  ASSERT_TRUE(from_bytes.ok()) << from_bytes.status().to_string();
  EXPECT_EQ((*from_bytes)->metadata().name, "mlp_64_128_10");
  for (int64_t rows : {1, 5, 9}) {  // three bucket sessions, each made on first use
    std::vector<backend::NamedTensor> in{{"input", testing::random_f32(Shape({rows, 64}), 7)}};
    auto want = (*from_file)->infer_one(in);
    auto got = (*from_bytes)->infer_one(in);
    ASSERT_TRUE(want.ok() && got.ok()) << got.status().to_string();
    const auto& x = (*want)[0].tensor;
    const auto& y = (*got)[0].tensor;
    ASSERT_EQ(y.shape(), x.shape());
    for (size_t i = 0; i < x.values<float>().size(); ++i)
      ASSERT_EQ(y.values<float>()[i], x.values<float>()[i]) << rows << " rows, value " << i;
  }
  EXPECT_EQ((*from_bytes)->bucket_sessions().size(), 3u);
}

TEST(OpenBytes, DamagedBytesAreErrorsNamingTheLabel) {
  REQUIRE_MODEL(kMlp);
  auto bytes = read_bytes(kMlp);
  auto half = std::make_shared<const std::string>(bytes->substr(0, bytes->size() / 2));
  auto garbage = std::make_shared<const std::string>(4096, '\x7f');
  for (const auto& b : {half, garbage, std::make_shared<const std::string>()}) {
    auto m = OnnxModel::open_bytes(span_of(*b), b, "https://h/bad.onnx", testing::one_thread());
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("https://h/bad.onnx"), std::string::npos) << m.status().message();
  }
}

}  // namespace
}  // namespace gantry::onnx

#include <gtest/gtest.h>

#include <vector>

#include "gantry/core/tensor.h"

namespace gantry {
namespace {

TEST(TensorAdopt, KeepsTheOwnerAliveUntilTheLastCopyGoes) {
  auto buffer = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4, 5, 6});
  std::weak_ptr<std::vector<float>> watch = buffer;
  Tensor copy;
  {
    auto t = Tensor::adopt(DType::kFloat32, Shape{2, 3}, buffer->data(), 6 * sizeof(float), buffer);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    buffer.reset();
    EXPECT_FALSE(watch.expired());
    EXPECT_TRUE(t->owns_data());
    EXPECT_EQ(t->values<float>()[4], 5.0f);
    copy = *t;
  }
  EXPECT_FALSE(watch.expired()) << "a copy still holds the owner";
  EXPECT_EQ(copy.values<float>()[5], 6.0f);
  copy = Tensor();
  EXPECT_TRUE(watch.expired());
}

TEST(TensorAdopt, RejectsSizeMismatchAndMissingOwner) {
  std::vector<float> v(4);
  auto owner = std::make_shared<int>(0);
  EXPECT_EQ(Tensor::adopt(DType::kFloat32, Shape{5}, v.data(), 16, owner).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Tensor::adopt(DType::kFloat32, Shape{4}, v.data(), 16, nullptr).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gantry

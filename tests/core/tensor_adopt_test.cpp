#include <gtest/gtest.h>

#include <memory>
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
    EXPECT_EQ(t->values<float>()[4], 5.0f);
    copy = *t;
  }
  EXPECT_FALSE(watch.expired()) << "a copy still holds the owner";
  EXPECT_EQ(copy.values<float>()[5], 6.0f);
  copy = Tensor();
  EXPECT_TRUE(watch.expired());
}

TEST(TensorAdopt, SaysWhereTheBytesAre) {
  auto buffer = std::make_shared<std::vector<float>>(4);
  auto t = Tensor::adopt(DType::kFloat32, Shape{4}, buffer->data(), 16, buffer, MemoryClass::kDevice, 1);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->memory_class(), MemoryClass::kDevice);
  EXPECT_EQ(t->device_id(), 1);
  EXPECT_EQ(ConstTensorView(*t).memory_class(), MemoryClass::kDevice);
  EXPECT_EQ(t->clone().status().code(), StatusCode::kUnsupported);
  auto host = Tensor::adopt(DType::kFloat32, Shape{4}, buffer->data(), 16, buffer);
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(host->memory_class(), MemoryClass::kHost);
  EXPECT_EQ(host->device_id(), -1);
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

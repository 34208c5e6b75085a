// ConstTensorView / TensorView: borrowed views of a Tensor or of caller memory, and values<T>()'s element
// type check.
#include "gantry/core/tensor_view.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "gantry/core/tensor.h"

namespace gantry {
namespace {

// Sums a float tensor through the read-only view type a Tensor converts to.
float sum(ConstTensorView v) {
  float s = 0;
  for (float x : v.values<float>()) s += x;
  return s;
}

void fill(TensorView v, float x) {
  for (float& e : v.values<float>()) e = x;
}

TEST(TensorView, ATensorConvertsToViewsOfItsOwnElements) {
  auto t = Tensor::from_values<float>(DType::kFloat32, Shape{2, 2}, {1, 2, 3, 4});
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(sum(*t), 10.0f);
  fill(*t, 2.5f);  // writes through to the tensor
  EXPECT_EQ(t->values<float>()[3], 2.5f);
  ConstTensorView v = *t;
  EXPECT_EQ(v.data(), t->data());
  EXPECT_EQ(v.dtype(), DType::kFloat32);
  EXPECT_EQ(v.shape(), (Shape{2, 2}));
  EXPECT_EQ(v.byte_size(), 16u);
  EXPECT_FALSE(v.empty());
  EXPECT_EQ(v.memory_class(), MemoryClass::kHost);
  const Tensor& ct = *t;
  ConstTensorView from_const = ct;
  EXPECT_EQ(from_const.values<float>().data(), t->values<float>().data());
}

TEST(TensorView, StringTensorsViewTheirStrings) {
  auto t = Tensor::from_strings(Shape{2}, {"ab", "cde"});
  ASSERT_TRUE(t.ok());
  ConstTensorView v = *t;
  ASSERT_EQ(v.strings().size(), 2u);
  EXPECT_EQ(v.strings()[1], "cde");
  EXPECT_EQ(v.byte_size(), 5u);
  EXPECT_FALSE(v.empty());
  EXPECT_FALSE(v.holds<std::string>()) << "string elements are strings(), not data";
}

TEST(TensorView, OverCallerMemoryChecksTheSize) {
  std::vector<int32_t> buf{7, 8, 9};
  auto v = TensorView::over(DType::kInt32, Shape{3}, buf.data(), 12);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  v->values<int32_t>()[0] = 1;
  EXPECT_EQ(buf[0], 1);
  auto c = ConstTensorView::over(DType::kInt32, Shape{3}, buf.data(), 12);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->values<int32_t>()[2], 9);
  auto wrong = TensorView::over(DType::kInt32, Shape{4}, buf.data(), 12);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("needs 16 bytes, got 12"), std::string::npos)
      << wrong.status().to_string();
  EXPECT_FALSE(ConstTensorView::over(DType::kString, Shape{1}, buf.data(), 4).ok());
  EXPECT_FALSE(ConstTensorView::over(DType::kFloat32, Shape{1}, nullptr, 4).ok());
  EXPECT_FALSE(ConstTensorView::over(DType::kFloat32, Shape{Shape::kDynamic}, buf.data(), 4).ok());
}

TEST(TensorView, HoldsMatchesTheStorageTypeOfEachDtype) {
  EXPECT_TRUE(dtype_stores<float>(DType::kFloat32));
  EXPECT_TRUE(dtype_stores<const float>(DType::kFloat32));
  EXPECT_FALSE(dtype_stores<double>(DType::kFloat32));
  EXPECT_FALSE(dtype_stores<int32_t>(DType::kFloat32));
  EXPECT_TRUE(dtype_stores<uint16_t>(DType::kFloat16));
  EXPECT_TRUE(dtype_stores<uint16_t>(DType::kBFloat16));
  EXPECT_TRUE(dtype_stores<uint8_t>(DType::kBool));
  EXPECT_TRUE(dtype_stores<uint8_t>(DType::kFloat8E4M3));
  EXPECT_FALSE(dtype_stores<int8_t>(DType::kUInt8));
  EXPECT_TRUE(dtype_stores<int64_t>(DType::kInt64));
  EXPECT_FALSE(dtype_stores<uint64_t>(DType::kInt64));
  auto t = Tensor::allocate(DType::kInt16, Shape{2});
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->holds<int16_t>());
  EXPECT_FALSE(t->holds<uint16_t>());
  EXPECT_TRUE(ConstTensorView(*t).holds<int16_t>());
}

#if !defined(NDEBUG) || defined(GANTRY_CHECK_DTYPES)
TEST(TensorViewDeathTest, ValuesOfTheWrongTypeAbortInCheckedBuilds) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto t = Tensor::allocate(DType::kFloat32, Shape{4});
  ASSERT_TRUE(t.ok());
  EXPECT_DEATH((void)t->values<double>(), "8-byte floating-point type on a f32 tensor");
  EXPECT_DEATH((void)ConstTensorView(*t).values<int32_t>(), "4-byte non-floating-point type on a f32 tensor");
  EXPECT_DEATH((void)TensorView(*t).values<uint32_t>(), "on a f32 tensor");
}
#endif

}  // namespace
}  // namespace gantry

#include "gantry/core/status.h"

#include <gtest/gtest.h>

namespace gantry {
namespace {

Result<int> half(int x) {
  if (x % 2) return InvalidArgument(std::to_string(x) + " is odd");
  return x / 2;
}

Result<int> quarter(int x) {
  GANTRY_ASSIGN_OR_RETURN(int h, half(x));
  return half(h);
}

TEST(StatusTest, CarriesCodeMessageAndContext) {
  Status s = NotFound("model.onnx").with_context("loading package /tmp/p");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.to_string(), "not found: loading package /tmp/p: model.onnx");
  EXPECT_TRUE(Status::Ok().with_context("x").ok());
}

TEST(StatusTest, AssignOrReturnPropagatesTheFirstError) {
  EXPECT_EQ(quarter(8).value(), 2);
  EXPECT_EQ(quarter(6).status().message(), "3 is odd");
  EXPECT_EQ(quarter(5).status().message(), "5 is odd");
}

}  // namespace
}  // namespace gantry

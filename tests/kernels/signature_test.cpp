// Kernel signatures parsed from source: what launch() checks arguments against.
#include "gantry/kernels/signature.h"

#include <gtest/gtest.h>

namespace gantry::kernels {
namespace {

TEST(KernelSignature, ParsesCudaKernelWithQualifiers) {
  const char* src = R"(
    // saxpy(float a) in a comment must not be taken for the kernel
    extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float *y, long long n,
                                     unsigned flags, bool on, double d, void* any) { y[0] = a; })";
  auto sig = parse_signature(src, "saxpy");
  ASSERT_TRUE(sig.ok()) << sig.status().to_string();
  ASSERT_EQ(sig->params.size(), 8u);
  EXPECT_FALSE(sig->cpu_context);
  EXPECT_FALSE(sig->params[0].is_pointer);
  EXPECT_EQ(sig->params[0].scalar, ScalarType::kF32);
  EXPECT_EQ(sig->params[0].name, "a");
  EXPECT_TRUE(sig->params[1].is_pointer);
  EXPECT_TRUE(sig->params[1].is_const);
  EXPECT_EQ(sig->params[1].element, DType::kFloat32);
  EXPECT_EQ(sig->params[1].name, "x");
  EXPECT_TRUE(sig->params[2].is_pointer);
  EXPECT_FALSE(sig->params[2].is_const);
  EXPECT_EQ(sig->params[3].scalar, ScalarType::kI64);
  EXPECT_EQ(sig->params[4].scalar, ScalarType::kU32);
  EXPECT_EQ(sig->params[5].scalar, ScalarType::kBool);
  EXPECT_EQ(sig->params[6].scalar, ScalarType::kF64);
  EXPECT_TRUE(sig->params[7].is_pointer);
  EXPECT_FALSE(sig->params[7].element.has_value());
  EXPECT_EQ(sig->to_string(),
            "saxpy(f32 a, const f32* x, f32* y, i64 n, u32 flags, bool on, f64 d, void* any)");
}

TEST(KernelSignature, CpuConventionTakesContextFirst) {
  const char* src =
      "static float helper(float v) { return v; }\n"
      "void add(const gantry_kernel_ctx* ctx, const int32_t* a, uint64_t* out, size_t n) { helper(1.f); }";
  auto sig = parse_signature(src, "add");
  ASSERT_TRUE(sig.ok()) << sig.status().to_string();
  EXPECT_TRUE(sig->cpu_context);
  ASSERT_EQ(sig->params.size(), 3u);
  EXPECT_EQ(sig->params[0].element, DType::kInt32);
  EXPECT_EQ(sig->params[1].element, DType::kUInt64);
  EXPECT_EQ(sig->params[2].scalar, ScalarType::kU64);
}

TEST(KernelSignature, ACallIsNotTheDefinition) {
  const char* src = "void run() { x = scale(2); }\n__global__ void scale(int factor) {}";
  auto sig = parse_signature(src, "scale");
  ASSERT_TRUE(sig.ok()) << sig.status().to_string();
  ASSERT_EQ(sig->params.size(), 1u);
  EXPECT_EQ(sig->params[0].name, "factor");
}

TEST(KernelSignature, MissingEntryIsNotFound) {
  auto sig = parse_signature("__global__ void other(int n) {}", "saxpy");
  ASSERT_FALSE(sig.ok());
  EXPECT_EQ(sig.status().code(), StatusCode::kNotFound);
  EXPECT_NE(sig.status().message().find("saxpy"), std::string::npos);
}

TEST(KernelSignature, UnsupportedParametersAreRefusedWithTheirPosition) {
  for (const char* params : {"float a, Params p", "int& r", "float** pp", "float x[4]", "half h"}) {
    auto sig = parse_parameter_list(params, "k");
    ASSERT_FALSE(sig.ok()) << params;
    EXPECT_EQ(sig.status().code(), StatusCode::kInvalidArgument) << params;
    EXPECT_NE(sig.status().message().find("parameter "), std::string::npos) << sig.status().message();
  }
}

TEST(KernelSignature, EightAndSixteenBitScalarsInEverySpelling) {
  auto sig = parse_parameter_list(
      "int8_t a, signed char b, uint8_t c, unsigned char d, int16_t e, short f, uint16_t g, unsigned short h",
      "k");
  ASSERT_TRUE(sig.ok()) << sig.status().to_string();
  EXPECT_EQ(sig->to_string(), "k(i8 a, i8 b, u8 c, u8 d, i16 e, i16 f, u16 g, u16 h)");
  EXPECT_EQ(scalar_size(ScalarType::kI8), 1u);
  EXPECT_EQ(scalar_size(ScalarType::kU16), 2u);
  EXPECT_EQ(parse_scalar_type("u16"), ScalarType::kU16);
}

TEST(KernelSignature, ParameterListWithoutNamesAndEmpty) {
  auto sig = parse_parameter_list("const float*, int", "k");
  ASSERT_TRUE(sig.ok()) << sig.status().to_string();
  ASSERT_EQ(sig->params.size(), 2u);
  EXPECT_TRUE(sig->params[0].name.empty());
  EXPECT_EQ(sig->params[1].scalar, ScalarType::kI32);
  auto none = parse_signature("__global__ void empty() {}", "empty");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->params.empty());
  auto v = parse_signature("__global__ void empty(void) {}", "empty");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->params.empty());
}

}  // namespace
}  // namespace gantry::kernels

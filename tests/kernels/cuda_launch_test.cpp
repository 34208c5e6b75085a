// Launching on a real GPU: runs where libcuda.so.1, a GPU and NVRTC exist; skips with the reason elsewhere.
#include <gtest/gtest.h>

#include "kernels/kernel_test_util.h"

namespace gantry::kernels {
namespace {

#define SKIP_WITHOUT_GPU(ex)                                                                       \
  do {                                                                                             \
    if (Status s = (ex).available("cuda:0"); !s.ok()) GTEST_SKIP() << "no GPU: " << s.to_string(); \
  } while (0)

ExecutorOptions shared_cache() {
  ExecutorOptions o;
  o.cache_dir = test::shared_cache_dir();
  return o;
}

TEST(CudaLaunch, ReferenceSuite) {
  KernelExecutor ex(shared_cache());
  SKIP_WITHOUT_GPU(ex);
  test::run_reference_suite(ex, "cuda:0", ".cu");
}

TEST(CudaLaunch, InfoAndArgumentChecks) {
  KernelExecutor ex(shared_cache());
  SKIP_WITHOUT_GPU(ex);
  KernelOptions o;
  o.source_name = "matmul.cu";
  auto h = ex.load(test::kernel_source("matmul.cu"), "matmul_tiled", "cuda:0", o);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  auto info = ex.info(*h);
  ASSERT_TRUE(info.ok());
  EXPECT_GT(info->registers, 0);
  EXPECT_EQ(info->static_shared_bytes, 2u * 16 * 16 * sizeof(float));
  EXPECT_GE(info->max_threads_per_block, 256);
  // The occupancy calculator's block: within the kernel's limit, whole warps.
  EXPECT_GT(info->preferred_block_size, 0);
  EXPECT_LE(info->preferred_block_size, info->max_threads_per_block);
  EXPECT_EQ(info->preferred_block_size % 32, 0);
  EXPECT_GT(info->binary_bytes, 0u);
  auto host = Tensor::allocate(DType::kFloat32, {16, 16});
  auto dev = ex.allocate("cuda:0", DType::kFloat32, {16, 16});
  ASSERT_TRUE(dev.ok());
  // A host tensor for a GPU kernel is refused before launch.
  const KernelArg wrong[] = {KernelArg::tensor(*host), KernelArg::tensor(*dev), KernelArg::tensor(*dev),
                             KernelArg::i32(16),       KernelArg::i32(16),      KernelArg::i32(16)};
  Status s = ex.launch(*h, wrong, {1, 1}, {16, 16});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("device memory on cuda:0"), std::string::npos) << s.message();
  EXPECT_TRUE(ex.release(*dev).ok());
}

TEST(CudaLaunch, SecondLoadIsACacheHit) {
  KernelExecutor ex(shared_cache());
  SKIP_WITHOUT_GPU(ex);
  const std::string src = test::kernel_source("vector_add.cu");
  auto a = ex.load(src, "vector_add", "cuda:0");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  auto b = ex.load(src, "vector_add", "cuda:0");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(ex.info(*b)->cache_hit);
  EXPECT_NE(ex.info(*b)->target.find("sm_"), std::string::npos);
}

// A kernel that writes through a wild pointer: the error comes back clearly, the device is marked lost
// (later calls say so instead of crashing), and the CPU device keeps working. Run last in its process.
TEST(CudaLaunch, FaultingKernelFailsClearly) {
  KernelExecutor ex(shared_cache());
  SKIP_WITHOUT_GPU(ex);
  auto h = ex.load(test::kernel_source("fault.cu"), "fault", "cuda:0");
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  auto y = ex.allocate("cuda:0", DType::kFloat32, {4});
  ASSERT_TRUE(y.ok());
  const KernelArg args[] = {KernelArg::tensor(*y)};
  Status launched = ex.launch(*h, args, {1}, {32});
  Status synced = launched.ok() ? ex.synchronize("cuda:0") : launched;
  ASSERT_FALSE(synced.ok());
  EXPECT_EQ(synced.code(), StatusCode::kFailedPrecondition) << synced.to_string();
  EXPECT_NE(synced.message().find("CUDA_ERROR"), std::string::npos) << synced.message();
  Status after = ex.launch(*h, args, {1}, {32});
  EXPECT_EQ(after.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(after.message().find("lost"), std::string::npos) << after.message();
  // The CPU device is unaffected.
  auto cpu = ex.load("void one(const gantry_kernel_ctx* c, int* o) { (void)c; o[0] = 5; }", "one", "cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  auto out = Tensor::allocate(DType::kInt32, {1});
  const KernelArg cargs[] = {KernelArg::tensor(*out)};
  ASSERT_TRUE(ex.launch(*cpu, cargs, {1}, {1}).ok());
  EXPECT_EQ(out->values<int32_t>()[0], 5);
}

}  // namespace
}  // namespace gantry::kernels

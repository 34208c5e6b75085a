// `gantry kernel run|info|compile`: a real CPU kernel run end to end on .npy files, CUDA compiles to
// PTX/cubin without a GPU (where NVRTC exists), and clear errors for compile errors, wrong arguments and
// a missing GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "cli/cli_run.h"
#include "core/temp_dir.h"
#include "gantry/core/file_io.h"
#include "gantry/core/npy.h"

namespace {

namespace fs = std::filesystem;
using gantry::testing::run_gantry;

const fs::path kData = fs::path(GANTRY_SOURCE_DIR) / "tests/kernels/data";

// Writes `values` as a 1-D f32 .npy file; false when that fails.
bool write_f32_npy(const fs::path& path, const std::vector<float>& values) {
  const auto n = static_cast<int64_t>(values.size());
  auto t = gantry::Tensor::from_values(gantry::DType::kFloat32, {n}, values);
  return t.ok() && gantry::write_npy(path, *t).ok();
}

class KernelCli : public ::testing::Test {
 protected:
  // The kernel tests' shared cache: each kernel compiles once per build tree.
  std::vector<std::string> env() const {
    return {"GANTRY_KERNEL_CACHE=" + std::string(GANTRY_BINARY_DIR) + "/test-kernel-cache",
            "GANTRY_LOG_LEVEL=warn"};
  }
  gantry::testing::CliResult gantry(const std::vector<std::string>& args) const {
    return run_gantry(args, std::chrono::seconds(60), env());
  }
  static bool nvrtc_present() {
    for (const char* p :
         {"/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.13"})
      if (fs::exists(p)) return true;
    return false;
  }
  gantry::test_util::TempDir dir_;
};

TEST_F(KernelCli, RunsACpuKernelOnNpyFiles) {
  const int n = 1000;
  std::vector<float> a(n), b(n);
  for (int i = 0; i < n; ++i) {
    a[i] = 0.5f * i;
    b[i] = 3.f - i;
  }
  ASSERT_TRUE(write_f32_npy(dir_.path() / "a.npy", a));
  ASSERT_TRUE(write_f32_npy(dir_.path() / "b.npy", b));
  const fs::path c = dir_.path() / "c.npy";
  auto r = gantry({"kernel", "run", (kData / "vector_add.cpp").string(), "--entry", "vector_add", "--grid",
                   "8", "--block", "128", "--arg", "in:" + (dir_.path() / "a.npy").string(), "--arg",
                   "in:" + (dir_.path() / "b.npy").string(), "--arg", "out:" + c.string() + ":f32:[1000]",
                   "--arg", "i32:1000"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("ran vector_add on cpu"), std::string::npos) << r.out;
  auto got = gantry::read_npy(c);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->element_count(), n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(got->values<float>()[i], a[i] + b[i]) << i;

  // SAXPY in place (inout) with a scalar: y = 2 * a + y.
  ASSERT_TRUE(write_f32_npy(dir_.path() / "y.npy", b));
  r = gantry({"kernel", "run", (kData / "saxpy.cpp").string(), "--entry", "saxpy", "--grid", "4", "--block",
              "256", "--arg", "f32:2.0", "--arg", "in:" + (dir_.path() / "a.npy").string(), "--arg",
              "inout:" + (dir_.path() / "y.npy").string(), "--arg", "i64:1000", "--device", "cpu"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto y = gantry::read_npy(dir_.path() / "y.npy");
  ASSERT_TRUE(y.ok());
  for (int i = 0; i < n; ++i) ASSERT_EQ(y->values<float>()[i], 2.f * a[i] + b[i]) << i;
}

TEST_F(KernelCli, WrongArgumentsAreRefusedBeforeLaunch) {
  const fs::path c = dir_.path() / "c.npy";
  ASSERT_TRUE(gantry::write_npy(
                  dir_.path() / "a.npy",
                  *gantry::Tensor::from_values(gantry::DType::kFloat64, {4}, std::vector<double>{1, 2, 3, 4}))
                  .ok());
  const std::string a = "in:" + (dir_.path() / "a.npy").string();
  auto r = gantry({"kernel", "run", (kData / "vector_add.cpp").string(), "--entry", "vector_add", "--arg", a,
                   "--arg", a, "--arg", "out:" + c.string() + ":f32:[4]", "--arg", "i32:4"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("expects a f32 tensor"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(c)) << "nothing may run or be written";
  r = gantry(
      {"kernel", "run", (kData / "vector_add.cpp").string(), "--entry", "vector_add", "--arg", "f32:1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("takes 4 argument(s)"), std::string::npos) << r.err;
  r = gantry(
      {"kernel", "run", (kData / "vector_add.cpp").string(), "--entry", "vector_add", "--arg", "float:1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--arg float:1"), std::string::npos) << r.err;
  r = gantry({"kernel", "run", (kData / "vector_add.cpp").string(), "--entry", "vector_add", "--grid", "0"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
}

TEST_F(KernelCli, CompileErrorShowsTheCompilerLogWithTheLine) {
  auto r = gantry({"kernel", "run", (kData / "broken.cpp").string(), "--entry", "broken", "--arg",
                   "out:" + (dir_.path() / "y.npy").string() + ":f32:[1]"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("broken.cpp:4:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("undeclared_value"), std::string::npos) << r.err;
}

TEST_F(KernelCli, InfoShowsTheCacheHit) {
  const std::vector<std::string> args = {"kernel", "info", (kData / "matmul.cpp").string(), "--entry",
                                         "matmul_tiled"};
  auto first = gantry(args);
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  auto second = gantry(args);
  ASSERT_EQ(second.exit_code, 0) << second.describe();
  EXPECT_NE(second.out.find("compile:      cache hit"), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("matmul_tiled(const f32* A, const f32* B, f32* C, i32 M, i32 N, i32 K)"),
            std::string::npos)
      << second.out;
  EXPECT_NE(second.out.find("max threads:  1024"), std::string::npos) << second.out;
}

TEST_F(KernelCli, CompilesCudaToPtxAndCubinWithoutAGpu) {
  if (!nvrtc_present())
    GTEST_SKIP() << "no libnvrtc.so.13 under /usr/local/cuda: CUDA compiles cannot run here";
  const fs::path ptx = dir_.path() / "vector_add.ptx";
  auto r = gantry({"kernel", "compile", (kData / "vector_add.cu").string(), "--entry", "vector_add", "--arch",
                   "sm_90", "-o", ptx.string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto text = gantry::read_file(ptx);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find(".target sm_90"), std::string::npos);
  EXPECT_NE(text->find(".entry vector_add("), std::string::npos);
  const fs::path cubin = dir_.path() / "saxpy.cubin";
  r = gantry({"kernel", "compile", (kData / "saxpy.cu").string(), "--entry", "saxpy", "--arch", "sm_90a",
              "-o", cubin.string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto bin = gantry::read_file(cubin);
  ASSERT_TRUE(bin.ok());
  EXPECT_EQ(bin->substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_NE(bin->find("saxpy"), std::string::npos);
  // The compile error names the line.
  r = gantry({"kernel", "compile", (kData / "broken.cu").string(), "--entry", "broken", "--arch", "sm_90",
              "-o", (dir_.path() / "b.ptx").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("broken.cu(4)"), std::string::npos) << r.err;
  r = gantry({"kernel", "compile", (kData / "saxpy.cu").string(), "--entry", "saxpy", "--arch", "sm_90", "-o",
              (dir_.path() / "x.bin").string()});
  EXPECT_EQ(r.exit_code, 2);
}

TEST_F(KernelCli, CudaRunWithoutAGpuSaysWhy) {
  if (fs::exists("/dev/nvidia0")) GTEST_SKIP() << "a GPU is present";
  auto r = gantry(
      {"kernel", "run", (kData / "vector_add.cu").string(), "--entry", "vector_add", "--arg", "i32:1"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(r.err.find("libcuda.so.1") != std::string::npos ||
              r.err.find("libnvrtc") != std::string::npos || r.err.find("cuInit") != std::string::npos)
      << r.err;
  if (nvrtc_present()) {  // info still tells what NVRTC knows
    auto info = gantry({"kernel", "info", (kData / "vector_add.cu").string(), "--entry", "vector_add"});
    EXPECT_EQ(info.exit_code, 0) << info.describe();
    EXPECT_NE(info.out.find("sm_90a"), std::string::npos) << info.out;
    EXPECT_NE(info.out.find("need the GPU"), std::string::npos) << info.out;
  }
}

}  // namespace

// The CUDA glue without a GPU: tests/kernels/data/fake_libcuda.c stands in for libcuda.so.1 (host memory as
// device memory, vector_add carried out from the cuLaunchKernel parameter array it receives, `fault` leaving
// CUDA_ERROR_ILLEGAL_ADDRESS). Proves driver loading, arch sm_90a from the driver, the VMM pool, cubin
// loading and symbol lookup, argument marshalling, copies, and the clear error after a fault.
class FakeDriverCli : public KernelCli {
 protected:
  void SetUp() override {
    if (!nvrtc_present()) GTEST_SKIP() << "no libnvrtc.so.13: the CUDA path cannot compile here";
    if (fs::exists("/dev/nvidia0")) GTEST_SKIP() << "a real GPU is present: CudaLaunch.* covers it";
    const fs::path lib = dir_.path() / "libcuda.so.1";
    const std::string cmd =
        "cc -O1 -fPIC -shared -o " + lib.string() + " " + (kData / "fake_libcuda.c").string();
    ASSERT_EQ(std::system(cmd.c_str()), 0) << "could not build the fake driver (cc from build-essential)";
  }
  gantry::testing::CliResult gantry_fake(const std::vector<std::string>& args) const {
    auto e = env();
    e.push_back("LD_LIBRARY_PATH=" + dir_.path().string());
    return run_gantry(args, std::chrono::seconds(60), e);
  }
};

TEST_F(FakeDriverCli, RunsACudaKernelThroughTheDriverApi) {
  const int n = 300;
  std::vector<float> a(n), b(n);
  for (int i = 0; i < n; ++i) {
    a[i] = 1.5f * i;
    b[i] = 100.f - i;
  }
  ASSERT_TRUE(write_f32_npy(dir_.path() / "a.npy", a));
  ASSERT_TRUE(write_f32_npy(dir_.path() / "b.npy", b));
  const fs::path c = dir_.path() / "c.npy";
  auto r = gantry_fake({"kernel", "run", (kData / "vector_add.cu").string(), "--entry", "vector_add",
                        "--grid", "3", "--block", "128", "--arg", "in:" + (dir_.path() / "a.npy").string(),
                        "--arg", "in:" + (dir_.path() / "b.npy").string(), "--arg",
                        "out:" + c.string() + ":f32:[300]", "--arg", "i32:300"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("ran vector_add on cuda:0"), std::string::npos) << r.out;
  auto got = gantry::read_npy(c);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  for (int i = 0; i < n; ++i) ASSERT_EQ(got->values<float>()[i], a[i] + b[i]) << i;

  auto info = gantry_fake({"kernel", "info", (kData / "vector_add.cu").string(), "--entry", "vector_add"});
  ASSERT_EQ(info.exit_code, 0) << info.describe();
  EXPECT_NE(info.out.find("target:       sm_90a"), std::string::npos) << info.out;  // from the driver's 9.0
  EXPECT_NE(info.out.find("registers:    16 per thread"), std::string::npos) << info.out;
  // From the driver's occupancy calculator (the stand-in answers 640).
  EXPECT_NE(info.out.find("preferred:    640 threads per block"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("compile:      cache hit"), std::string::npos) << info.out;  // compiled by run

  // Scalars (f32, i64) and an in-place tensor through the parameter array: y = -0.5 * a + b.
  ASSERT_TRUE(write_f32_npy(dir_.path() / "y.npy", b));
  r = gantry_fake({"kernel", "run", (kData / "saxpy.cu").string(), "--entry", "saxpy", "--grid", "2",
                   "--block", "256", "--arg", "f32:-0.5", "--arg", "in:" + (dir_.path() / "a.npy").string(),
                   "--arg", "inout:" + (dir_.path() / "y.npy").string(), "--arg", "i64:300"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto y = gantry::read_npy(dir_.path() / "y.npy");
  ASSERT_TRUE(y.ok());
  for (int i = 0; i < n; ++i) ASSERT_EQ(y->values<float>()[i], -0.5f * a[i] + b[i]) << i;

  // A host-side type error is still caught before the driver sees anything.
  r = gantry_fake({"kernel", "run", (kData / "vector_add.cu").string(), "--entry", "vector_add", "--arg",
                   "in:" + (dir_.path() / "a.npy").string(), "--arg",
                   "in:" + (dir_.path() / "b.npy").string(), "--arg", "out:" + c.string() + ":f32:[300]",
                   "--arg", "f32:300"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("expects a i32 scalar"), std::string::npos) << r.err;
}

TEST_F(FakeDriverCli, AFaultingKernelFailsClearly) {
  auto r = gantry_fake({"kernel", "run", (kData / "fault.cu").string(), "--entry", "fault", "--grid", "1",
                        "--block", "32", "--arg", "out:" + (dir_.path() / "y.npy").string() + ":f32:[4]"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(r.signal, 0);
  EXPECT_NE(r.err.find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("context of this device is lost"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_.path() / "y.npy"));
}

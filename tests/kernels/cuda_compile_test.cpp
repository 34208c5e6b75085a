// CUDA kernels compiled by NVRTC: needs the toolkit's libnvrtc.so.13 (CI has it), no GPU. Skips with the
// reason where NVRTC is absent.
#include <gtest/gtest.h>

#include "core/temp_dir.h"
#include "gantry/hw/registry_json.h"
#include "kernels/kernel_test_util.h"

namespace gantry::kernels {
namespace {

using test::kernel_source;

#define SKIP_WITHOUT_NVRTC()                                                       \
  do {                                                                             \
    if (auto v = nvrtc_version(); !v.ok()) GTEST_SKIP() << v.status().to_string(); \
  } while (0)

CudaCompileOptions options(CudaOutput output, const std::string& name, const std::filesystem::path& cache) {
  CudaCompileOptions o;
  o.output = output;
  o.source_name = name;
  o.cache_dir = cache;
  return o;
}

TEST(CudaCompile, ArchComesFromTheRegistry) {
  auto text = read_file(test::data_dir() / "h100-gantry-detect.json");
  ASSERT_TRUE(text.ok());
  auto reg = hw::registry_from_json_text(*text);
  ASSERT_TRUE(reg.ok()) << reg.status().to_string();
  const hw::Device* gpu = nullptr;
  for (const auto& d : reg->devices)
    if (d.id == "cuda:0") gpu = &d;
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(cuda_arch_for(*gpu).value(), "sm_90a");  // Hopper: the arch-specific target
  hw::Device ampere = *gpu;
  ampere.compute_capability = "8.6";
  EXPECT_EQ(cuda_arch_for(ampere).value(), "sm_86");
  ampere.compute_capability = "12.0";
  EXPECT_EQ(cuda_arch_for(ampere).value(), "sm_120");
  ampere.compute_capability.reset();
  EXPECT_EQ(cuda_arch_for(ampere).status().code(), StatusCode::kInvalidArgument);
  ampere.compute_capability = "nine";
  EXPECT_FALSE(cuda_arch_for(ampere).ok());
}

TEST(CudaCompile, AllTestKernelsToPtxAndCubin) {
  SKIP_WITHOUT_NVRTC();
  const std::pair<const char*, const char*> kernels[] = {{"vector_add", "vector_add"},
                                                         {"saxpy", "saxpy"},
                                                         {"softmax", "softmax_rows"},
                                                         {"matmul", "matmul_tiled"}};
  for (auto [file, entry] : kernels) {
    const std::string src = kernel_source(std::string(file) + ".cu");
    auto cubin = compile_cuda(
        src, entry, options(CudaOutput::kCubin, std::string(file) + ".cu", test::shared_cache_dir()));
    ASSERT_TRUE(cubin.ok()) << cubin.status().to_string();
    EXPECT_EQ(cubin->binary.substr(0, 4),
              "\x7f"
              "ELF")
        << file;
    EXPECT_NE(cubin->binary.find(entry), std::string::npos) << file;  // the symbol
    EXPECT_EQ(cubin->lowered_name, entry);                            // extern "C"
    EXPECT_EQ(cubin->arch, "sm_90a");
    EXPECT_EQ(cubin->compiler.rfind("NVRTC 13.", 0), 0u) << cubin->compiler;
    EXPECT_TRUE(parse_signature(src, entry).ok()) << file;
  }
  const std::string src = kernel_source("vector_add.cu");
  auto ptx =
      compile_cuda(src, "vector_add", options(CudaOutput::kPtx, "vector_add.cu", test::shared_cache_dir()));
  ASSERT_TRUE(ptx.ok()) << ptx.status().to_string();
  EXPECT_NE(ptx->binary.find(".target sm_90a"), std::string::npos) << ptx->binary.substr(0, 400);
  EXPECT_NE(ptx->binary.find(".entry vector_add("), std::string::npos);
  EXPECT_EQ(ptx->arch, "compute_90a");
}

TEST(CudaCompile, CompileErrorCarriesTheLogWithTheLine) {
  SKIP_WITHOUT_NVRTC();
  test_util::TempDir dir;
  auto r = compile_cuda(kernel_source("broken.cu"), "broken",
                        options(CudaOutput::kCubin, "broken.cu", dir.path()));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("broken.cu(4)"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("undeclared_value"), std::string::npos) << r.status().message();
  EXPECT_FALSE(std::filesystem::exists(dir.path()) && !std::filesystem::is_empty(dir.path()))
      << "a failed compile must cache nothing";
}

TEST(CudaCompile, BadArchAndMissingEntryAreClear) {
  SKIP_WITHOUT_NVRTC();
  test_util::TempDir dir;
  auto o = options(CudaOutput::kCubin, "vector_add.cu", dir.path());
  o.arch = "sm_9x";
  EXPECT_EQ(compile_cuda(kernel_source("vector_add.cu"), "vector_add", o).status().code(),
            StatusCode::kInvalidArgument);
  o.arch = "compute_90";
  auto virt = compile_cuda(kernel_source("vector_add.cu"), "vector_add", o);
  ASSERT_FALSE(virt.ok());
  EXPECT_NE(virt.status().message().find("PTX"), std::string::npos) << virt.status().message();
}

TEST(CudaCompile, SecondCompileIsACacheHitAndACorruptEntryIsRecompiled) {
  SKIP_WITHOUT_NVRTC();
  test_util::TempDir dir;
  const std::string src = "extern \"C\" __global__ void empty_kernel() {}\n";
  auto o = options(CudaOutput::kCubin, "empty.cu", dir.path());
  o.arch = "sm_90";
  auto first = compile_cuda(src, "empty_kernel", o);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_FALSE(first->cache_hit);
  EXPECT_GT(first->compile_ms, 0);
  auto second = compile_cuda(src, "empty_kernel", o);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->cache_hit);
  EXPECT_EQ(second->binary, first->binary);
  EXPECT_EQ(second->lowered_name, "empty_kernel");

  // Flip one byte of the entry's payload: the checksum catches it and the kernel is compiled again.
  std::vector<std::filesystem::path> entries;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) entries.push_back(e.path());
  ASSERT_EQ(entries.size(), 1u);
  auto bytes = read_file(entries[0]);
  ASSERT_TRUE(bytes.ok());
  std::string damaged = *bytes;
  damaged[damaged.size() / 2] ^= 0x5a;
  ASSERT_TRUE(write_file(entries[0], damaged).ok());
  auto third = compile_cuda(src, "empty_kernel", o);
  ASSERT_TRUE(third.ok()) << third.status().to_string();
  EXPECT_FALSE(third->cache_hit);
  EXPECT_EQ(third->binary, first->binary);
  // Truncated too.
  ASSERT_TRUE(write_file(entries[0], bytes->substr(0, 20)).ok());
  EXPECT_FALSE(compile_cuda(src, "empty_kernel", o)->cache_hit);
  EXPECT_TRUE(compile_cuda(src, "empty_kernel", o)->cache_hit);  // and rewritten
}

TEST(CudaDevice, LoadWithoutADriverSaysWhy) {
  KernelExecutor ex;
  if (ex.available("cuda:0").ok()) GTEST_SKIP() << "a GPU is present: cuda_launch_test covers it";
  Status s = ex.available("cuda:0");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.to_string();
  EXPECT_TRUE(s.message().find("libcuda.so.1") != std::string::npos ||
              s.message().find("libnvrtc.so.13") != std::string::npos ||
              s.message().find("cuInit") != std::string::npos || s.message().find("GPU") != std::string::npos)
      << s.message();
  auto h = ex.load(kernel_source("vector_add.cu"), "vector_add", "cuda:0");
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(ex.allocate("cuda:0", DType::kFloat32, {4}).ok());
  EXPECT_EQ(ex.load("", "k", "tpu:0").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gantry::kernels

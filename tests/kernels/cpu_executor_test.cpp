// The CPU device: real kernels compiled by the system compiler, checked against references; compile
// errors, argument checks, the cache.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/temp_dir.h"
#include "kernels/kernel_test_util.h"

namespace gantry::kernels {
namespace {

using test::kernel_source;
using test::shared_cache_dir;

ExecutorOptions shared_cache() {
  ExecutorOptions o;
  o.cache_dir = shared_cache_dir();
  o.cpu_threads = 4;
  return o;
}

TEST(CpuKernels, ReferenceSuite) {
  KernelExecutor ex(shared_cache());
  ASSERT_TRUE(ex.available("cpu").ok()) << ex.available("cpu").to_string();
  test::run_reference_suite(ex, "cpu", ".cpp");
}

TEST(CpuKernels, PlainCCompiledByCc) {
  KernelExecutor ex(shared_cache());
  KernelOptions o;
  o.source_name = "saxpy.c";
  auto h = ex.load(kernel_source("saxpy.cpp"), "saxpy", "cpu", o);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  auto x = Tensor::from_values(DType::kFloat32, {3}, std::vector<float>{1, 2, 3});
  auto y = Tensor::from_values(DType::kFloat32, {3}, std::vector<float>{10, 20, 30});
  const KernelArg args[] = {KernelArg::f32(-2.f), KernelArg::tensor(*x), KernelArg::tensor(*y),
                            KernelArg::i64(3)};
  ASSERT_TRUE(ex.launch(*h, args, {1}, {32}).ok());
  EXPECT_EQ(y->values<float>()[0], 8.f);
  EXPECT_EQ(y->values<float>()[2], 24.f);
  auto info = ex.info(*h);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->signature.to_string(), "saxpy(f32 alpha, const f32* x, f32* y, i64 n)");
}

TEST(CpuKernels, GridBlocksAndThreadsAreAllVisited) {
  // Every (block, thread) writes its own slot once: a 3-D grid of 3-D blocks on several workers.
  const char* src = R"(
void ids(const gantry_kernel_ctx* ctx, uint32_t* out) {
  GANTRY_FOR_EACH_THREAD(ctx, t) {
    uint32_t block = (ctx->block_idx.z * ctx->grid_dim.y + ctx->block_idx.y) * ctx->grid_dim.x + ctx->block_idx.x;
    uint32_t thread = (t.z * ctx->block_dim.y + t.y) * ctx->block_dim.x + t.x;
    uint32_t per = ctx->block_dim.x * ctx->block_dim.y * ctx->block_dim.z;
    out[block * per + thread] += block * 1000 + thread + 1;
  }
})";
  KernelExecutor ex(shared_cache());
  auto h = ex.load(src, "ids", "cpu");
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  const Dim3 grid{3, 2, 2}, block{4, 2, 3};
  auto out = Tensor::allocate(DType::kUInt32, {static_cast<int64_t>(grid.count() * block.count())});
  const KernelArg args[] = {KernelArg::tensor(*out)};
  ASSERT_TRUE(ex.launch(*h, args, grid, block).ok());
  auto v = out->values<uint32_t>();
  for (uint32_t b = 0; b < grid.count(); ++b)
    for (uint32_t t = 0; t < block.count(); ++t) ASSERT_EQ(v[b * block.count() + t], b * 1000 + t + 1);
}

TEST(CpuKernels, CompileErrorCarriesTheLogWithTheLine) {
  KernelExecutor ex(shared_cache());
  KernelOptions o;
  o.source_name = "broken.cpp";
  auto h = ex.load(kernel_source("broken.cpp"), "broken", "cpu", o);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument);
  const std::string& m = h.status().message();
  EXPECT_NE(m.find("broken.cpp:4:"), std::string::npos) << m;  // the user's line, not the prelude's
  EXPECT_NE(m.find("undeclared_value"), std::string::npos) << m;
}

TEST(CpuKernels, WrongArgumentsAreRefusedBeforeLaunch) {
  KernelExecutor ex(shared_cache());
  KernelOptions o;
  o.source_name = "vector_add.cpp";
  auto h = ex.load(kernel_source("vector_add.cpp"), "vector_add", "cpu", o);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  auto a = Tensor::from_values(DType::kFloat32, {4}, std::vector<float>{1, 2, 3, 4});
  auto c = Tensor::from_values(DType::kFloat32, {4}, std::vector<float>{7, 7, 7, 7});
  auto d = Tensor::from_values(DType::kFloat64, {4}, std::vector<double>{1, 2, 3, 4});
  auto expect_refused = [&](std::vector<KernelArg> args, const std::string& needle, Dim3 grid = {1},
                            Dim3 block = {4}) {
    Status s = ex.launch(*h, args, grid, block);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_EQ(c->values<float>()[0], 7.f) << "nothing may run: " << needle;
  };
  auto T = [](ConstTensorView t) { return KernelArg::tensor(t); };
  expect_refused({T(*a), T(*a), T(*c)}, "takes 4 argument(s)");
  expect_refused({T(*a), T(*a), T(*c), KernelArg::i32(4), KernelArg::i32(1)}, "got 5");
  expect_refused({T(*a), T(*a), T(*c), KernelArg::i64(4)}, "argument 4 (n): expects a i32 scalar");
  expect_refused({T(*a), T(*a), T(*c), KernelArg::f32(4)}, "expects a i32 scalar");
  expect_refused({T(*a), T(*d), T(*c), KernelArg::i32(4)}, "argument 2 (b): expects a f32 tensor");
  expect_refused({KernelArg::f32(1), T(*a), T(*c), KernelArg::i32(4)}, "argument 1 (a): expects a tensor");
  expect_refused({T(*a), T(*a), T(*c), KernelArg::i32(4)}, "must have every dimension >= 1", Dim3{0},
                 Dim3{4});
  expect_refused({T(*a), T(*a), T(*c), KernelArg::i32(4)}, "exceeds this kernel's limit", Dim3{1},
                 Dim3{2048});
  expect_refused({T(*a), T(*a), T(*c), KernelArg::i32(4), KernelArg::local_memory(1ull << 40)},
                 "exceed the CPU device's limit");
  // A device tensor for a CPU kernel.
  float fake[4];
  auto dev = ConstTensorView::over(DType::kFloat32, {4}, fake, sizeof fake, MemoryClass::kDevice, 0);
  expect_refused({T(*a), T(*dev), T(*c), KernelArg::i32(4)}, "needs host memory");
  // And the right call runs.
  const KernelArg ok[] = {T(*a), T(*a), T(*c), KernelArg::i32(4)};
  ASSERT_TRUE(ex.launch(*h, ok, {1}, {4}).ok());
  EXPECT_EQ(c->values<float>()[3], 8.f);
}

// allocate() lends host memory the executor owns until release(); copy_to_host() gives an owning copy.
TEST(CpuKernels, AllocatedTensorsAreLentByTheExecutor) {
  KernelExecutor ex(shared_cache());
  auto t = ex.allocate("cpu", DType::kInt32, {3});
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->memory_class(), MemoryClass::kHost);
  for (int32_t v : t->values<int32_t>()) EXPECT_EQ(v, 0);
  t->values<int32_t>()[1] = 7;
  auto host = ex.copy_to_host(*t);
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  EXPECT_NE(host->data(), t->data());
  EXPECT_EQ(host->values<int32_t>()[1], 7);
  EXPECT_TRUE(ex.release(*t).ok());
  EXPECT_EQ(host->values<int32_t>()[1], 7) << "the copy owns its bytes";
}

TEST(CpuKernels, MissingEntryAndMissingContextAreClear) {
  KernelExecutor ex(shared_cache());
  auto h = ex.load(kernel_source("vector_add.cpp"), "vector_sub", "cpu");
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kNotFound);
  EXPECT_NE(h.status().message().find("vector_sub"), std::string::npos);
  auto no_ctx = ex.load("void k(float* y) { y[0] = 1; }", "k", "cpu");
  ASSERT_FALSE(no_ctx.ok());
  EXPECT_NE(no_ctx.status().message().find("gantry_kernel_ctx"), std::string::npos)
      << no_ctx.status().message();
}

TEST(CpuKernels, SecondLoadIsACacheHitAndACorruptEntryIsRebuilt) {
  test_util::TempDir dir;
  ExecutorOptions o;
  o.cache_dir = dir.path() / "cache";
  KernelExecutor ex(o);
  const std::string src = "void one(const gantry_kernel_ctx* ctx, int* out) { (void)ctx; out[0] = 41 + 1; }";
  auto first = ex.load(src, "one", "cpu");
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  auto i1 = ex.info(*first);
  EXPECT_FALSE(i1->cache_hit);
  EXPECT_GT(i1->compile_ms, 0);
  EXPECT_GT(i1->binary_bytes, 0u);
  EXPECT_EQ(i1->max_threads_per_block, 1024);
  EXPECT_EQ(i1->preferred_block_size, 256);
  ASSERT_TRUE(std::filesystem::exists(i1->cache_file));

  KernelExecutor fresh(o);  // another process, as far as the cache can tell
  auto second = fresh.load(src, "one", "cpu");
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(fresh.info(*second)->cache_hit);
  EXPECT_EQ(fresh.info(*second)->compile_ms, 0);

  // Other flags are another entry.
  KernelOptions flags;
  flags.flags = {"-DUNUSED=1"};
  auto third = fresh.load(src, "one", "cpu", flags);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(fresh.info(*third)->cache_hit);

  // Corrupt the cached shared object: the next load notices (checksum) and compiles again.
  ASSERT_TRUE(fresh.unload(*second).ok());
  ASSERT_TRUE(ex.unload(*first).ok());
  ASSERT_TRUE(write_file(i1->cache_file, "not an ELF file").ok());
  KernelExecutor third_ex(o);
  auto rebuilt = third_ex.load(src, "one", "cpu");
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().to_string();
  EXPECT_FALSE(third_ex.info(*rebuilt)->cache_hit);
  auto out = Tensor::allocate(DType::kInt32, {1});
  const KernelArg args[] = {KernelArg::tensor(*out)};
  ASSERT_TRUE(third_ex.launch(*rebuilt, args, {1}, {1}).ok());
  EXPECT_EQ(out->values<int32_t>()[0], 42);
  // Unloaded handles are gone.
  EXPECT_EQ(third_ex.unload(*rebuilt).code(), StatusCode::kOk);
  EXPECT_EQ(third_ex.launch(*rebuilt, args, {1}, {1}).code(), StatusCode::kNotFound);
}

TEST(CpuKernels, NoCompilerMeansUnavailableWithTheReason) {
  const std::string saved = std::getenv("PATH") ? std::getenv("PATH") : "";
  test_util::TempDir empty;
  ::setenv("PATH", empty.path().c_str(), 1);
  KernelExecutor ex(shared_cache());
  Status s = ex.available("cpu");
  auto h = ex.load(kernel_source("vector_add.cpp"), "vector_add", "cpu");
  ::setenv("PATH", saved.c_str(), 1);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("compiler"), std::string::npos) << s.message();
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(h.status().message().find("c++"), std::string::npos) << h.status().message();
}

// ferrum's 8- and 16-bit scalars: each reaches the kernel with its exact value and width, and a scalar of
// another width is refused before the launch.
TEST(CpuKernels, EightAndSixteenBitScalarsArePassedExactly) {
  const char* src = R"(
void small(const gantry_kernel_ctx* ctx, int8_t a, unsigned char b, short c, uint16_t d, int32_t* out) {
  (void)ctx;
  out[0] = a; out[1] = b; out[2] = c; out[3] = d;
})";
  KernelExecutor ex(shared_cache());
  auto h = ex.load(src, "small", "cpu");
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(ex.info(*h)->signature.to_string(), "small(i8 a, u8 b, i16 c, u16 d, i32* out)");
  auto out = Tensor::allocate(DType::kInt32, {4});
  ASSERT_TRUE(out.ok());
  const KernelArg args[] = {KernelArg::i8(-128), KernelArg::u8(250), KernelArg::i16(-30000),
                            KernelArg::u16(60000), KernelArg::tensor(*out)};
  ASSERT_TRUE(ex.launch(*h, args, {1}, {1}).ok());
  EXPECT_EQ(out->values<int32_t>()[0], -128);
  EXPECT_EQ(out->values<int32_t>()[1], 250);
  EXPECT_EQ(out->values<int32_t>()[2], -30000);
  EXPECT_EQ(out->values<int32_t>()[3], 60000);

  const KernelArg wider[] = {KernelArg::i32(1), KernelArg::u8(2), KernelArg::i16(3), KernelArg::u16(4),
                             KernelArg::tensor(*out)};
  Status s = ex.launch(*h, wider, {1}, {1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("argument 1 (a): expects a i8 scalar"), std::string::npos) << s.message();
  EXPECT_EQ(out->values<int32_t>()[0], -128);  // nothing ran
}

// ferrum's Buffer{ptr, size}: raw bytes for a void* parameter, or for a typed one when the size is a
// whole number of its elements.
TEST(CpuKernels, BuffersArePointerArgumentsWithTheirSize) {
  const char* src = R"(
void fill(const gantry_kernel_ctx* ctx, void* raw, float* f, uint64_t bytes) {
  (void)ctx;
  for (uint64_t i = 0; i < bytes; ++i) ((unsigned char*)raw)[i] = (unsigned char)(i + 1);
  f[0] = 1.5f; f[1] = -2.f;
})";
  KernelExecutor ex(shared_cache());
  auto h = ex.load(src, "fill", "cpu");
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  unsigned char raw[10] = {};
  float floats[2] = {};
  const KernelArg args[] = {KernelArg::buffer(raw, sizeof raw), KernelArg::buffer(floats, sizeof floats),
                            KernelArg::u64(sizeof raw)};
  ASSERT_TRUE(ex.launch(*h, args, {1}, {1}).ok());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(raw[i], i + 1) << i;
  EXPECT_EQ(floats[0], 1.5f);
  EXPECT_EQ(floats[1], -2.f);
  EXPECT_EQ(args[0].describe(), "buffer of 10 B on host");

  // 10 bytes are not whole floats; a null buffer of some size has no data: refused, nothing runs.
  raw[0] = 0;
  const KernelArg ragged[] = {KernelArg::buffer(raw, 4), KernelArg::buffer(raw, 10), KernelArg::u64(1)};
  Status s = ex.launch(*h, ragged, {1}, {1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("expects whole f32 elements (4 B each"), std::string::npos) << s.message();
  const KernelArg null[] = {KernelArg::buffer(nullptr, 16), KernelArg::buffer(floats, 8), KernelArg::u64(1)};
  s = ex.launch(*h, null, {1}, {1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("the buffer has no data"), std::string::npos) << s.message();
  EXPECT_EQ(null[0].describe(), "buffer of 16 B at null");
  EXPECT_EQ(raw[0], 0);
}

TEST(KernelArgs, ParseScalarsAndDims) {
  auto f = KernelArg::parse_scalar("f32:2.5");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->scalar_type(), ScalarType::kF32);
  EXPECT_EQ(f->describe(), "f32 2.500000");
  EXPECT_EQ(KernelArg::parse_scalar("i64:-7")->describe(), "i64 -7");
  EXPECT_EQ(KernelArg::parse_scalar("bool:true")->describe(), "bool true");
  EXPECT_FALSE(KernelArg::parse_scalar("i32:1.5").ok());
  EXPECT_FALSE(KernelArg::parse_scalar("u32:-1").ok());
  EXPECT_EQ(KernelArg::parse_scalar("i8:-128")->describe(), "i8 -128");
  EXPECT_EQ(KernelArg::parse_scalar("u8:255")->describe(), "u8 255");
  EXPECT_EQ(KernelArg::parse_scalar("i16:-32768")->describe(), "i16 -32768");
  EXPECT_EQ(KernelArg::parse_scalar("u16:65535")->describe(), "u16 65535");
  EXPECT_EQ(KernelArg::parse_scalar("u8:7")->scalar_type(), ScalarType::kU8);
  for (const char* out_of_range : {"i8:128", "u8:256", "u8:-1", "i16:32768", "u16:65536"})
    EXPECT_FALSE(KernelArg::parse_scalar(out_of_range).ok()) << out_of_range;
  EXPECT_FALSE(KernelArg::parse_scalar("f16:1").ok());
  EXPECT_FALSE(KernelArg::parse_scalar("2.0").ok());
  auto d = parse_dim3("16,8");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->to_string(), "16,8,1");
  EXPECT_FALSE(parse_dim3("0").ok());
  EXPECT_FALSE(parse_dim3("1,2,3,4").ok());
  EXPECT_FALSE(parse_dim3("x").ok());
}

}  // namespace
}  // namespace gantry::kernels

// One memory pool per CUDA device, charged to that device's budget per model: run by ctest with the
// stand-in libcuda.so.1 (tests/kernels/data/fake_libcuda.c; ctest runtime.CudaPoolWithStandInDriver), or with
// the real driver on a GPU machine; skipped elsewhere (no driver). ONNX Runtime's CUDA EP itself (which
// allocates from these pools) needs a GPU: scripts/gpu-check.sh checks it (BENCH onnx-cuda-pool-overhead).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "gantry/backend/onnx/onnx_backend.h"
#include "gantry/memory/backing.h"
#include "gantry/memory/block_pool.h"
#include "gantry/memory/owner_scope.h"
#include "gantry/runtime/runtime.h"

namespace gantry::runtime {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kMiB = 1ull << 20;
// $GANTRY_TEST_MODELS (scripts/gpu-check.sh sets it to the check overlay's models), else the set-up's.
const fs::path kMlp = fs::path(std::getenv("GANTRY_TEST_MODELS") ? std::getenv("GANTRY_TEST_MODELS")
                                                                 : GANTRY_DEPS_DIR "/models") /
                      "mlp_64_128_10.onnx";

hw::Registry one_gpu(uint64_t free_bytes) {
  hw::Registry m;
  hw::Device cpu;
  cpu.id = "cpu:0";
  cpu.kind = hw::DeviceKind::kCpu;
  cpu.family = hw::kFamilyCpu;
  cpu.memory_total_bytes = 8ull << 30;
  m.devices.push_back(cpu);
  m.host.memory_total_bytes = m.host.memory_available_bytes = 8ull << 30;
  hw::Device gpu;
  gpu.id = "cuda:0";
  gpu.kind = hw::DeviceKind::kGpu;
  gpu.family = hw::kFamilyCuda;
  gpu.name = "stand-in GPU";
  gpu.memory_total_bytes = gpu.memory_free_bytes = free_bytes;
  m.devices.push_back(gpu);
  return m;
}

// The driver is there (stand-in or real), or the test is skipped; under the ctest that provides the
// stand-in it must be there.
#define REQUIRE_CUDA_DRIVER()                                                                        \
  do {                                                                                               \
    auto probe = memory::make_cuda_backing(0);                                                       \
    if (!probe.ok()) {                                                                               \
      ASSERT_EQ(std::getenv("GANTRY_CUDA_STAND_IN"), nullptr)                                        \
          << "the stand-in libcuda.so.1 did not load: " << probe.status().message();                 \
      GTEST_SKIP() << "no CUDA driver here (ctest runtime.CudaPoolWithStandInDriver provides one): " \
                   << probe.status().message();                                                      \
    }                                                                                                \
  } while (0)

RuntimeOptions options(std::string budget) {
  RuntimeOptions o;
  o.memory_budget = std::move(budget);
  o.verdict_cache_dir = "none";
  o.keep_alive_timer = false;
  o.hardware = one_gpu(1ull << 30);
  return o;
}

TEST(CudaPool, OnePoolPerDeviceForOnnxRuntimeAlignedAndCharged) {
  REQUIRE_CUDA_DRIVER();
  auto rt = Runtime::create(options("cuda:0=64MiB"));
  ASSERT_TRUE(rt.ok()) << rt.status().to_string();
  memory::BlockPool* pool = (*rt)->pool("cuda:0");
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->options().min_alignment, kCudaAlignment);
  EXPECT_FALSE(pool->backing().host_accessible());
  // The ONNX backend is given exactly this pool for cuda:0 (it registers it with ORT's env there).
  auto* onnx = dynamic_cast<onnx::OnnxBackend*>((*rt)->backends().find("onnxruntime"));
  ASSERT_NE(onnx, nullptr);
  ASSERT_EQ(onnx->options().device_pools.size(), 1u);
  EXPECT_EQ(onnx->options().device_pools[0], pool);
  EXPECT_EQ(onnx->options().device_pools[0]->device(), "cuda:0");

  // Whatever a model allocates there (ORT does it inside the model's OwnerScope) is 256-byte aligned and
  // charged to that model in cuda:0's budget.
  std::vector<void*> ps;
  {
    memory::OwnerScope owner("model-a");
    for (uint64_t size : {uint64_t{1}, uint64_t{100}, uint64_t{255}, uint64_t{257}, uint64_t{4000},
                          uint64_t{70000}, 3 * kMiB + 5}) {
      auto p = pool->allocate(size);
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % kCudaAlignment, 0u) << size;
      EXPECT_EQ(pool->allocation_size(*p) % kCudaAlignment, 0u) << size;
      ps.push_back(*p);
    }
  }
  auto charged = [&](const std::string& owner) -> uint64_t {
    for (const auto& b : (*rt)->budgets())
      if (b.device == "cuda:0")
        for (const auto& o : b.owners)
          if (o.owner == owner) return o.in_use;
    return 0;
  };
  EXPECT_EQ(charged("model-a"), pool->stats().bytes_in_use);
  EXPECT_GT(charged("model-a"), 3 * kMiB);
  for (void* p : ps) ASSERT_TRUE(pool->free(p).ok());
  EXPECT_EQ(charged("model-a"), 0u);

  // Beyond the device's budget: refused with the numbers.
  memory::OwnerScope owner("model-b");
  auto big = pool->allocate(100 * kMiB);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(big.status().message().find("cuda:0"), std::string::npos) << big.status().message();
  EXPECT_NE(big.status().message().find("64.0 MiB"), std::string::npos) << big.status().message();
}

// A model whose backend allocates its device memory from the runtime's pool (as ORT's CUDA EP does):
// charged to it while loaded, given back when it is unloaded.
class PoolModel final : public backend::Model {
 public:
  PoolModel(memory::BlockPool* pool, std::string name, uint64_t bytes) : pool_(pool) {
    meta_.name = std::move(name);
    meta_.format = "onnx";
    memory::OwnerScope owner(meta_.name);
    auto p = pool_->allocate(bytes);
    if (p.ok()) held_ = *p;
  }
  ~PoolModel() override {
    if (held_) (void)pool_->free(held_);
  }
  bool holds() const { return held_ != nullptr; }
  const backend::ModelMetadata& metadata() const override { return meta_; }
  Status init() override { return Status::Ok(); }
  Result<std::vector<backend::NamedTensor>> infer_one(std::span<const backend::NamedTensor>) override {
    return std::vector<backend::NamedTensor>{};
  }

 private:
  memory::BlockPool* pool_;
  void* held_ = nullptr;
  backend::ModelMetadata meta_;
};

class CudaOnlyBackend final : public backend::Backend {
 public:
  const Runtime* runtime = nullptr;
  backend::Capabilities caps = [] {
    backend::Capabilities c;
    c.formats = {"onnx"};
    c.families = {"cuda"};
    return c;
  }();
  std::string_view name() const override { return "cuda-only"; }
  std::string version() const override { return "1"; }
  const backend::Capabilities& capabilities() const override { return caps; }
  backend::Support supports(const hw::Device&) const override { return backend::Support::yes(); }
  std::vector<std::string> providers() const override { return {"cuda"}; }
  backend::Support provider_available(std::string_view p) const override {
    return p == "cuda" ? backend::Support::yes() : backend::Support::no("cuda only");
  }
  std::string_view provider_family(std::string_view) const override { return hw::kFamilyCuda; }
  Result<backend::MemoryEstimate> estimate_memory(const model::Package&, const backend::Placement&) override {
    backend::MemoryEstimate e;
    e.bytes["cuda:0"] = 8 * kMiB;
    e.basis = "test";
    return e;
  }
  Result<std::unique_ptr<backend::Model>> load(const model::Package&, const backend::Placement& p) override {
    auto m = std::make_unique<PoolModel>(runtime->pool("cuda:0"), p.model_name, 8 * kMiB);
    if (!m->holds()) return ResourceExhausted("the pool refused the model's memory");
    return std::unique_ptr<backend::Model>(std::move(m));
  }
};

TEST(CudaPool, AModelsDeviceMemoryIsReleasedOnUnload) {
  REQUIRE_CUDA_DRIVER();
  ASSERT_TRUE(fs::exists(kMlp)) << kMlp;
  RuntimeOptions o = options("cuda:0=64MiB");
  auto be = std::make_unique<CudaOnlyBackend>();
  CudaOnlyBackend* backend = be.get();
  o.backends.push_back(std::move(be));
  auto rt = Runtime::create(std::move(o));
  ASSERT_TRUE(rt.ok()) << rt.status().to_string();
  backend->runtime = rt->get();
  memory::BlockPool* pool = (*rt)->pool("cuda:0");
  ASSERT_NE(pool, nullptr);
  {
    auto h = (*rt)->load(kMlp.string());
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    auto owner = pool->owner("mlp_64_128_10");
    ASSERT_TRUE(owner);
    EXPECT_EQ(owner->bytes_in_use, 8 * kMiB);
  }
  ASSERT_TRUE((*rt)->unload("mlp_64_128_10").ok());
  EXPECT_EQ(pool->stats().bytes_in_use, 0u);
  for (const auto& b : (*rt)->budgets()) {
    if (b.device == "cuda:0") {
      EXPECT_EQ(b.used, 0u);
    }
  }
}

TEST(CudaPool, NoPoolWithoutTheMemoryPoolOption) {
  RuntimeOptions o = options("");
  o.memory_pool = false;
  auto rt = Runtime::create(std::move(o));
  ASSERT_TRUE(rt.ok());
  EXPECT_EQ((*rt)->pool("cuda:0"), nullptr);
  EXPECT_EQ((*rt)->pool("cpu"), nullptr);
}

}  // namespace
}  // namespace gantry::runtime

// Sharding over accelerator memory on captured machines: a 70B model over two Gaudi2 (BF16), a 7B and a 70B
// model over four TPU v5e chips, an 8B model on a laptop NPU (INT8, host memory), and the refusals.
#include "gantry/plan/shard.h"

#include <gtest/gtest.h>

#include "hw/hw_test_util.h"

namespace gantry::plan {
namespace {

constexpr uint64_t kB = 1000ull * 1000 * 1000;  // parameters
constexpr uint64_t kGiB = 1024ull * 1024 * 1024;

std::string all(const ShardPlan& p) {
  std::string s;
  for (const auto& b : p.basis) s += b + "\n";
  return s;
}

TEST(Shard, SeventyBillionOverTwoGaudi2AtBf16) {
  auto p = shard_over_accelerators(hw::testing::detect_fixture("gaudi2"), 70 * kB);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_TRUE(p->fits) << all(*p);
  EXPECT_EQ(p->family, "gaudi");
  EXPECT_EQ(p->precision, "bf16");
  EXPECT_EQ(p->devices, 2);  // 140 GB of weights + 25 %: 163 GiB, two of 96 GiB
  EXPECT_EQ(p->device_ids, (std::vector<std::string>{"gaudi:0", "gaudi:1"}));
  EXPECT_EQ(p->bytes, 70 * kB * 2 + 70 * kB * 2 / 4);
  EXPECT_NE(all(*p).find("datasheet"), std::string::npos) << all(*p);
  EXPECT_NE(all(*p).find("+ 25%"), std::string::npos) << all(*p);
}

TEST(Shard, TpuV5eTakesInt8WhenBf16DoesNotFit) {
  const hw::Registry r = hw::testing::detect_fixture("tpu-v5e-vm");
  auto small = shard_over_accelerators(r, 7 * kB);
  ASSERT_TRUE(small.ok()) << small.status().to_string();
  EXPECT_TRUE(small->fits);
  EXPECT_EQ(small->precision, "bf16");
  EXPECT_EQ(small->devices, 2);  // 17.5 GB over 16 GiB chips
  // 30B: BF16 needs 75 GB (5 chips, there are 4); INT8 37.5 GB fits on 3.
  auto mid = shard_over_accelerators(r, 30 * kB);
  ASSERT_TRUE(mid.ok());
  EXPECT_TRUE(mid->fits) << all(*mid);
  EXPECT_EQ(mid->precision, "int8");
  EXPECT_EQ(mid->devices, 3);
  // 70B fits at no precision: the plan says how many chips it would take.
  auto big = shard_over_accelerators(r, 70 * kB);
  ASSERT_TRUE(big.ok());
  EXPECT_FALSE(big->fits);
  EXPECT_EQ(big->available, 4);
  EXPECT_GT(big->devices, 4);
  EXPECT_NE(all(*big).find("does not fit"), std::string::npos) << all(*big);
}

TEST(Shard, NpuRunsInt8InHostMemory) {
  const hw::Registry r = hw::testing::detect_fixture("intel-laptop-npu");
  auto p = shard_over_accelerators(r, 8 * kB, hw::kFamilyIntelNpu);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_TRUE(p->fits) << all(*p);
  EXPECT_EQ(p->precision, "int8");  // 8 GB + 25 % in the laptop's 30.7 GiB
  EXPECT_EQ(p->available, 1) << "devices in host memory share one pool: nothing to shard over";
  EXPECT_EQ(p->devices, 1);
  EXPECT_EQ(p->device_memory_bytes, *r.host.memory_total_bytes);
  EXPECT_NE(all(*p).find("host memory"), std::string::npos) << all(*p);
  // Left to choose, the iGPU and the NPU tie (one host pool): the first listed, the iGPU, at FP16.
  auto any = shard_over_accelerators(r, 8 * kB);
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->family, hw::kFamilyIntelGpu);
  EXPECT_EQ(any->precision, "fp16");
  EXPECT_FALSE(shard_over_accelerators(r, 8 * kB, hw::kFamilyTpu).ok());
}

TEST(Shard, UnknownMemoryAndNoParametersAreRefusedWithTheReason) {
  hw::testing::FakeMachine m(hw::testing::fixture("tpu-v5e-vm"));
  m.hide("/sys/bus/pci");
  hw::testing::FakeLoader loader;
  const hw::Registry r = hw::detect(m, loader);
  auto p = shard_over_accelerators(r, 7 * kB);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(p.status().message().find("memory is unknown"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("TPU driver"), std::string::npos) << p.status().message();
  EXPECT_FALSE(shard_over_accelerators(hw::testing::detect_fixture("gaudi2"), 0).ok());
  (void)kGiB;
}

}  // namespace
}  // namespace gantry::plan

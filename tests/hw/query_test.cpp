#include "gantry/hw/query.h"

#include <gtest/gtest.h>

#include "hw/hw_test_util.h"

namespace gantry::hw {
namespace {

Device make(std::string id, DeviceKind kind, std::string family, std::optional<uint64_t> mem,
            std::optional<std::string> cc = std::nullopt, std::optional<std::string> driver = std::nullopt,
            std::optional<std::string> cuda = std::nullopt) {
  Device d;
  d.id = std::move(id);
  d.kind = kind;
  d.family = std::move(family);
  d.memory_total_bytes = mem;
  d.compute_capability = std::move(cc);
  d.driver_version = std::move(driver);
  d.cuda_driver_version = std::move(cuda);
  return d;
}

constexpr uint64_t kGiB = 1ull << 30;

Registry sample() {
  Registry r;
  r.devices.push_back(make("cpu:0", DeviceKind::kCpu, "cpu", 512 * kGiB));
  r.devices.push_back(make("cuda:0", DeviceKind::kGpu, "cuda", 16 * kGiB, "7.0", "470.82.01", "11.4"));
  r.devices.push_back(make("cuda:1", DeviceKind::kGpu, "cuda", 80 * kGiB, "9.0", "535.104.05", "12.2"));
  r.devices.push_back(make("cuda:2", DeviceKind::kGpu, "cuda", 24 * kGiB, "8.9", "535.104.05", "9.0"));
  r.devices.push_back(make("intel-npu:0", DeviceKind::kNpu, "intel-npu", std::nullopt));
  r.devices.push_back(make("tpu:0", DeviceKind::kTpu, "tpu", std::nullopt));
  return r;
}

std::vector<std::string> ids(const std::vector<const Device*>& ds) {
  std::vector<std::string> out;
  for (const Device* d : ds) out.push_back(d->id);
  return out;
}

TEST(Query, BestDeviceIsTheLargestGpu) {
  Registry r = sample();
  ASSERT_NE(best_device(r), nullptr);
  EXPECT_EQ(best_device(r)->id, "cuda:1");
}

TEST(Query, DevicesByFamilyAndIndexAndTheirMemoryIds) {
  Registry r = sample();
  EXPECT_EQ(ids(family_devices(r, "cuda")), (std::vector<std::string>{"cuda:0", "cuda:1", "cuda:2"}));
  EXPECT_TRUE(family_devices(r, "rocm").empty());
  ASSERT_NE(find_device(r, "cuda", 2), nullptr);
  EXPECT_EQ(find_device(r, "cuda", 2)->id, "cuda:2");
  EXPECT_EQ(find_device(r, "cuda", 3), nullptr);
  ASSERT_NE(find_device(r, "cpu", 0), nullptr);
  EXPECT_EQ(family_index(*find_device(r, "cuda", 1)), 1);
  // Budgets and plans name host memory "cpu" (the registry's CPU is "cpu:0"), accelerators by their id.
  EXPECT_EQ(memory_device_id(*find_device(r, "cpu", 0)), "cpu");
  EXPECT_EQ(memory_device_id(*find_device(r, "cuda", 1)), "cuda:1");
  EXPECT_EQ(memory_device_id("cuda", 1), "cuda:1");
  EXPECT_EQ(memory_device_id("cpu", 0), "cpu");
  EXPECT_EQ(family_index(make("cuda:x", DeviceKind::kGpu, "cuda", std::nullopt)), 0);  // not a number
}

TEST(Query, CpuOnlyMachineBestIsTheCpu) {
  Registry r;
  r.devices.push_back(make("cpu:0", DeviceKind::kCpu, "cpu", 8 * kGiB));
  EXPECT_EQ(best_device(r)->id, "cpu:0");
  const Registry empty;
  EXPECT_EQ(best_device(empty), nullptr);
}

TEST(Query, AcceleratorsOutrankTheCpuWhateverItsMemory) {
  Registry r = sample();
  EXPECT_GT(device_rank(r.devices[5]), device_rank(r.devices[0]));  // TPU, memory unknown
  EXPECT_GT(device_rank(r.devices[4]), device_rank(r.devices[0]));  // NPU
  EXPECT_GT(device_rank(r.devices[1]), device_rank(r.devices[5]));  // a CUDA GPU over a TPU
}

TEST(Query, MemoryRequirementSkipsUnknownMemory) {
  const Registry reg = sample();
  Requirement req;
  req.min_memory_bytes = 20 * kGiB;
  auto got = find_devices(reg, req);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(ids(*got), (std::vector<std::string>{"cuda:1", "cuda:2", "cpu:0"}));
}

TEST(Query, ComputeCapabilityComparedAsVersions) {
  const Registry reg = sample();
  Requirement req;
  req.min_compute_capability = "8.0";
  auto got = find_devices(reg, req);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(ids(*got), (std::vector<std::string>{"cuda:1", "cuda:2"}));
}

TEST(Query, CudaVersionNineIsLessThanElevenEight) {
  const Registry reg = sample();
  Requirement req;
  req.min_cuda_version = "11.8";
  auto got = find_devices(reg, req);
  ASSERT_TRUE(got.ok());
  // cuda:2 reports "9.0": as a string "9.0" > "11.8", as a version it is not.
  EXPECT_EQ(ids(*got), (std::vector<std::string>{"cuda:1"}));
  req.min_cuda_version = "9.0";
  EXPECT_EQ(ids(*find_devices(reg, req)),
            (std::vector<std::string>{"cuda:1", "cuda:2", "cuda:0"}));  // by memory
}

TEST(Query, DriverVersionThreeComponents) {
  const Registry reg = sample();
  Requirement req;
  req.min_driver_version = "525.60.13";
  auto got = find_devices(reg, req);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(ids(*got), (std::vector<std::string>{"cuda:1", "cuda:2"}));
}

TEST(Query, KindAndFamily) {
  const Registry reg = sample();
  Requirement req;
  req.kind = DeviceKind::kNpu;
  EXPECT_EQ(ids(*find_devices(reg, req)), (std::vector<std::string>{"intel-npu:0"}));
  Requirement fam;
  fam.family = "tpu";
  EXPECT_EQ(ids(*find_devices(reg, fam)), (std::vector<std::string>{"tpu:0"}));
  Requirement none;
  none.family = "gaudi";
  EXPECT_TRUE(find_devices(reg, none)->empty());
}

TEST(Query, BadVersionInRequirementIsAnError) {
  const Registry reg = sample();
  Requirement req;
  req.min_compute_capability = "nine";
  auto got = find_devices(reg, req);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find("compute capability"), std::string::npos);
}

TEST(Query, WorksOnAFixtureRegistry) {
  Registry r = testing::detect_fixture("amd-mi300x");
  EXPECT_EQ(best_device(r)->family, "rocm");
  Requirement req;
  req.family = "rocm";
  req.min_memory_bytes = 191 * kGiB;  // an MI300X reports 191.98 GiB
  EXPECT_EQ(find_devices(r, req)->size(), 8u);
  req.min_memory_bytes = 192 * kGiB;
  EXPECT_EQ(find_devices(r, req)->size(), 0u);
}

}  // namespace
}  // namespace gantry::hw

// detect_host(): the CPU probe alone gives the same CPU, host memory and CPU device as a full
// detect(), and nothing else.
#include <gtest/gtest.h>

#include "hw/hw_test_util.h"

namespace gantry::hw {
namespace {

TEST(DetectHost, SameCpuAndHostAsFullDetectWithoutAccelerators) {
  for (const char* tree : {"nvidia-dgx-h100", "container-cgroup2"}) {
    SCOPED_TRACE(tree);
    const Registry full = testing::detect_fixture(tree);
    testing::FakeMachine m(testing::fixture(tree));
    const Registry host = detect_host(m);
    EXPECT_EQ(host.cpu, full.cpu);
    EXPECT_EQ(host.host, full.host);
    EXPECT_EQ(host.environment.virtualized, full.environment.virtualized);
    ASSERT_EQ(host.devices.size(), 1u);
    EXPECT_EQ(host.devices[0], full.devices[0]);
    EXPECT_EQ(host.devices[0].id, "cpu:0");
    EXPECT_FALSE(host.cpu.model.empty());
    EXPECT_TRUE(host.host.memory_total_bytes.has_value());
  }
}

TEST(DetectHost, UnreadableCpuinfoIsAWarningNotAFailure) {
  testing::FakeMachine m(testing::fixture("nvidia-dgx-h100"));
  m.fail("/proc/cpuinfo", IoError("/proc/cpuinfo: permission denied"));
  const Registry host = detect_host(m);
  ASSERT_EQ(host.devices.size(), 1u);
  EXPECT_TRUE(host.cpu.model.empty());
  EXPECT_TRUE(host.host.memory_total_bytes.has_value()) << "meminfo is still read";
}

}  // namespace
}  // namespace gantry::hw

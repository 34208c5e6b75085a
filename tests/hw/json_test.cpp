#include <gtest/gtest.h>

#include "gantry/hw/registry_json.h"
#include "hw/hw_test_util.h"

namespace gantry::hw {
namespace {

class JsonRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(JsonRoundTrip, FromJsonOfToJsonIsIdentity) {
  Registry r = testing::detect_fixture(GetParam(), {{"CUDA_VISIBLE_DEVICES", "0,1"}});
  const std::string text = registry_to_json(r).dump();
  auto back = registry_from_json_text(text);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(registry_to_json(*back).dump(), text);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, JsonRoundTrip,
                         ::testing::Values("nvidia-dgx-h100", "amd-mi300x", "amd-mi250x", "intel-laptop-npu",
                                           "tpu-v5e-vm", "container-cgroup2", "gaudi2", "aws-inf2",
                                           "qaic-ai100", "amd-xdna-laptop", "arm-graviton3", "garbage",
                                           "nvidia-h100-vm", "device-nodes"));

TEST(Json, RoundTripOfEveryOptionalField) {
  Registry r;
  Device d;
  d.id = "cuda:0";
  d.family = "cuda";
  d.vendor = "nvidia";
  d.name = "NVIDIA H100";
  d.uuid = "GPU-1";
  d.pci_bus_id = "0000:18:00.0";
  d.pci_vendor_id = 0x10de;
  d.pci_device_id = 0x2330;
  d.numa_node = 1;
  d.memory_total_bytes = 85899345920ull;
  d.memory_free_bytes = 1;
  d.memory_used_bytes = 0;
  d.compute_capability = "9.0";
  d.arch = "sm_90";
  d.driver_version = "550.54.15";
  d.cuda_driver_version = "12.4";
  d.pcie_generation = 5;
  d.pcie_width = 16;
  d.mig_enabled = false;
  d.power_watts = 71.234;
  d.temperature_c = 33;
  d.utilization_percent = 0;
  d.cores = 132;
  d.sources = {"nvml", "vulkan"};
  d.memory_bandwidth_bytes_per_s = 3350000000000ull;
  d.memory_bandwidth_source = "catalogue";
  d.pcie_bandwidth_bytes_per_s = 63015384608ull;
  d.nvlinks = {NvLink{0, true, "4.0", "0000:05:00.0", "switch"},
               NvLink{1, false, std::nullopt, std::nullopt, std::nullopt}};
  d.xgmi_hive_id = "0x13de3adfc0d9c301";
  r.devices.push_back(d);
  r.io.memory = {614400000000ull, "catalogue", "8 x DDR5-4800", 200000000000ull};
  r.io.peers = {PeerLink{"cuda:0", "cuda:1", "nvlink", 18, 450000000000ull}};
  r.io.storage = {
      BlockDevice{"nvme0n1", "Samsung", 1ull << 40, false, false, true, "0000:3b:00.0", 7876923076ull}};
  r.io.network = {NetInterface{"ib0", std::nullopt, "up", "mlx5_core", "0000:1a:00.0", {"mlx5_0"}}};
  r.io.rdma = {RdmaDevice{"mlx5_0", "0000:1a:00.0", "ACTIVE", "InfiniBand", 50000000000ull, 1}};
  r.host.cpu_quota_cores = 1.5;
  r.host.memory_limit_bytes = 1ull << 33;
  r.environment.visible_devices["CUDA_VISIBLE_DEVICES"] = "0";
  r.environment.container = "podman";
  r.warnings = {"a", "b"};
  r.timings_ms = {{"cpu", 0.123456789}, {"total", 1.5}};
  auto back = registry_from_json(registry_to_json(r));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, r);
}

TEST(Json, KeysScriptsRelyOn) {
  auto j = registry_to_json(testing::detect_fixture("nvidia-dgx-h100"));
  EXPECT_TRUE(j["schema_version"].is_number_integer());
  EXPECT_EQ(j["schema_version"], kRegistrySchemaVersion);
  EXPECT_TRUE(j["host"]["memory_total_bytes"].is_number_unsigned());
  EXPECT_TRUE(j["host"].contains("memory_available_bytes"));
  EXPECT_EQ(j["cpu"]["logical_cores"], 32);
  EXPECT_EQ(j["cpu"]["physical_cores"], 16);
  EXPECT_TRUE(j["cpu"]["isa"].is_array());
  for (const auto& d : j["devices"]) {
    for (const char* key : {"id", "kind", "vendor", "name", "memory_total_bytes", "memory_free_bytes",
                            "pci_bus_id", "numa_node", "compute_capability", "driver_version"}) {
      EXPECT_TRUE(d.contains(key)) << key;
    }
  }
  EXPECT_EQ(j["devices"][1]["kind"], "gpu");
  EXPECT_TRUE(j["devices"][1]["memory_total_bytes"].is_null()) << "unknown is null";
  EXPECT_TRUE(j["environment"].is_object());
  EXPECT_TRUE(j["warnings"].is_array());
  EXPECT_TRUE(j["timings_ms"]["total"].is_number());
  // Schema 2: system I/O.
  EXPECT_EQ(j["io"]["host_memory_bandwidth"]["source"], "catalogue");
  EXPECT_TRUE(j["io"]["host_memory_bandwidth"]["measured_bytes_per_s"].is_null())
      << "only with --measure-bandwidth";
  EXPECT_EQ(j["io"]["peers"].size(), 28u);
  EXPECT_TRUE(j["io"]["storage"].is_array());
  EXPECT_EQ(j["io"]["rdma"][0]["name"], "mlx5_0");
  EXPECT_EQ(j["devices"][1]["memory_bandwidth_source"], "catalogue");
  EXPECT_TRUE(j["devices"][1]["nvlinks"].is_array());
}

TEST(Json, NewerSchemaIsReadWithAWarning) {
  auto j = registry_to_json(testing::detect_fixture("gaudi2"));
  const size_t devices = j["devices"].size();
  j["schema_version"] = kRegistrySchemaVersion + 1;
  j["a_section_added_later"] = {{"x", 1}};
  j["devices"][1]["a_field_added_later"] = "y";
  auto r = registry_from_json(j);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->devices.size(), devices);
  EXPECT_EQ(r->schema_version, kRegistrySchemaVersion);
  ASSERT_FALSE(r->warnings.empty());
  EXPECT_NE(r->warnings[0].find("schema_version " + std::to_string(kRegistrySchemaVersion + 1)),
            std::string::npos)
      << r->warnings[0];
  EXPECT_NE(r->warnings[0].find("upgrade Gantry"), std::string::npos) << r->warnings[0];

  // A device of a kind added since is left out (with its own warning), the rest read.
  j["devices"][1]["kind"] = "fpga";
  auto k = registry_from_json(j);
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  EXPECT_EQ(k->devices.size(), devices - 1);
  bool said = false;
  for (const auto& w : k->warnings) said = said || w.find("devices[1]") != std::string::npos;
  EXPECT_TRUE(said);

  // A field this schema needs, retyped: refused, and the message says the document is newer.
  j["cpu"]["sockets"] = "two";
  auto bad = registry_from_json(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(bad.status().message().find("newer"), std::string::npos) << bad.status().message();
}

TEST(Json, MalformedDocumentsNameTheField) {
  auto j = registry_to_json(testing::detect_fixture("gaudi2"));
  j["devices"][1]["memory_total_bytes"] = "80GB";
  auto r = registry_from_json(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(r.status().message().find("devices[1].memory_total_bytes"), std::string::npos)
      << r.status().message();

  auto k = registry_to_json(testing::detect_fixture("gaudi2"));
  k["devices"][0]["kind"] = "fpga";
  auto rk = registry_from_json(k);
  ASSERT_FALSE(rk.ok());
  EXPECT_NE(rk.status().message().find("devices[0].kind"), std::string::npos) << rk.status().message();
  EXPECT_FALSE(registry_from_json_text("{not json").ok());
  EXPECT_FALSE(registry_from_json_text("[]").ok());
  EXPECT_FALSE(registry_from_json_text(R"({"schema_version": "1"})").ok());
}

}  // namespace
}  // namespace gantry::hw

namespace gantry::hw {
namespace {

TEST(RegistryJson, NumberOverflowIsCorruptNotACrash) {
  auto r = registry_from_json_text(R"({"schema_version": 1e6079})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
}

}  // namespace
}  // namespace gantry::hw

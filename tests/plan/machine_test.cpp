// This machine as `gantry plan` times it (gantry/plan/machine.h): which timer each device gets, what is
// noted when one fails, and nothing timed for a captured --sysroot. The timers are fakes that count.
#include "gantry/plan/machine.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace gantry::plan {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kGiB = 1ull << 30;

struct Calls {
  int cpu_product = 0, cpu_on_model = 0, remote = 0, bandwidth = 0, barrier = 0, storage = 0;
  std::string weight_type, remote_endpoint;
};

DeviceSpeed named(const std::string& what) {
  DeviceSpeed s;
  s.description = what;
  s.memory_bandwidth = 1;
  return s;
}

// Timers that record their calls; `fail` makes the llama-side ones fail.
DeviceTimers fakes(Calls& c, bool fail = false) {
  DeviceTimers t;
  t.cpu_product = [&c, fail](int, const std::string& weight_type) -> Result<DeviceSpeed> {
    ++c.cpu_product;
    c.weight_type = weight_type;
    if (fail) return Unavailable("no product");
    return named("product");
  };
  t.cpu_on_model = [&c, fail](const std::string&, const ModelProfile&, const hw::CpuInfo&, double,
                              int) -> Result<DeviceSpeed> {
    ++c.cpu_on_model;
    if (fail) return Internal("boom");
    return named("on the model");
  };
  t.remote = [&c, fail](const hw::RpcEndpoint& e, int, const std::string& weight_type,
                        double) -> Result<DeviceSpeed> {
    ++c.remote;
    c.remote_endpoint = e.host + ":" + std::to_string(e.port);
    c.weight_type = weight_type;
    if (fail) return Unavailable("link down");
    return named("remote");
  };
  t.memory_bandwidth = [&c](int) {
    ++c.bandwidth;
    return 20e9;
  };
  t.thread_barrier = [&c](int) {
    ++c.barrier;
    return 1e-6;
  };
  t.storage_for_path = [&c](const std::string&) -> Result<hw::BlockDevice> {
    ++c.storage;
    hw::BlockDevice b;
    b.name = "nvme0n1";
    b.nvme = true;
    return b;
  };
  return t;
}

Device remote_device() {
  Device d = memory_target("rpc:0", "device 0 of 10.0.0.2:50052", true, 4 * kGiB, 4 * kGiB);
  d.kind = hw::DeviceKind::kRemote;
  d.family = "rpc";
  hw::RemoteLink link;
  link.endpoint = "10.0.0.2:50052";
  d.remote = link;
  return d;
}

struct TestMachine {
  hw::Registry registry;
  ThisMachineRequest request;
  explicit TestMachine(std::vector<Device> devices) {
    registry.cpu.model = "Test CPU";
    request.registry = &registry;
    request.devices = std::move(devices);
    request.threads = 2;
    request.model_path = "/models/m.gguf";
  }
};

ModelProfile gguf() {
  ModelProfile m;
  m.weight_type = "q4_0";
  return m;
}

TEST(ThisMachine, CpuAloneIsTheIsaWithATriadAndABarrier) {
  TestMachine s({memory_target("cpu", "CPU", false, 8 * kGiB, 8 * kGiB)});
  Calls c;
  const ThisMachine m = this_machine(s.request, fakes(c));
  EXPECT_EQ(m.target.id, "this");
  EXPECT_EQ(m.target.description, "this machine: Test CPU");
  ASSERT_EQ(m.target.speeds.size(), 1u);
  EXPECT_EQ(m.target.speeds[0].memory_bandwidth, 20e9);
  EXPECT_EQ(m.target.speeds[0].bandwidth_source, "measured");
  EXPECT_EQ(m.target.speeds[0].seconds_per_node, 1e-6);
  EXPECT_EQ(c.bandwidth, 1);
  EXPECT_EQ(c.barrier, 1);
  EXPECT_EQ(c.cpu_on_model + c.cpu_product, 0);  // no GGUF, no remote device
  EXPECT_EQ(m.target.storage_bytes_per_s, kNvmeReadBytesPerS);
  EXPECT_EQ(m.note.rfind("load: nvme0n1 (NVMe)", 0), 0u) << m.note;
}

TEST(ThisMachine, AGgufTimesTheCpuOnTheModelAndFallsBackSayingWhy) {
  TestMachine s({memory_target("cpu", "CPU", false, 8 * kGiB, 8 * kGiB)});
  const ModelProfile model = gguf();
  s.request.gguf = &model;
  Calls c;
  ThisMachine m = this_machine(s.request, fakes(c));
  EXPECT_EQ(m.target.speeds[0].description, "on the model");
  EXPECT_EQ(c.cpu_on_model, 1);
  EXPECT_EQ(c.bandwidth, 0);

  Calls f;
  m = this_machine(s.request, fakes(f, true));
  EXPECT_EQ(f.cpu_on_model, 1);
  EXPECT_EQ(f.bandwidth, 1);  // fell back to the triad
  EXPECT_EQ(m.target.speeds[0].bandwidth_source, "measured");
  EXPECT_NE(m.note.find("; cpu: not timed on the model (boom), so a memory triad and the ISA instead"),
            std::string::npos)
      << m.note;
}

TEST(ThisMachine, NextToRemoteDevicesTheCpuIsTimedOnTheirProduct) {
  TestMachine s({memory_target("cpu", "CPU", false, 8 * kGiB, 8 * kGiB), remote_device()});
  const ModelProfile model = gguf();
  s.request.gguf = &model;
  Calls c;
  ThisMachine m = this_machine(s.request, fakes(c));
  ASSERT_EQ(m.target.speeds.size(), 2u);
  EXPECT_EQ(m.target.speeds[0].description, "product");
  EXPECT_EQ(m.target.speeds[1].description, "remote");
  EXPECT_EQ(c.cpu_product, 1);
  EXPECT_EQ(c.cpu_on_model, 0);
  EXPECT_EQ(c.remote, 1);
  EXPECT_EQ(c.remote_endpoint, "10.0.0.2:50052");
  EXPECT_EQ(c.weight_type, "q4_0");
  EXPECT_EQ(m.target.description, "this machine: Test CPU, rpc:0 (10.0.0.2:50052)");

  // A remote device that cannot be timed gets no figures and is named in the note; the CPU falls back.
  Calls f;
  m = this_machine(s.request, fakes(f, true));
  EXPECT_EQ(m.target.speeds[1].memory_bandwidth, 0);
  EXPECT_EQ(m.target.speeds[0].bandwidth_source, "measured");
  EXPECT_NE(m.note.find("rpc:0: no speed: link down"), std::string::npos) << m.note;
  EXPECT_EQ(m.note.find("cpu: not timed"), std::string::npos) << "only a model timing is noted";
}

TEST(ThisMachine, GpusGetTheCatalogueWithTheRegistrysBandwidth) {
  auto cat = parse_catalogue(R"({"schema_version": 1, "catalogue_version": "t", "accelerators": [
      {"id": "big", "name": "Big GPU", "memory_gib": 80, "memory_bandwidth_gb_s": 3000,
       "fp16_dense_tflops": 900, "source": "test", "match": ["Big GPU"]}], "instances": []})",
                             "test.json");
  ASSERT_TRUE(cat.ok()) << cat.status().to_string();
  TestMachine s({memory_target("cpu", "CPU", false, 8 * kGiB, 8 * kGiB),
                 memory_target("cuda:0", "Big GPU", true, 80 * kGiB, 80 * kGiB),
                 memory_target("cuda:1", "Big GPU", true, 80 * kGiB, 80 * kGiB),
                 memory_target("cuda:2", "Unknown GPU", true, 8 * kGiB, 8 * kGiB)});
  s.request.catalogue = &*cat;
  hw::Device known;
  known.id = "cuda:1";
  known.memory_bandwidth_bytes_per_s = 2'000'000'000'000;
  known.memory_bandwidth_source = "hw table";
  s.registry.devices.push_back(known);
  Calls c;
  const ThisMachine m = this_machine(s.request, fakes(c));
  ASSERT_EQ(m.target.speeds.size(), 4u);
  EXPECT_EQ(m.target.speeds[1].memory_bandwidth, 3000e9);
  EXPECT_EQ(m.target.speeds[1].flops_source, "catalogue");
  EXPECT_EQ(m.target.speeds[2].memory_bandwidth, 2e12);  // the registry's figure wins
  EXPECT_EQ(m.target.speeds[2].bandwidth_source, "hw table");
  EXPECT_EQ(m.target.speeds[2].bandwidth_efficiency, kPeakBandwidthEfficiency);
  EXPECT_EQ(m.target.speeds[3].memory_bandwidth, 0);  // not in the catalogue: no figures
  EXPECT_EQ(m.target.description, "this machine: Test CPU, Big GPU, Big GPU, Unknown GPU");
}

TEST(ThisMachine, ACapturedSysrootIsNotTimed) {
  TestMachine s({memory_target("cpu", "CPU", false, 8 * kGiB, 8 * kGiB), remote_device()});
  const ModelProfile model = gguf();
  s.request.gguf = &model;
  s.request.local = false;
  Calls c;
  const ThisMachine m = this_machine(s.request, fakes(c));
  EXPECT_EQ(c.cpu_product + c.cpu_on_model + c.bandwidth + c.barrier + c.storage, 0);
  EXPECT_EQ(m.target.speeds[0].memory_bandwidth, 0);  // the ISA and clock alone
  EXPECT_EQ(m.target.storage_bytes_per_s, 0);
  EXPECT_EQ(m.note.rfind("load time unknown: a captured --sysroot has no model file on its disks", 0), 0u)
      << m.note;
}

TEST(ThisMachine, UnknownStorageIsSaid) {
  TestMachine s({memory_target("cpu", "CPU", false, 8 * kGiB, 8 * kGiB)});
  Calls c;
  DeviceTimers t = fakes(c);
  t.storage_for_path = [](const std::string&) -> Result<hw::BlockDevice> { return NotFound("no disk"); };
  const ThisMachine m = this_machine(s.request, t);
  EXPECT_EQ(m.target.storage_bytes_per_s, 0);
  EXPECT_EQ(m.note, "load time unknown: no disk");
}

TEST(PlanMachine, SpeedThreads) {
  hw::CpuInfo cpu;
  EXPECT_EQ(speed_threads(cpu, 0), 1);
  cpu.logical_cores = 8;
  EXPECT_EQ(speed_threads(cpu, 0), 8);
  cpu.physical_cores = 4;
  EXPECT_EQ(speed_threads(cpu, 0), 4);
  EXPECT_EQ(speed_threads(cpu, 3), 3);
}

TEST(PlanMachine, ASysrootMustBeACapturedMachineWithItsMemory) {
  auto missing = machine_to_plan_for("/nonexistent/sysroot");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  char tpl[] = "/tmp/gantry-plan-sysroot-XXXXXX";
  const std::string root = ::mkdtemp(tpl);
  auto bare = machine_to_plan_for(root);
  ASSERT_FALSE(bare.ok());
  EXPECT_EQ(bare.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bare.status().message().find("no readable proc/meminfo"), std::string::npos);
  fs::create_directories(root + "/proc");
  std::ofstream(root + "/proc/meminfo") << "MemTotal: 16384 kB\nMemAvailable: 8192 kB\n";
  auto captured = machine_to_plan_for(root);
  ASSERT_TRUE(captured.ok()) << captured.status().to_string();
  EXPECT_EQ(captured->host.memory_total_bytes, 16384u * 1024);
  fs::remove_all(root);
}

TEST(PlanMachine, WhatIfSpecsNamingThisMachine) {
  EXPECT_TRUE(names_this_machine("this"));
  EXPECT_TRUE(names_this_machine("h100-80gb,THIS"));
  EXPECT_TRUE(names_this_machine("all"));
  EXPECT_FALSE(names_this_machine("h100-80gb,8xa100-80gb"));
}

TEST(PlanMachine, TheCpuTakesAShareOnlyBesideRemoteDevicesWithoutALocalGpu) {
  const Device cpu = memory_target("cpu", "CPU", false, kGiB, kGiB);
  const Device gpu = memory_target("cuda:0", "GPU", true, kGiB, kGiB);
  EXPECT_TRUE(cpu_should_take_share({cpu, remote_device()}));
  EXPECT_FALSE(cpu_should_take_share({cpu, gpu, remote_device()}));
  EXPECT_FALSE(cpu_should_take_share({cpu, gpu}));
  EXPECT_FALSE(cpu_should_take_share({cpu}));
}

}  // namespace
}  // namespace gantry::plan

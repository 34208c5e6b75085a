// ai-hwaccel's totals and advice over captured machines (tests/fixtures/hw): a Gaudi2 server, a TPU v5e VM
// and a laptop with an Intel NPU: each device's memory (the driver's, the datasheet's with that said, the
// host's, or unknown with the reason), the precisions advised with their assumption, and the totals, also in
// `gantry detect --json`.
#include "gantry/hw/advice.h"

#include <gtest/gtest.h>

#include "gantry/hw/registry_json.h"
#include "hw/hw_test_util.h"

namespace gantry::hw {
namespace {

using testing::count_family;
using testing::detect_fixture;
using testing::find_id;

constexpr uint64_t kGiB = 1024ull * 1024 * 1024;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Advice, Gaudi2MemoryFromTheDatasheetAndBf16) {
  Registry r = detect_fixture("gaudi2");
  const Device* g = find_id(r, "gaudi:0");
  ASSERT_NE(g, nullptr);
  EXPECT_FALSE(g->memory_total_bytes) << "the registry never guesses";
  const DeviceMemory m = device_memory(r, *g);
  EXPECT_EQ(m.source, "datasheet");
  EXPECT_EQ(m.bytes, 96 * kGiB);
  EXPECT_TRUE(has(m.reason, "the driver reports no memory size")) << m.reason;
  EXPECT_TRUE(has(m.reason, "Gaudi2 datasheet")) << m.reason;
  const PrecisionAdvice a = precision_advice(*g);
  EXPECT_EQ(a.precisions, (std::vector<std::string>{"bf16", "int8"}));
  EXPECT_TRUE(has(a.assumption, "BF16 is the native format")) << a.assumption;
  // Totals count what the driver reports: the Gaudis' memory is unknown to it, so they are listed instead.
  const Totals t = registry_totals(r);
  EXPECT_TRUE(t.has_accelerator);
  EXPECT_EQ(t.total_accelerator_memory_bytes, 0u);
  EXPECT_EQ(t.total_memory_bytes, *r.host.memory_total_bytes);
  EXPECT_EQ(t.memory_unknown, (std::vector<std::string>{"gaudi:0", "gaudi:1"}));
}

TEST(Advice, Gaudi2MemoryFromSysfsWhenTheDriverExposesIt) {
  testing::FakeMachine m(testing::fixture("gaudi2"));
  m.set_file("/sys/class/accel/accel0/device/dram_size", "103079215104\n");
  testing::FakeLoader loader;
  Registry r = detect(m, loader);
  const Device* g = find_id(r, "gaudi:0");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->memory_total_bytes, 96 * kGiB);
  EXPECT_EQ(device_memory(r, *g).source, "driver");
  const Totals t = registry_totals(r);
  EXPECT_EQ(t.total_accelerator_memory_bytes, 96 * kGiB);
  EXPECT_EQ(t.memory_unknown, (std::vector<std::string>{"gaudi:1"}));
  EXPECT_EQ(t.total_memory_bytes, *r.host.memory_total_bytes + 96 * kGiB);
}

TEST(Advice, TpuV5eFromTheDatasheetAndUnknownWithTheReasonWhenUnnamed) {
  Registry r = detect_fixture("tpu-v5e-vm");
  const Device* t = find_id(r, "tpu:0");
  ASSERT_NE(t, nullptr);
  const DeviceMemory m = device_memory(r, *t);
  EXPECT_EQ(m.source, "datasheet");
  EXPECT_EQ(m.bytes, 16 * kGiB);
  EXPECT_EQ(precision_advice(*t).precisions.front(), "bf16");
  // Seen only through /dev/accelN, the chip has no model name: its memory stays unknown, with why.
  testing::FakeMachine hidden(testing::fixture("tpu-v5e-vm"));
  hidden.hide("/sys/bus/pci");
  testing::FakeLoader loader;
  Registry h = detect(hidden, loader);
  const DeviceMemory u = device_memory(h, *find_id(h, "tpu:0"));
  EXPECT_EQ(u.source, "unknown");
  EXPECT_FALSE(u.bytes);
  EXPECT_TRUE(has(u.reason, "the TPU driver exposes no memory size in sysfs")) << u.reason;
}

TEST(Advice, IntelNpuWorksInHostMemoryAndIsAdvisedInt8) {
  Registry r = detect_fixture("intel-laptop-npu");
  const Device* n = find_id(r, "intel-npu:0");
  ASSERT_NE(n, nullptr);
  const DeviceMemory m = device_memory(r, *n);
  EXPECT_EQ(m.source, "host");
  EXPECT_EQ(m.bytes, r.host.memory_total_bytes);
  EXPECT_TRUE(has(m.reason, "no memory of its own")) << m.reason;
  const PrecisionAdvice a = precision_advice(*n);
  EXPECT_EQ(a.precisions, (std::vector<std::string>{"int8", "fp16"}));
  const Totals t = registry_totals(r);
  EXPECT_TRUE(t.has_accelerator);
  EXPECT_TRUE(t.memory_unknown.empty()) << "host-memory devices are counted with the host";
  EXPECT_EQ(t.total_memory_bytes, *r.host.memory_total_bytes);
  // A GPU is advised FP16, then INT8, then INT4; the CPU FP32 first.
  EXPECT_EQ(precision_advice(*find_id(r, "intel-gpu:0")).precisions,
            (std::vector<std::string>{"fp16", "int8", "int4"}));
  EXPECT_EQ(precision_advice(r.devices.front()).precisions.front(), "fp32");
}

TEST(Advice, DetectJsonCarriesTotalsAndAdviceAndReadsBack) {
  Registry r = detect_fixture("gaudi2");
  auto j = registry_to_json(r);
  EXPECT_EQ(j["totals"]["has_accelerator"], true);
  EXPECT_EQ(j["totals"]["memory_unknown"].size(), 2u);
  EXPECT_EQ(j["devices"][1]["advice"]["memory_source"], "datasheet");
  EXPECT_EQ(j["devices"][1]["advice"]["precisions"][0], "bf16");
  EXPECT_EQ(j["devices"][1]["memory_total_bytes"], nullptr) << "the registry's own key stays unknown";
  auto back = registry_from_json(j);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, r) << "derived keys are not read back";
}

// The accelerators seen only as device nodes (ai-hwaccel's Graphcore, Groq, Cerebras, Samsung and MediaTek
// sources): found, their memory from the datasheet (SRAM) or the host (SoC NPUs), never from the registry.
TEST(Advice, DeviceNodeAccelerators) {
  Registry r = detect_fixture("device-nodes");
  EXPECT_EQ(count_family(r, kFamilyGraphcore), 2);  // ipu0, ipu1; not Intel's camera ipu-psys0
  EXPECT_EQ(count_family(r, kFamilyGroq), 1);
  EXPECT_EQ(count_family(r, kFamilyCerebras), 1);
  EXPECT_EQ(count_family(r, kFamilySamsungNpu), 1);
  EXPECT_EQ(count_family(r, kFamilyMediatekApu), 1);
  const Device* ipu = find_id(r, "graphcore:1");
  ASSERT_NE(ipu, nullptr);
  EXPECT_EQ(ipu->kind, DeviceKind::kAsic);
  EXPECT_FALSE(ipu->memory_total_bytes);  // the node says nothing about memory
  DeviceMemory m = device_memory(r, *ipu);
  EXPECT_EQ(m.source, "datasheet");
  EXPECT_EQ(m.bytes, 900'000'000u);
  EXPECT_NE(m.reason.find("GC200"), std::string::npos) << m.reason;
  EXPECT_EQ(precision_advice(*ipu).precisions.front(), "fp16");
  EXPECT_EQ(device_memory(r, *find_id(r, "groq:0")).bytes, 230'000'000u);
  EXPECT_EQ(device_memory(r, *find_id(r, "cerebras:0")).bytes, 44'000'000'000u);
  for (const char* npu : {"samsung-npu:0", "mediatek-apu:0"}) {
    const Device* d = find_id(r, npu);
    ASSERT_NE(d, nullptr) << npu;
    EXPECT_EQ(d->kind, DeviceKind::kNpu);
    EXPECT_EQ(device_memory(r, *d).source, "host") << npu;
    EXPECT_EQ(precision_advice(*d).precisions.front(), "int8") << npu;
  }
  // Each is also a probe name (the accel probe finds them).
  EXPECT_TRUE(parse_probe_names("groq,graphcore,cerebras,samsung-npu,mediatek-apu", "--only").ok());
}

}  // namespace
}  // namespace gantry::hw

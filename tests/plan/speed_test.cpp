// predict_speed against figures computed by hand (roofline: bytes / bandwidth, FLOPs / FLOP/s).
#include "gantry/plan/speed.h"

#include <gtest/gtest.h>

namespace gantry::plan {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

// 2 layers of 1,000,000 bytes, output layer 2,000,000 bytes, n_embd 64, 4 heads of 16, 2 KV heads; one
// parameter per weight byte so the FLOP counts stay readable.
ModelProfile two_layers() {
  ModelProfile m;
  m.name = "synthetic";
  m.n_embd = 64;
  m.n_vocab = 32000;
  m.n_ctx_train = 8192;
  m.input_weight_bytes = 1000;
  m.output_weight_bytes = 2'000'000;
  for (int i = 0; i < 2; ++i) m.layers.push_back({1'000'000, 4, 2, 16, 16, 128, false});
  m.n_params = m.total_weight_bytes();
  m.file_bytes = 5'000'000;
  return m;
}

DeviceSpeed speed(double bw, double flops) {
  DeviceSpeed s;
  s.memory_bandwidth = bw;
  s.bandwidth_efficiency = 0.5;
  s.flops = flops;
  s.compute_efficiency = 0.5;
  return s;
}

Plan plan_for(const ModelProfile& m, uint32_t ctx, uint32_t parallel, const std::vector<Device>& devices) {
  PlanOptions o;
  o.n_ctx = ctx;
  o.n_parallel = parallel;
  auto p = plan_gguf(m, o, devices);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return p.ok() ? *p : Plan{};
}

const std::vector<Device> kCpu = {memory_target("cpu", "CPU", false, 64 * kGiB, 64 * kGiB)};

TEST(Speed, CpuOnlyByHand) {
  const ModelProfile m = two_layers();
  const Plan p = plan_for(m, 256, 1, kCpu);
  ASSERT_EQ(p.totals.kv_cache, 2u * 256 * (32 + 32) * 2);  // 65,536 bytes
  auto s = predict_speed(m, p, {speed(10e9, 1e12)}, 1e9);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_TRUE(s->known);
  // Reads: 2 layers + output (the embeddings are a row lookup) + the KV cache = 4,065,536 bytes.
  EXPECT_EQ(s->devices[0].bytes_per_token, 4'065'536u);
  // FLOPs: 2 per parameter (4,000,000) + attention 2 x 256 cells x 4 heads x (16 + 16) per layer.
  EXPECT_DOUBLE_EQ(s->devices[0].flops_per_token, 8'000'000.0 + 2 * 65'536.0);
  // Memory-bound: 4,065,536 / (10e9 x 0.5) s per token.
  EXPECT_NEAR(s->generation_tokens_per_s, 5e9 / 4'065'536.0, 1e-6);
  // Compute-bound prompt: 8,131,072 / (1e12 x 0.5) s per token.
  EXPECT_NEAR(s->prompt_tokens_per_s, 5e11 / 8'131'072.0, 1e-3);
  EXPECT_DOUBLE_EQ(s->load_seconds, 5e-3);  // 5 MB at 1 GB/s
  EXPECT_FALSE(s->assumptions.empty());
}

TEST(Speed, WithoutOverlapMemoryAndComputeAdd) {
  const ModelProfile m = two_layers();
  const Plan p = plan_for(m, 256, 1, kCpu);
  DeviceSpeed cpu = speed(10e9, 1e12);
  cpu.overlap = false;
  auto s = predict_speed(m, p, {cpu}, 0);
  ASSERT_TRUE(s.ok());
  EXPECT_NEAR(s->generation_tokens_per_s, 1.0 / (4'065'536.0 / 5e9 + 8'131'072.0 / 5e11), 1e-6);
}

TEST(Speed, ModelsThatFitInCacheAreFlagged) {
  const ModelProfile m = two_layers();
  const Plan p = plan_for(m, 256, 1, kCpu);
  DeviceSpeed cpu = speed(10e9, 1e12);
  auto flagged = [&](uint64_t cache) {
    cpu.cache_bytes = cache;
    auto s = predict_speed(m, p, {cpu}, 0);
    EXPECT_TRUE(s.ok());
    for (const auto& a : s->assumptions) {
      if (a.find("upper bound") != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(flagged(8ull << 20));   // 4 MB read per token, 8 MiB cache
  EXPECT_FALSE(flagged(6ull << 20));  // 6 MiB: the 4 MB are more than half of it
  EXPECT_FALSE(flagged(0));           // unknown
}

TEST(Speed, ParallelSequencesShareTheWeightReads) {
  const ModelProfile m = two_layers();
  const Plan p = plan_for(m, 1024, 4, kCpu);  // 4 streams of 256 cells
  ASSERT_EQ(p.totals.kv_cache, 4u * 65'536);
  auto s = predict_speed(m, p, {speed(10e9, 1e12)}, 0);
  ASSERT_TRUE(s.ok());
  // One step reads the weights once and every stream's KV, and yields 4 tokens.
  EXPECT_NEAR(s->generation_tokens_per_s, 4 * 5e9 / (4'000'000.0 + 4 * 65'536), 1e-6);
  EXPECT_EQ(s->load_seconds, 0);  // no storage figure: unknown
}

// The per-token overhead term: every node of a device's layers, and the step's fixed cost once.
TEST(Speed, PerTokenOverheadAddsToEachStep) {
  const ModelProfile m = two_layers();
  const Plan p = plan_for(m, 256, 1, kCpu);
  DeviceSpeed base = speed(10e9, 1e12);
  auto plain = predict_speed(m, p, {base}, 0);
  ASSERT_TRUE(plain.ok());
  DeviceSpeed with = base;
  with.seconds_per_node = 2e-6;
  with.seconds_per_step = 50e-6;
  auto s = predict_speed(m, p, {with}, 0);
  ASSERT_TRUE(s.ok());
  const double nodes = 2 * kGraphNodesPerLayer + kGraphNodesOutput;  // 2 layers + the output head
  EXPECT_NEAR(s->devices[0].overhead_seconds_per_step, nodes * 2e-6 + 50e-6, 1e-12);
  EXPECT_NEAR(1.0 / s->generation_tokens_per_s, 1.0 / plain->generation_tokens_per_s + nodes * 2e-6 + 50e-6,
              1e-12);
  bool said = false;
  for (const auto& a : s->assumptions) said = said || a.find("us per graph node") != std::string::npos;
  EXPECT_TRUE(said);
  // cpu_speed takes the measured barrier; a GPU from the catalogue has an assumed launch cost.
  hw::CpuInfo cpu;
  EXPECT_EQ(cpu_speed(cpu, 2, 2.5, 20e9, 1.5e-6).seconds_per_node, 1.5e-6);
  EXPECT_EQ(cpu_speed(cpu, 2, 2.5, 20e9).seconds_per_node, 0);
  // A "barrier" of milliseconds timed the scheduler, not the threads: the assumed cost stands in, said so.
  const DeviceSpeed busy = cpu_speed(cpu, 2, 2.5, 20e9, 3e-3);
  EXPECT_EQ(busy.seconds_per_node, kAssumedBarrierSeconds);
  EXPECT_NE(busy.overhead_source.find("did not run at once"), std::string::npos) << busy.overhead_source;
  EXPECT_EQ(gpu_speed(1000, 100, "G").seconds_per_node, kGpuSecondsPerNode);
  // The barrier itself: positive for two threads, nothing for one.
  EXPECT_GT(measure_thread_barrier(2, 5), 0);
  EXPECT_EQ(measure_thread_barrier(1, 5), 0);
}

TEST(Speed, ComputeBoundWhenFlopsAreScarce) {
  const ModelProfile m = two_layers();
  const Plan p = plan_for(m, 256, 1, kCpu);
  auto s = predict_speed(m, p, {speed(10e9, 1e9)}, 0);  // 1 GFLOP/s: compute dominates
  ASSERT_TRUE(s.ok());
  EXPECT_NEAR(s->generation_tokens_per_s, 0.5e9 / 8'131'072.0, 1e-9);
}

TEST(Speed, SplitDevicesAddTheirTimes) {
  const ModelProfile m = two_layers();
  const std::vector<Device> d = {memory_target("cpu", "CPU", false, 64 * kGiB, 64 * kGiB),
                                 memory_target("gpu:0", "A", true, 8 * kGiB, 8 * kGiB),
                                 memory_target("gpu:1", "B", true, 8 * kGiB, 8 * kGiB)};
  const Plan p = plan_for(m, 256, 1, d);
  // llama.cpp's split of 2 layers + output over two equal GPUs: layers 0-1 on the first, output on the
  // second.
  ASSERT_EQ(p.devices[1].layers, (std::vector<uint32_t>{0, 1}));
  ASSERT_TRUE(p.devices[2].has_output_layer);
  auto s = predict_speed(m, p, {DeviceSpeed{}, speed(10e9, 1e15), speed(20e9, 1e15)}, 0);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->known);  // the CPU holds no layers, so its unknown speed does not matter
  const double step = 2'065'536.0 / 5e9 + 2'000'000.0 / 10e9;
  EXPECT_NEAR(s->generation_tokens_per_s, 1.0 / step, 1e-6);
}

TEST(Speed, UnknownFiguresAndMismatchedSizes) {
  const ModelProfile m = two_layers();
  const Plan p = plan_for(m, 256, 1, kCpu);
  auto s = predict_speed(m, p, {DeviceSpeed{}}, 0);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->known);
  EXPECT_EQ(s->generation_tokens_per_s, 0);
  EXPECT_FALSE(predict_speed(m, p, {}, 0).ok());
}

TEST(Speed, CpuFiguresFromTheIsa) {
  EXPECT_EQ(flops_per_cycle({"sse4_2", "avx2", "fma", "avx512f"}), 64);
  EXPECT_EQ(flops_per_cycle({"avx2", "fma"}), 32);
  EXPECT_EQ(flops_per_cycle({"avx2"}), 8);
  EXPECT_EQ(flops_per_cycle({"asimd"}), 16);
  hw::CpuInfo cpu;
  cpu.isa = {"avx2", "fma"};
  const DeviceSpeed s = cpu_speed(cpu, 2, 2.5, 20e9);
  EXPECT_DOUBLE_EQ(s.flops, 2 * 2.5e9 * 32);
  EXPECT_EQ(s.flops_source, "estimated");
  EXPECT_EQ(s.bandwidth_source, "measured");
  EXPECT_DOUBLE_EQ(s.bandwidth_efficiency, kMeasuredBandwidthEfficiency);
  EXPECT_FALSE(s.overlap);
  EXPECT_TRUE(gpu_speed(1000, 100, "G").overlap);
  EXPECT_EQ(cpu_speed(cpu, 2, 2.5, 0).bandwidth_source, "");
}

TEST(Speed, StorageReadBandwidthByDeviceClass) {
  hw::BlockDevice nvme;
  nvme.name = "nvme0n1";
  nvme.nvme = true;
  nvme.rotational = false;
  EXPECT_DOUBLE_EQ(storage_read_bandwidth(nvme).bytes_per_s, kNvmeReadBytesPerS);
  nvme.link_bytes_per_s = 500'000'000;  // a gen-1 x2 link caps it
  EXPECT_DOUBLE_EQ(storage_read_bandwidth(nvme).bytes_per_s, 0.5e9);
  hw::BlockDevice disk;
  disk.name = "sda";
  disk.rotational = true;
  EXPECT_DOUBLE_EQ(storage_read_bandwidth(disk).bytes_per_s, kRotationalReadBytesPerS);
  EXPECT_NE(storage_read_bandwidth(disk).description.find("sda (rotational"), std::string::npos);
  disk.rotational = false;
  EXPECT_DOUBLE_EQ(storage_read_bandwidth(disk).bytes_per_s, kSsdReadBytesPerS);
  disk.rotational.reset();
  EXPECT_EQ(storage_read_bandwidth(disk).bytes_per_s, 0) << "unknown kind: unknown bandwidth";
}

TEST(Speed, MeasuredBandwidthIsPlausible) {
  const double bw = measure_memory_bandwidth(1, 50);
  EXPECT_GT(bw, 0.1e9);  // any machine that runs llama.cpp moves more than 100 MB/s
  EXPECT_LT(bw, 10e12);  // and less than 10 TB/s
}

}  // namespace
}  // namespace gantry::plan

// One model over several hosts: remote (RPC) devices in the exact planner and in the speed prediction.
#include <gtest/gtest.h>

#include "gantry/plan/planner.h"
#include "gantry/plan/speed.h"

namespace gantry::plan {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

ModelProfile layers(int n) {
  ModelProfile m;
  m.name = "synthetic";
  m.n_embd = 64;
  m.n_vocab = 1000;
  m.n_ctx_train = 4096;
  m.input_weight_bytes = 1000;
  m.output_weight_bytes = 100'000;
  for (int i = 0; i < n; ++i) m.layers.push_back({1'000'000, 4, 2, 16, 16, 128, false});
  m.n_params = m.total_weight_bytes();
  return m;
}

Device remote(int index, uint64_t free, std::string endpoint) {
  Device d = memory_target("rpc:" + std::to_string(index), "device 0 of " + endpoint, true, free, free);
  d.kind = hw::DeviceKind::kRemote;
  d.family = "rpc";
  hw::RemoteLink link;
  link.endpoint = std::move(endpoint);
  link.round_trip_s = 0.002;
  link.upload_bytes_per_s = 125'000'000;
  link.download_bytes_per_s = 125'000'000;
  d.remote = link;
  return d;
}

TEST(RpcPlan, TheCpuTakesItsShareAheadOfTheRemoteDevices) {
  // Free memory 2 : 1 : 1 over 12 layers: the CPU keeps the first 6; the other 6 and the output layer
  // (llama.cpp offloads from the end) split 1 : 1 the way llama.cpp splits them: 4 and 2 + the output layer.
  EXPECT_EQ(cpu_share_gpu_layers(12, 2.0, {1.0, 1.0}), 7);
  EXPECT_EQ(cpu_share_gpu_layers(12, 0.0, {1.0}), 13);  // nothing for the CPU: everything offloaded
  EXPECT_EQ(cpu_share_gpu_layers(12, 1.0, {}), 1);      // nothing else: only the output layer goes

  const ModelProfile m = layers(12);
  const std::vector<Device> devices = {memory_target("cpu", "CPU", false, 8 * kGiB, 8 * kGiB),
                                       remote(0, 4 * kGiB, "10.0.0.2:50052"),
                                       remote(1, 4 * kGiB, "10.0.0.3:50052")};
  PlanOptions o;
  o.n_ctx = 512;
  o.cpu_takes_share = true;
  auto p = plan_gguf(m, o, devices);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->devices.size(), 3u);
  EXPECT_EQ(p->devices[0].layers, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(p->devices[1].layers, (std::vector<uint32_t>{6, 7, 8, 9}));
  EXPECT_EQ(p->devices[2].layers, (std::vector<uint32_t>{10, 11}));
  EXPECT_TRUE(p->devices[2].has_output_layer);
  EXPECT_FALSE(p->devices[0].has_output_layer);
  // Each device carries its own layers' weights and KV cache, and a compute buffer for its graph.
  EXPECT_EQ(p->devices[1].predicted.weights, 4'000'000u);
  EXPECT_EQ(p->devices[2].predicted.weights, 2'100'000u);
  EXPECT_EQ(p->devices[1].predicted.kv_cache, 2 * p->devices[2].predicted.kv_cache);
  EXPECT_GT(p->devices[1].predicted.compute, 0u);
  EXPECT_GT(p->devices[2].predicted.compute, 0u);
  EXPECT_TRUE(p->fits);

  // Without the option (a host with GPUs), llama.cpp's default: everything offloaded by free memory.
  o.cpu_takes_share = false;
  auto all = plan_gguf(m, o, devices);
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->devices[0].layers.empty());
  EXPECT_EQ(all->devices[1].layers.size() + all->devices[2].layers.size(), 12u);
}

TEST(RpcSpeed, EachRemoteDeviceAddsARoundTripAndItsActivations) {
  const ModelProfile m = layers(4);
  const std::vector<Device> devices = {memory_target("cpu", "CPU", false, 8 * kGiB, 8 * kGiB),
                                       remote(0, 8 * kGiB, "10.0.0.2:50052")};
  PlanOptions o;
  o.n_ctx = 256;
  o.cpu_takes_share = true;
  auto p = plan_gguf(m, o, devices);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->devices[1].layers.size(), 2u);
  DeviceSpeed fast;
  fast.memory_bandwidth = 1e12;
  fast.bandwidth_efficiency = 1;
  fast.flops = 1e15;
  auto s = predict_speed(m, *p, {fast, fast}, 0);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_EQ(s->devices.size(), 2u);
  EXPECT_EQ(s->devices[0].network_bytes_per_step, 0u);  // this host
  // In: 64 activations f32 + a 256-cell f16 mask; out: 1000 logits f32 (it holds the output layer).
  const uint64_t in = 64 * 4 + 256 * 2, out = 1000 * 4;
  EXPECT_EQ(s->devices[1].network_bytes_per_step, in + out);
  EXPECT_NEAR(s->devices[1].network_seconds_per_step, 0.002 + (in + out) / 125e6, 1e-9);
  EXPECT_NEAR(s->network_seconds_per_step, s->devices[1].network_seconds_per_step, 1e-12);
  // The devices are nearly free here: the step is the network's.
  EXPECT_NEAR(1.0 / s->generation_tokens_per_s, s->network_seconds_per_step, 1e-4);
}

}  // namespace
}  // namespace gantry::plan

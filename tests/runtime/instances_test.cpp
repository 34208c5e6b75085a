// Strategies as instances: where each strategy puts a model's copies on the fixture machines, that several
// instances run requests at the same time (shown by the group's counters, never by timing), that each
// instance's memory is reserved and a device that cannot hold one more is refused with the numbers, and
// that real ONNX instances give the outputs of one.
#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/temp_dir.h"
#include "gantry/hw/detect.h"
#include "gantry/hw/query.h"
#include "gantry/hw/registry_json.h"
#include "gantry/model/manifest.h"
#include "gantry/model/sha256.h"
#include "gantry/runtime/instance_group.h"
#include "gantry/runtime/instance_layout.h"
#include "gantry/runtime/runtime.h"

namespace gantry::runtime {
namespace {

namespace fs = std::filesystem;
const fs::path kMlp = fs::path(GANTRY_DEPS_DIR) / "models" / "mlp_64_128_10.onnx";
constexpr uint64_t kMiB = 1ull << 20;

hw::Registry fixture_machine(const std::string& name) {
  auto machine = hw::make_disk_machine(std::string(GANTRY_SOURCE_DIR) + "/tests/fixtures/hw/" + name);
  auto loader = hw::make_null_loader();
  hw::DetectOptions o;
  o.use_vulkan = false;
  return hw::detect(*machine, *loader, o);
}

// The DGX fixture as NVML would complete it: 80 GiB per H100, cuda:1 the emptiest.
hw::Registry dgx_with_memory() {
  hw::Registry m = fixture_machine("nvidia-dgx-h100");
  for (auto& d : m.devices) {
    if (d.family != hw::kFamilyCuda) continue;
    d.memory_total_bytes = 80ull << 30;
    d.memory_free_bytes = (d.id == "cuda:1" ? 60ull : 40ull) << 30;
  }
  return m;
}

std::vector<std::string> devices_of(const InstanceLayout& l) { return l.devices; }

// The single-GPU VM's registry document (tests/fixtures/gpu-check), as `gantry detect --json` wrote it.
hw::Registry h100_vm_document() {
  std::ifstream in(std::string(GANTRY_SOURCE_DIR) +
                   "/tests/fixtures/gpu-check/nvidia-h100-vm/gantry-detect.json");
  std::stringstream text;
  text << in.rdbuf();
  auto r = hw::registry_from_json_text(text.str());
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : hw::Registry{};
}

InstanceRequest request(std::string strategy, std::string_view family, std::vector<int> chosen_ids,
                        std::vector<int> listed, int per_device) {
  InstanceRequest r;
  r.chosen.provider = family == hw::kFamilyCpu ? "cpu" : "cuda";
  r.chosen.strategy = model::parse_strategy(strategy).value();
  r.chosen.device_ids = std::move(chosen_ids);
  r.family = family;
  r.listed = std::move(listed);
  r.per_device = per_device;
  return r;
}

TEST(InstanceLayout, EachStrategyOnTheFixtureMachines) {
  const hw::Registry dgx = fixture_machine("nvidia-dgx-h100");  // 8 x H100
  ASSERT_EQ(hw::family_devices(dgx, hw::kFamilyCuda).size(), 8u);

  // auto: the factory's device, peak_concurrency copies there.
  auto a = plan_instances(request("auto", hw::kFamilyCuda, {3}, {}, 2), dgx);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(devices_of(*a), (std::vector<std::string>{"cuda:3", "cuda:3"}));
  EXPECT_EQ(a->instances[1].device_ids, std::vector<int>{3});

  // round-robin / data-parallel: one per listed device, or per device of the family.
  auto rr = plan_instances(request("round-robin", hw::kFamilyCuda, {2, 5}, {2, 5}, 1), dgx);
  ASSERT_TRUE(rr.ok()) << rr.status().to_string();
  EXPECT_EQ(devices_of(*rr), (std::vector<std::string>{"cuda:2", "cuda:5"}));
  auto dp = plan_instances(request("data-parallel", hw::kFamilyCuda, {0}, {}, 2), dgx);
  ASSERT_TRUE(dp.ok());
  ASSERT_EQ(dp->instances.size(), 16u);
  EXPECT_EQ(dp->devices.front(), "cuda:0");
  EXPECT_EQ(dp->devices.back(), "cuda:7");

  // pool: the device with the most free budget, chosen again at each load.
  std::map<std::string, uint64_t> free = {
      {"cuda:0", 10 * kMiB}, {"cuda:1", 50 * kMiB}, {"cuda:2", 30 * kMiB}};
  auto pool_req = request("pool", hw::kFamilyCuda, {0}, {0, 1, 2}, 1);
  pool_req.free_bytes = [&](const std::string& d) { return free.count(d) ? free.at(d) : 0; };
  auto p1 = plan_instances(pool_req, dgx);
  ASSERT_TRUE(p1.ok());
  EXPECT_EQ(devices_of(*p1), std::vector<std::string>{"cuda:1"});
  EXPECT_NE(p1->reason.find("cuda:1 has the most free memory"), std::string::npos) << p1->reason;
  free["cuda:1"] = 1 * kMiB;  // a later load sees cuda:1 filled
  auto p2 = plan_instances(pool_req, dgx);
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(devices_of(*p2), std::vector<std::string>{"cuda:2"});
  // Nothing listed: every device of the family takes part.
  pool_req.listed.clear();
  free = {{"cuda:6", 70 * kMiB}};
  EXPECT_EQ(devices_of(*plan_instances(pool_req, dgx)), std::vector<std::string>{"cuda:6"});

  // tensor-parallel: ONNX Runtime cannot split one model: refused with the reason; llama.cpp can.
  auto tp = request("tensor-parallel", hw::kFamilyCuda, {0, 1}, {0, 1}, 1);
  auto refused = plan_instances(tp, dgx);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(refused.status().message().find("splits one model"), std::string::npos);
  tp.model_parallel = tp.text_generation = true;
  auto split = plan_instances(tp, dgx);
  ASSERT_TRUE(split.ok()) << split.status().to_string();
  ASSERT_EQ(split->instances.size(), 1u);
  EXPECT_EQ(split->instances[0].device_ids, (std::vector<int>{0, 1}));

  // A text model gets one instance; one copy per device is refused for it with the way out.
  auto text_rr = request("round-robin", hw::kFamilyCuda, {0}, {0, 1}, 1);
  text_rr.text_generation = true;
  auto no = plan_instances(text_rr, dgx);
  ASSERT_FALSE(no.ok());
  EXPECT_NE(no.status().message().find("parallel sequences"), std::string::npos) << no.status().message();

  // round-robin on a one-GPU machine: one instance there.
  const hw::Registry vm = h100_vm_document();
  auto one = plan_instances(request("round-robin", hw::kFamilyCuda, {0}, {}, 1), vm);
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  EXPECT_EQ(devices_of(*one), std::vector<std::string>{"cuda:0"});

  // The CPU: copies share the physical cores unless threads were given.
  auto cpu = plan_instances(request("auto", hw::kFamilyCpu, {}, {}, 2), vm);
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(devices_of(*cpu), (std::vector<std::string>{"cpu", "cpu"}));
  const int cores = std::max(1, vm.cpu.physical_cores);
  EXPECT_EQ(cpu->instances[0].intra_op_threads, std::max(1, cores / 2));
  auto given = request("auto", hw::kFamilyCpu, {}, {}, 2);
  given.chosen.intra_op_threads = 3;
  EXPECT_EQ(plan_instances(given, vm)->instances[1].intra_op_threads, 3);
  EXPECT_FALSE(plan_instances(request("auto", hw::kFamilyCpu, {}, {}, 0), vm).ok());
}

// ---------------------------------------------------------------------------------- fake ONNX backend

// Calls wait at a gate until `expected` calls are inside at once (or the gate is opened); the wait is
// bounded so that a group that serialises calls fails the test instead of hanging it.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  int inside = 0;
  int expected = 0;
  bool met = false;
  void pass() {
    std::unique_lock lock(mu);
    ++inside;
    if (inside >= expected) met = true;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(60), [&] { return met; });
    --inside;
  }
};

class GateModel final : public backend::Model {
 public:
  GateModel(Gate* gate, std::string name, memory::BlockPool* pool) : gate_(gate), pool_(pool) {
    meta_.name = std::move(name);
    meta_.backend = "fake";
    meta_.format = "onnx";
    meta_.inputs.push_back({"x", DType::kFloat32, Shape({1}), {""}});
    meta_.outputs.push_back({"y", DType::kFloat32, Shape({1}), {""}});
    if (pool_) {
      auto p = pool_->allocate_for(meta_.name, 3 * kMiB);
      if (p.ok()) held_ = *p;
    }
  }
  ~GateModel() override {
    if (held_) (void)pool_->free(held_);
  }
  const backend::ModelMetadata& metadata() const override { return meta_; }
  Status init() override { return Status::Ok(); }
  Result<std::vector<backend::NamedTensor>> infer_one(std::span<const backend::NamedTensor> in) override {
    auto guard = enter();
    if (!guard.ok()) return guard.status();
    if (gate_) gate_->pass();
    return std::vector<backend::NamedTensor>{{"y", in[0].tensor}};
  }

 private:
  Gate* gate_;
  memory::BlockPool* pool_;
  void* held_ = nullptr;
  backend::ModelMetadata meta_;
};

class FakeOnnx final : public backend::Backend {
 public:
  Gate* gate = nullptr;
  const Runtime* runtime = nullptr;  // for its pools
  uint64_t estimate_bytes = 100 * kMiB;
  std::vector<backend::Placement> loads;
  backend::Capabilities caps = [] {
    backend::Capabilities c;
    c.formats = {"onnx"};
    c.families = {"cpu", "cuda"};
    return c;
  }();
  std::string_view name() const override { return "fake-onnx"; }
  std::string version() const override { return "1"; }
  const backend::Capabilities& capabilities() const override { return caps; }
  backend::Support supports(const hw::Device&) const override { return backend::Support::yes(); }
  std::vector<std::string> providers() const override { return {"cuda", "cpu"}; }
  backend::Support provider_available(std::string_view) const override { return backend::Support::yes(); }
  std::string_view provider_family(std::string_view p) const override {
    return p == "cuda" ? hw::kFamilyCuda : hw::kFamilyCpu;
  }
  Result<backend::MemoryEstimate> estimate_memory(const model::Package&,
                                                  const backend::Placement& p) override {
    backend::MemoryEstimate e;
    e.bytes[hw::memory_device_id(provider_family(p.provider), p.primary_device())] = estimate_bytes;
    e.basis = "fake estimate";
    return e;
  }
  Result<std::unique_ptr<backend::Model>> load(const model::Package&, const backend::Placement& p) override {
    loads.push_back(p);
    memory::BlockPool* pool =
        runtime ? runtime->pool(hw::memory_device_id(provider_family(p.provider), p.primary_device()))
                : nullptr;
    return std::unique_ptr<backend::Model>(std::make_unique<GateModel>(gate, p.model_name, pool));
  }
};

// A package of the MLP with these manifest fields over the defaults.
fs::path write_package(const fs::path& dir, const std::function<void(model::Manifest&)>& edit) {
  fs::create_directories(dir);
  fs::copy_file(kMlp, dir / "mlp.onnx", fs::copy_options::overwrite_existing);
  model::Manifest m;
  m.name = "mlp";
  m.version = "1.0.0";
  m.format = model::ModelFormat::kOnnx;
  m.model_file = "mlp.onnx";
  m.sha256["mlp.onnx"] = model::sha256_file(dir / "mlp.onnx").value();
  edit(m);
  EXPECT_TRUE(model::write_manifest(dir / "gantry.json", m).ok());
  return dir;
}

struct FakeRuntime {
  FakeOnnx* backend = nullptr;
  std::unique_ptr<Runtime> rt;
};

FakeRuntime fake_runtime(hw::Registry machine, std::string budget = {}) {
  RuntimeOptions o;
  o.memory_budget = std::move(budget);
  o.verdict_cache_dir = "none";
  o.keep_alive_timer = false;
  o.hardware = std::move(machine);
  auto b = std::make_unique<FakeOnnx>();
  FakeRuntime f;
  f.backend = b.get();
  o.backends.push_back(std::move(b));
  auto rt = Runtime::create(std::move(o));
  EXPECT_TRUE(rt.ok()) << rt.status().to_string();
  if (rt.ok()) f.rt = std::move(rt).value();
  f.backend->runtime = f.rt.get();
  return f;
}

hw::Registry cpu_machine(uint64_t ram = 64ull << 30) {
  hw::Registry m;
  hw::Device cpu;
  cpu.id = "cpu:0";
  cpu.kind = hw::DeviceKind::kCpu;
  cpu.family = hw::kFamilyCpu;
  cpu.memory_total_bytes = ram;
  m.devices.push_back(cpu);
  m.host.memory_total_bytes = m.host.memory_available_bytes = ram;
  m.cpu.physical_cores = m.cpu.logical_cores = 4;
  return m;
}

TEST(Instances, TwoInstancesRunTwoRequestsAtOnce) {
  ASSERT_TRUE(fs::exists(kMlp)) << kMlp;
  test_util::TempDir dir;
  auto f = fake_runtime(cpu_machine());
  Gate gate;
  gate.expected = 2;
  f.backend->gate = &gate;
  LoadOptions lo;
  lo.instances = 2;
  auto h = f.rt->load(kMlp.string(), lo);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  auto* group = dynamic_cast<InstanceGroup*>(&h->model());
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->metadata().instances, 2);
  ASSERT_EQ(f.backend->loads.size(), 2u);
  EXPECT_EQ(f.backend->loads[0].intra_op_threads, 2) << "4 cores shared by 2 instances";

  // Each call waits inside its instance until the other is inside too: they can only both return when
  // the group ran them at the same time, on different instances.
  Tensor x = Tensor::from_values<float>(DType::kFloat32, Shape({1}), {1.5f}).value();
  std::vector<backend::NamedTensor> in{{"x", x}};
  Result<std::vector<backend::NamedTensor>> r1 = Internal("not run"), r2 = Internal("not run");
  std::thread t1([&] { r1 = group->infer_one(in); });
  std::thread t2([&] { r2 = group->infer_one(in); });
  t1.join();
  t2.join();
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_TRUE(gate.met) << "the two requests never ran at the same time";
  EXPECT_EQ(group->peak_concurrent(), 2);
  const auto stats = group->instance_stats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].calls, 1u);
  EXPECT_EQ(stats[1].calls, 1u);
  EXPECT_EQ(group->stats().calls, 2u);

  // One client after another alternates between the instances.
  gate.expected = 1;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(group->infer_one(in).ok());
  EXPECT_EQ(group->instance_stats()[0].calls, 3u);
  EXPECT_EQ(group->instance_stats()[1].calls, 3u);
}

TEST(Instances, EachInstanceIsReservedAndOneTooManyIsRefusedWithTheNumbers) {
  ASSERT_TRUE(fs::exists(kMlp)) << kMlp;
  test_util::TempDir dir;
  const fs::path pkg =
      write_package(dir.path() / "pkg", [](model::Manifest& m) { m.runtime.peak_concurrency = 2; });
  {
    auto f = fake_runtime(cpu_machine(), "cpu=250MiB");
    auto h = f.rt->load(pkg.string());  // peak_concurrency 2 from the manifest
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    EXPECT_EQ(h->model().metadata().instances, 2);
    auto info = f.rt->manager().info("mlp");
    ASSERT_TRUE(info);
    EXPECT_EQ(info->reserved_bytes.at("cpu"), 200 * kMiB);
    EXPECT_NE(info->memory_basis.find("2 instance(s)"), std::string::npos) << info->memory_basis;
  }
  {
    auto f = fake_runtime(cpu_machine(), "cpu=250MiB");
    LoadOptions lo;
    lo.instances = 3;  // the flag over the manifest
    auto h = f.rt->load(pkg.string(), lo);
    ASSERT_FALSE(h.ok());
    EXPECT_EQ(h.status().code(), StatusCode::kResourceExhausted);
    const std::string& msg = h.status().message();
    EXPECT_NE(msg.find("instance 3 of 3 (cpu)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("250.0 MiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("300.0 MiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--instances"), std::string::npos) << msg;
    EXPECT_TRUE(f.backend->loads.empty()) << "refused before anything was loaded";
  }
}

TEST(Instances, StrategiesPlaceInstancesOnTheFixtureGpus) {
  ASSERT_TRUE(fs::exists(kMlp)) << kMlp;
  test_util::TempDir dir;
  const fs::path rr = write_package(dir.path() / "rr", [](model::Manifest& m) {
    m.name = "rr";
    m.hardware_requirements.strategy = model::Strategy::kRoundRobin;
    m.hardware_requirements.gpu_device_ids = {2, 5};
    m.runtime.peak_concurrency = 2;
  });
  auto f = fake_runtime(dgx_with_memory());
  auto h = f.rt->load(rr.string());
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  std::vector<std::string> where;
  for (const auto& s : dynamic_cast<InstanceGroup&>(h->model()).instance_stats()) where.push_back(s.device);
  EXPECT_EQ(where, (std::vector<std::string>{"cuda:2", "cuda:2", "cuda:5", "cuda:5"}));
  auto info = f.rt->manager().info("rr");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->reserved_bytes.at("cuda:2"), 200 * kMiB);
  EXPECT_EQ(info->reserved_bytes.at("cuda:5"), 200 * kMiB);
  EXPECT_EQ(info->reserved_bytes.count("cuda:0"), 0u);

  // pool: the GPU whose budget has the most room (cuda:1: 60 GiB free), chosen again at each load.
  const fs::path pool = write_package(dir.path() / "pool", [](model::Manifest& m) {
    m.name = "pool";
    m.hardware_requirements.strategy = model::Strategy::kPool;
    m.hardware_requirements.gpu_device_ids = {0, 1};
  });
  {
    auto p = f.rt->load(pool.string());
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(f.backend->loads.back().device_ids, std::vector<int>{1});
  }
  ASSERT_TRUE(f.rt->unload("pool").ok());
  // Another model takes 30 GiB of cuda:1: reloaded, the pool model goes to cuda:0 (36 GiB of budget left
  // there against 54 - 30 on cuda:1).
  const fs::path filler = write_package(dir.path() / "filler", [](model::Manifest& m) {
    m.name = "filler";
    m.hardware_requirements.device_id = 1;
  });
  f.backend->estimate_bytes = 30ull << 30;
  ASSERT_TRUE(f.rt->load(filler.string()).ok());
  EXPECT_EQ(f.backend->loads.back().device_ids, std::vector<int>{1});
  f.backend->estimate_bytes = 100 * kMiB;
  ASSERT_TRUE(f.rt->load(pool.string()).ok());
  EXPECT_EQ(f.backend->loads.back().device_ids, std::vector<int>{0});

  // tensor-parallel: the ONNX-like backend cannot split one model: refused with the reason.
  const fs::path tp = write_package(dir.path() / "tp", [](model::Manifest& m) {
    m.name = "tp";
    m.hardware_requirements.strategy = model::Strategy::kTensorParallel;
    m.hardware_requirements.gpu_device_ids = {0, 1};
  });
  auto refused = f.rt->load(tp.string());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("splits one model over devices"), std::string::npos)
      << refused.status().message();
}

TEST(Instances, RealOnnxInstancesGiveTheOutputsOfOne) {
  ASSERT_TRUE(fs::exists(kMlp)) << kMlp;
  RuntimeOptions o;
  o.verdict_cache_dir = "none";
  o.keep_alive_timer = false;
  auto rt = Runtime::create(std::move(o));
  ASSERT_TRUE(rt.ok()) << rt.status().to_string();
  LoadOptions one;
  one.name = "one";
  one.factory.intra_op_threads = 1;
  LoadOptions two = one;
  two.name = "two";
  two.instances = 2;
  auto h1 = (*rt)->load(kMlp.string(), one);
  auto h2 = (*rt)->load(kMlp.string(), two);
  ASSERT_TRUE(h1.ok() && h2.ok()) << h1.status().to_string() << h2.status().to_string();
  auto* group = dynamic_cast<InstanceGroup*>(&h2->model());
  ASSERT_NE(group, nullptr);
  std::vector<float> v(64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1f * static_cast<float>(i % 9) - 0.3f;
  std::vector<backend::NamedTensor> in{
      {"input", Tensor::from_values<float>(DType::kFloat32, Shape({1, 64}), v).value()}};
  auto want = h1->model().infer_one(in);
  ASSERT_TRUE(want.ok());
  std::vector<Result<std::vector<backend::NamedTensor>>> got(4, Internal("not run"));
  std::vector<std::thread> clients;
  for (size_t c = 0; c < got.size(); ++c) clients.emplace_back([&, c] { got[c] = group->infer_one(in); });
  for (auto& t : clients) t.join();
  for (const auto& g : got) {
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    ASSERT_EQ((*g)[0].tensor.byte_size(), (*want)[0].tensor.byte_size());
    EXPECT_EQ(std::memcmp((*g)[0].tensor.data(), (*want)[0].tensor.data(), (*want)[0].tensor.byte_size()), 0);
  }
  const auto stats = group->instance_stats();
  EXPECT_EQ(stats[0].calls + stats[1].calls, 4u);
  EXPECT_GE(stats[0].calls, 1u) << "both instances served";
  EXPECT_GE(stats[1].calls, 1u);
  // Two sessions: twice the reservation of one.
  auto i1 = (*rt)->manager().info("one");
  auto i2 = (*rt)->manager().info("two");
  EXPECT_EQ(i2->reserved_bytes.at("cpu"), 2 * i1->reserved_bytes.at("cpu"));
}

}  // namespace
}  // namespace gantry::runtime

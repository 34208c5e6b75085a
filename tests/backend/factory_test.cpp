// The provider factory with fake devices and a fake backend: every rejection reason, the policies,
// and the measured policy's verdict cache.
#include "gantry/backend/factory.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "core/log_capture.h"
#include "gantry/backend/capabilities.h"
#include "gantry/backend/registry.h"

namespace gantry::backend {
namespace {

class FakeBackend : public Backend {
 public:
  std::map<std::string, Support> available{{"cpu", Support::yes("built in")}};
  Capabilities caps;
  std::string_view name() const override { return "fake"; }
  std::string version() const override { return "1.0"; }
  const Capabilities& capabilities() const override { return caps; }
  Support supports(const hw::Device&) const override { return Support::yes(); }
  std::vector<std::string> providers() const override { return order; }
  std::vector<std::string> order = {"tensorrt", "cuda", "rocm", "cpu"};  // the fastest first
  Support provider_available(std::string_view p) const override {
    auto it = available.find(std::string(p));
    return it != available.end() ? it->second : Support::no(std::string(p) + " is not built in");
  }
  std::string_view provider_family(std::string_view p) const override {
    if (p == "cuda" || p == "tensorrt") return hw::kFamilyCuda;
    if (p == "rocm") return hw::kFamilyRocm;
    if (p == "cpu") return hw::kFamilyCpu;
    return "other";
  }
  Result<std::unique_ptr<Model>> load(const model::Package&, const Placement&) override {
    return Unsupported("fake");
  }
};

constexpr uint64_t kMiB = 1024 * 1024;

hw::Registry gpu_machine(uint64_t vram_mb = 16000, const char* cuda = "12.4") {
  hw::Registry m;
  hw::Device cpu;
  cpu.id = "cpu:0";
  cpu.kind = hw::DeviceKind::kCpu;
  cpu.family = hw::kFamilyCpu;
  cpu.name = "Fake CPU";
  cpu.memory_total_bytes = 32000 * kMiB;
  m.devices.push_back(cpu);
  hw::Device gpu;
  gpu.id = "cuda:0";
  gpu.kind = hw::DeviceKind::kGpu;
  gpu.family = hw::kFamilyCuda;
  gpu.name = "Fake H100";
  gpu.memory_total_bytes = vram_mb * kMiB;
  gpu.cuda_driver_version = cuda;
  m.devices.push_back(gpu);
  return m;
}

hw::Registry cpu_machine() {
  hw::Registry m = gpu_machine();
  m.devices.pop_back();
  return m;
}

const CandidateVerdict* find(const ProviderChoice& c, const std::string& p) {
  for (const auto& v : c.candidates)
    if (v.provider == p) return &v;
  return nullptr;
}

TEST(Factory, FastestAppendsMachineProvidersThenCpu) {
  FakeBackend b;
  b.available["cuda"] = Support::yes("plugin");
  ProviderRequest req;
  auto c = check_candidates(req, gpu_machine(), b, ProviderPolicy::kFastest);
  ASSERT_EQ(c.candidates.size(), 3u);  // tensorrt, cuda (machine has an NVIDIA GPU), cpu
  EXPECT_EQ(c.candidates[0].provider, "tensorrt");
  EXPECT_FALSE(c.candidates[0].viable);
  EXPECT_EQ(c.candidates[0].reason, "tensorrt is not built in");
  EXPECT_EQ(c.candidates[1].provider, "cuda");
  EXPECT_EQ(c.candidates[2].provider, "cpu");
  ASSERT_NE(c.chosen_verdict(), nullptr);
  EXPECT_EQ(c.chosen_verdict()->provider, "cuda");
  EXPECT_EQ(c.placement.provider, "cuda");
  EXPECT_EQ(c.placement.device_ids, std::vector<int>{0});
  // No GPU: only cpu is appended.
  auto cpu_only = check_candidates(req, cpu_machine(), b, ProviderPolicy::kFastest);
  ASSERT_EQ(cpu_only.candidates.size(), 1u);
  EXPECT_EQ(cpu_only.chosen_verdict()->provider, "cpu");
}

TEST(Factory, MachineProvidersFollowTheBackendsOwnOrder) {
  FakeBackend b;
  b.order = {"cuda", "tensorrt", "cpu"};  // a backend that prefers plain CUDA
  b.available["cuda"] = Support::yes("plugin");
  auto c = check_candidates(ProviderRequest{}, gpu_machine(), b, ProviderPolicy::kFastest);
  ASSERT_EQ(c.candidates.size(), 3u);
  EXPECT_EQ(c.candidates[0].provider, "cuda");
  EXPECT_EQ(c.candidates[1].provider, "tensorrt");
  EXPECT_EQ(c.candidates[2].provider, "cpu");
  // Providers the backend does not list are never candidates.
  b.order = {"cpu"};
  auto only_cpu = check_candidates(ProviderRequest{}, gpu_machine(), b, ProviderPolicy::kFastest);
  ASSERT_EQ(only_cpu.candidates.size(), 1u);
  EXPECT_EQ(only_cpu.candidates[0].provider, "cpu");
}

TEST(Factory, ManifestPolicyUsesOnlyWhatTheManifestNames) {
  FakeBackend b;
  ProviderRequest req;
  req.preferred_provider = "CUDAExecutionProvider";
  req.fallback_providers = {"cpu"};
  auto c = check_candidates(req, cpu_machine(), b, ProviderPolicy::kManifest);
  ASSERT_EQ(c.candidates.size(), 2u);
  EXPECT_EQ(c.candidates[0].provider, "cuda");
  EXPECT_EQ(c.candidates[0].origin, "manifest preferred");
  EXPECT_EQ(c.candidates[1].origin, "manifest fallback");
  EXPECT_EQ(c.chosen_verdict()->provider, "cpu");
  req.fallback_providers.clear();
  req.cpu_last_resort = false;  // an explicit --provider: that one or none
  auto none = check_candidates(req, cpu_machine(), b, ProviderPolicy::kManifest);
  EXPECT_EQ(none.chosen, -1);
  EXPECT_NE(none.explain().find("no viable provider"), std::string::npos);
}

TEST(Factory, ManifestPolicyFallsBackToTheCpuAsALastResort) {
  // kapsl's rule: a manifest naming only cuda loads on the CPU of a machine without one.
  FakeBackend b;
  ProviderRequest req;
  req.preferred_provider = "cuda";
  auto c = check_candidates(req, cpu_machine(), b, ProviderPolicy::kManifest);
  ASSERT_EQ(c.candidates.size(), 2u);
  EXPECT_FALSE(c.candidates[0].viable);
  ASSERT_NE(c.chosen_verdict(), nullptr);
  EXPECT_EQ(c.chosen_verdict()->provider, "cpu");
  EXPECT_EQ(c.chosen_verdict()->origin, "last resort");
  // Where the named provider works, the last resort is never taken.
  b.available["cuda"] = Support::yes("built in");
  auto gpu = check_candidates(req, gpu_machine(), b, ProviderPolicy::kManifest);
  EXPECT_EQ(gpu.chosen_verdict()->provider, "cuda");
  // A manifest that names the CPU itself gets no second one.
  req.fallback_providers = {"cpu"};
  auto named = check_candidates(req, cpu_machine(), b, ProviderPolicy::kManifest);
  ASSERT_EQ(named.candidates.size(), 2u);
  EXPECT_EQ(named.chosen_verdict()->origin, "manifest fallback");
}

TEST(Factory, FastestTriesTheMachinesAcceleratorsAfterAnAcceleratorOnlyList) {
  // Gantry's choice (kapsl appends them only to an empty or CPU-only list): a manifest naming cuda on a ROCm
  // machine runs on the ROCm device under `fastest`, not on the CPU.
  FakeBackend b;
  b.available["rocm"] = Support::yes("built in");
  hw::Registry rocm = cpu_machine();
  hw::Device gpu;
  gpu.id = "rocm:0";
  gpu.kind = hw::DeviceKind::kGpu;
  gpu.family = hw::kFamilyRocm;
  gpu.memory_total_bytes = 16000 * kMiB;
  rocm.devices.push_back(gpu);
  ProviderRequest req;
  req.preferred_provider = "cuda";
  auto c = check_candidates(req, rocm, b, ProviderPolicy::kFastest);
  ASSERT_NE(c.chosen_verdict(), nullptr);
  EXPECT_EQ(c.chosen_verdict()->provider, "rocm");
  EXPECT_EQ(c.chosen_verdict()->origin, "machine");
  // An explicit CPU is the author's choice: it comes before the machine's accelerators.
  req.preferred_provider = "cpu";
  auto cpu = check_candidates(req, rocm, b, ProviderPolicy::kFastest);
  EXPECT_EQ(cpu.chosen_verdict()->provider, "cpu");
}

TEST(Factory, MetalIsRefusedWithWhatItMeantInKapsl) {
  FakeBackend b;
  ProviderRequest req;
  req.preferred_provider = "metal";
  auto c = check_candidates(req, cpu_machine(), b, ProviderPolicy::kManifest);
  const auto* metal = find(c, "metal");
  ASSERT_NE(metal, nullptr);
  EXPECT_FALSE(metal->viable);
  EXPECT_NE(metal->reason.find("CoreML capped at its level 1"), std::string::npos) << metal->reason;
  EXPECT_NE(metal->reason.find("'coreml'"), std::string::npos) << metal->reason;
  EXPECT_EQ(c.chosen_verdict()->provider, "cpu");
}

TEST(Factory, EveryRejectionReason) {
  FakeBackend b;
  b.available["cuda"] = Support::yes("plugin");
  b.available["rocm"] = Support::yes("built in");
  struct Case {
    const char* what;
    ProviderRequest req;
    hw::Registry machine;
    std::string provider;
    std::string reason;
  };
  ProviderRequest base;
  base.preferred_provider = "cuda";
  std::vector<Case> cases;
  cases.push_back({"provider missing in runtime",
                   [&] {
                     auto r = base;
                     r.preferred_provider = "tensorrt";
                     return r;
                   }(),
                   gpu_machine(), "tensorrt", "tensorrt is not built in"});
  cases.push_back({"no hardware", base, cpu_machine(), "cuda", "no cuda device on this machine"});
  cases.push_back({"no amd hardware",
                   [&] {
                     auto r = base;
                     r.preferred_provider = "rocm";
                     return r;
                   }(),
                   gpu_machine(), "rocm", "no rocm device"});
  cases.push_back({"vram",
                   [&] {
                     auto r = base;
                     r.min_vram_mb = 40000;
                     return r;
                   }(),
                   gpu_machine(16000), "cuda", "needs 40000 MB of VRAM, cuda:0 has 16000 MB in total"});
  cases.push_back({"cuda version",
                   [&] {
                     auto r = base;
                     r.min_cuda_version = Version::parse("12.10").value();
                     return r;
                   }(),
                   gpu_machine(16000, "12.4"), "cuda", "needs CUDA >= 12.10, the driver supports CUDA 12.4"});
  cases.push_back({"device id",
                   [&] {
                     auto r = base;
                     r.device_id = 3;
                     return r;
                   }(),
                   gpu_machine(), "cuda", "device id 3 requested but this machine has 1 cuda device(s)"});
  cases.push_back({"strategy",
                   [&] {
                     auto r = base;
                     r.strategy = model::Strategy::kTensorParallel;
                     r.gpu_device_ids = {0};
                     return r;
                   }(),
                   gpu_machine(), "cuda", "strategy 'tensor-parallel' splits one model over devices"});
  cases.push_back({"host memory",
                   [&] {
                     auto r = base;
                     r.min_memory_mb = 64000;
                     return r;
                   }(),
                   gpu_machine(), "cuda", "needs 64000 MB of host memory, this machine has 32000 MB"});
  for (const auto& c : cases) {
    auto choice = check_candidates(c.req, c.machine, b, ProviderPolicy::kFastest);
    const auto* v = find(choice, c.provider);
    ASSERT_NE(v, nullptr) << c.what;
    EXPECT_FALSE(v->viable) << c.what;
    EXPECT_NE(v->reason.find(c.reason), std::string::npos) << c.what << ": " << v->reason;
  }
}

TEST(Factory, PolicyParsingAndEnvironment) {
  EXPECT_EQ(parse_provider_policy("measured").value(), ProviderPolicy::kMeasured);
  EXPECT_FALSE(parse_provider_policy("quickest").ok());
  ::setenv("GANTRY_PROVIDER_POLICY", "manifest", 1);
  EXPECT_EQ(resolve_provider_policy("").value(), ProviderPolicy::kManifest);
  EXPECT_EQ(resolve_provider_policy("fastest").value(), ProviderPolicy::kFastest);
  ::setenv("GANTRY_PROVIDER_POLICY", "nope", 1);
  // An unknown value in the environment is kapsl's `fastest` (with a warning); on the command line, an error.
  {
    test_util::LogCapture log;
    EXPECT_EQ(resolve_provider_policy("").value(), ProviderPolicy::kFastest);
    EXPECT_TRUE(log.has("[warning] GANTRY_PROVIDER_POLICY")) << log.text();
    EXPECT_TRUE(log.has("using 'fastest'")) << log.text();
  }
  EXPECT_FALSE(resolve_provider_policy("nope").ok());
  ::unsetenv("GANTRY_PROVIDER_POLICY");
  EXPECT_EQ(resolve_provider_policy("").value(), ProviderPolicy::kFastest);
  EXPECT_EQ(canonical_provider("DmlExecutionProvider"), "directml");
}

TEST(Factory, MeasuredPicksFastestAndCachesVerdicts) {
  FakeBackend b;
  b.available["cuda"] = Support::yes("plugin");
  const auto dir = std::filesystem::temp_directory_path() / ("gantry-verdicts-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  VerdictCache cache(dir.string());
  int measured = 0;
  MeasureContext ctx;
  ctx.model_sha256 = "abc";
  ctx.runtime_version = "fake-1.0";
  ctx.cache = &cache;
  ctx.measure = [&](const Placement& p, double budget_ms) -> Result<double> {
    ++measured;
    EXPECT_LE(budget_ms, 2000.0);
    return p.provider == "cpu" ? 50.0 : 80.0;  // the CPU wins here (a tiny model)
  };
  auto choice = check_candidates(ProviderRequest{}, gpu_machine(), b, ProviderPolicy::kMeasured);
  measure_candidates(choice, gpu_machine(), ctx);
  EXPECT_EQ(measured, 2);
  EXPECT_EQ(choice.chosen_verdict()->provider, "cpu");
  EXPECT_EQ(choice.placement.provider, "cpu");
  EXPECT_DOUBLE_EQ(*find(choice, "cuda")->median_us, 80.0);
  EXPECT_FALSE(find(choice, "cuda")->from_cache);
  // Second load: from the cache, nothing measured.
  auto again = check_candidates(ProviderRequest{}, gpu_machine(), b, ProviderPolicy::kMeasured);
  measure_candidates(again, gpu_machine(), ctx);
  EXPECT_EQ(measured, 2);
  EXPECT_TRUE(find(again, "cpu")->from_cache);
  EXPECT_EQ(again.chosen_verdict()->provider, "cpu");
  EXPECT_NE(again.explain().find("(cached)"), std::string::npos);
  // Another model (sha256) is measured afresh; a failing measurement rejects that candidate.
  ctx.model_sha256 = "def";
  ctx.measure = [&](const Placement& p, double) -> Result<double> {
    ++measured;
    if (p.provider == "cuda") return Unavailable("CUDA out of memory");
    return 10.0;
  };
  auto other = check_candidates(ProviderRequest{}, gpu_machine(), b, ProviderPolicy::kMeasured);
  measure_candidates(other, gpu_machine(), ctx);
  EXPECT_EQ(measured, 4);
  EXPECT_FALSE(find(other, "cuda")->viable);
  EXPECT_NE(find(other, "cuda")->reason.find("CUDA out of memory"), std::string::npos);
  EXPECT_EQ(other.chosen_verdict()->provider, "cpu");
  std::filesystem::remove_all(dir);
}

TEST(Factory, MeasuredFallsBackToPolicyOrderWhenNothingCanBeMeasured) {
  FakeBackend b;
  b.available["cuda"] = Support::yes("plugin");
  MeasureContext ctx;
  ctx.model_sha256 = "unmeasurable";
  ctx.runtime_version = "fake-1.0";
  ctx.measure = [](const Placement&, double) -> Result<double> {
    return InvalidArgument("synthesised inputs are not valid for this model");
  };
  auto choice = check_candidates(ProviderRequest{}, gpu_machine(), b, ProviderPolicy::kMeasured);
  const std::string first_viable = choice.chosen_verdict()->provider;
  measure_candidates(choice, gpu_machine(), ctx);
  ASSERT_NE(choice.chosen_verdict(), nullptr) << choice.explain();
  EXPECT_EQ(choice.chosen_verdict()->provider, first_viable);
  EXPECT_EQ(choice.placement.provider, first_viable);
  EXPECT_NE(choice.explain().find("no candidate could be measured"), std::string::npos) << choice.explain();
}

TEST(Capabilities, EveryMismatchHasAReason) {
  Capabilities caps;
  caps.dtypes = {DType::kFloat32};
  caps.families = {"cpu"};
  caps.max_batch = 8;
  caps.formats = {"onnx"};
  Requirements req;
  req.dtypes = {DType::kFloat32, DType::kFloat16};
  req.families = {"cuda"};
  req.batch = 16;
  req.dynamic_shapes = true;
  req.streams = true;
  req.text_generation = true;
  req.format = "gguf";
  auto why = mismatches(caps, req);
  EXPECT_EQ(why.size(), 7u);
  caps.dtypes.push_back(DType::kFloat16);
  caps.families.push_back("cuda");
  caps.max_batch = 0;
  caps.dynamic_shapes = caps.streams = caps.text_generation = true;
  caps.formats.push_back("gguf");
  EXPECT_TRUE(mismatches(caps, req).empty());
}

TEST(Registry, FindsByNameAndFormat) {
  BackendRegistry r;
  auto fake = std::make_unique<FakeBackend>();
  fake->caps.formats = {"onnx"};
  ASSERT_TRUE(r.add(std::move(fake)).ok());
  EXPECT_FALSE(r.add(std::make_unique<FakeBackend>()).ok());
  EXPECT_NE(r.find("fake"), nullptr);
  EXPECT_TRUE(r.for_format("onnx").ok());
  auto gguf = r.for_format("gguf");
  ASSERT_FALSE(gguf.ok());
  EXPECT_NE(gguf.status().message().find("fake"), std::string::npos);
  Requirements req;
  req.format = "gguf";
  auto m = r.match(req);
  EXPECT_TRUE(m.suitable.empty());
  ASSERT_EQ(m.rejected.size(), 1u);
}

}  // namespace
}  // namespace gantry::backend

// OnnxBackend through the loader: packages, providers, and the measured policy on a real model.
#include "gantry/backend/onnx/onnx_backend.h"

#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>

#include "core/log_capture.h"
#include "core/temp_dir.h"
#include "gantry/backend/loader.h"
#include "gantry/backend/onnx/onnx_model.h"
#include "gantry/backend/onnx/providers.h"
#include "gantry/hw/detect.h"
#include "gantry/model/manifest.h"
#include "gantry/model/package.h"
#include "gantry/model/sha256.h"

namespace gantry::onnx {
namespace {

namespace fs = std::filesystem;
const fs::path kMlp = fs::path(GANTRY_DEPS_DIR) / "models" / "mlp_64_128_10.onnx";

TEST(OnnxProviders, CpuBuiltInOthersUnavailableWithReasons) {
  EXPECT_TRUE(provider_available("cpu").ok);
  auto trt = provider_available("tensorrt");
  EXPECT_FALSE(trt.ok);
  EXPECT_NE(trt.reason.find("libnvinfer"), std::string::npos) << trt.reason;
  auto cuda = provider_available("cuda");
  if (!cuda.ok) {
    // Without the EP plugin: "...CUDA..."; with it but no driver: the loader's "libcuda.so.1: cannot open".
    std::string lower = cuda.reason;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_NE(lower.find("cuda"), std::string::npos) << cuda.reason;
  }
  auto rocm = provider_available("rocm");
  EXPECT_FALSE(rocm.ok);
  EXPECT_NE(rocm.reason.find("not built into"), std::string::npos) << rocm.reason;
  EXPECT_NE(provider_available("warp-drive").reason.find("unknown execution provider"), std::string::npos);
}

TEST(OnnxProviders, CudaPluginMissingOrNoDriverIsUnavailableNotACrash) {
  ::setenv("GANTRY_ORT_CUDA_EP", "/nonexistent/libonnxruntime_providers_cuda.so", 1);
  auto s = provider_available("cuda");
  ::unsetenv("GANTRY_ORT_CUDA_EP");
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("/nonexistent/libonnxruntime_providers_cuda.so"), std::string::npos) << s.reason;
  backend::Placement p;
  p.provider = "cuda";
  if (!fs::exists(kMlp)) FAIL() << kMlp << " missing";
  if (provider_available("cuda").ok) GTEST_SKIP() << "this machine has a working CUDA EP";
  auto m = OnnxModel::open(kMlp, p);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnavailable) << m.status().to_string();
}

TEST(OnnxBackend, LoadsABareModelThroughTheFactory) {
  if (!fs::exists(kMlp)) FAIL() << kMlp << " missing: run `make setup`";
  OnnxBackend backend;
  auto pkg = model::load_package(kMlp);
  ASSERT_TRUE(pkg.ok()) << pkg.status().to_string();
  backend::LoadOptions options;
  options.intra_op_threads = 1;
  auto loaded = backend::load_model(backend, *pkg, hw::detect_local_host(), options);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ(loaded->choice.placement.provider, "cpu");
  EXPECT_EQ(loaded->choice.placement.intra_op_threads, 1);
  EXPECT_EQ(loaded->model->metadata().name, "mlp_64_128_10");
  // --provider tensorrt: only that candidate, rejected with the reason.
  options.provider = "tensorrt";
  auto trt = backend::load_model(backend, *pkg, hw::detect_local_host(), options);
  ASSERT_FALSE(trt.ok());
  EXPECT_NE(trt.status().message().find("libnvinfer"), std::string::npos) << trt.status().message();
}

TEST(OnnxBackend, AManifestNamingOnlyCudaLoadsOnTheCpuWithAWarning) {
  // kapsl's last-resort CPU under the `manifest` policy, on a machine whose ONNX Runtime has no CUDA.
  if (!fs::exists(kMlp)) FAIL() << kMlp << " missing: run `make setup`";
  if (provider_available("cuda").ok) GTEST_SKIP() << "this machine has a working CUDA EP";
  test_util::TempDir dir;
  fs::copy_file(kMlp, dir.path() / "model.onnx");
  model::Manifest mf;
  mf.name = "cuda-only";
  mf.version = "1.0.0";
  mf.model_file = "model.onnx";
  mf.sha256["model.onnx"] = model::sha256_file(dir.path() / "model.onnx").value();
  mf.hardware_requirements.preferred_provider = "cuda";
  ASSERT_TRUE(model::write_manifest(dir.path() / "gantry.json", mf).ok());
  auto pkg = model::load_package(dir.path());
  ASSERT_TRUE(pkg.ok()) << pkg.status().to_string();
  OnnxBackend backend;
  backend::LoadOptions options;
  options.policy = backend::ProviderPolicy::kManifest;
  test_util::LogCapture log;
  auto loaded = backend::load_model(backend, *pkg, hw::detect_local_host(), options);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ(loaded->choice.placement.provider, "cpu");
  EXPECT_EQ(loaded->choice.chosen_verdict()->origin, "last resort");
  // Each attempt is logged: the refused cuda with its reason, then the warning.
  EXPECT_TRUE(log.has("[info] model 'cuda-only': provider cuda (manifest preferred) refused: "))
      << log.text();
  EXPECT_TRUE(log.has("[warning] model 'cuda-only': no provider its manifest names (cuda) can run here"))
      << log.text();
}

TEST(OnnxBackend, MeasuredPolicyTimesTheRealModelAndCachesIt) {
  if (!fs::exists(kMlp)) FAIL() << kMlp << " missing: run `make setup`";
  const auto dir = fs::temp_directory_path() / ("gantry-measured-" + std::to_string(::getpid()));
  OnnxBackend backend;
  auto pkg = model::load_package(kMlp);
  ASSERT_TRUE(pkg.ok());
  backend::VerdictCache cache(dir.string());
  backend::LoadOptions options;
  options.policy = backend::ProviderPolicy::kMeasured;
  options.cache = &cache;
  options.measure_single = true;
  options.measure_budget_ms = 100;
  options.intra_op_threads = 1;
  auto first = backend::choose_provider(backend, *pkg, hw::detect_local_host(), options);
  ASSERT_NE(first.chosen_verdict(), nullptr) << first.explain();
  ASSERT_TRUE(first.chosen_verdict()->median_us.has_value());
  EXPECT_GT(*first.chosen_verdict()->median_us, 0.0);
  EXPECT_FALSE(first.chosen_verdict()->from_cache);
  auto second = backend::choose_provider(backend, *pkg, hw::detect_local_host(), options);
  ASSERT_NE(second.chosen_verdict(), nullptr);
  EXPECT_TRUE(second.chosen_verdict()->from_cache);
  EXPECT_DOUBLE_EQ(*second.chosen_verdict()->median_us, *first.chosen_verdict()->median_us);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gantry::onnx

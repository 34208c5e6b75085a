// ONNX models measured in the runtime's pool (gantry/runtime/onnx_measure.h): where the batch is, what a
// measurement finds, the cache, and the runtime reserving from the cached profile instead of the rule of
// thumb.
#include "gantry/runtime/onnx_measure.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "gantry/model/manifest.h"
#include "gantry/model/sha256.h"
#include "gantry/runtime/runtime.h"

namespace gantry::runtime {
namespace {

namespace fs = std::filesystem;
const fs::path kModels = fs::path(GANTRY_DEPS_DIR) / "models";
const std::string kMlp = (kModels / "mlp_64_128_10.onnx").string();

backend::TensorInfo info(std::string name, std::vector<int64_t> dims, std::vector<std::string> names) {
  backend::TensorInfo t;
  t.name = std::move(name);
  t.shape = Shape(std::move(dims));
  t.dim_names = std::move(names);
  return t;
}

TEST(OnnxMeasureInputs, TheBatchFollowsTheFirstInputsLeadingSymbol) {
  // silero-like: the batch is dim 1 of "state", named like the first input's leading dim.
  const std::vector<backend::TensorInfo> inputs = {info("input", {-1, -1}, {"batch", "samples"}),
                                                   info("state", {2, -1, 128}, {"", "batch", ""}),
                                                   info("sr", {}, {})};
  InputShapes shapes;
  ASSERT_TRUE(parse_input_shape("input=1,512", shapes).ok());
  auto layout = input_layout(inputs, shapes);
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  EXPECT_TRUE(layout->batch_dynamic);
  EXPECT_EQ(layout->signature, "input=N,512;state=2,N,128;sr=");
  EXPECT_TRUE(layout->defaulted.empty());
  auto at4 = inputs_at_batch(inputs, shapes, 4);
  ASSERT_TRUE(at4.ok());
  EXPECT_EQ(at4->at("input"), Shape({4, 512}));
  EXPECT_EQ(at4->at("state"), Shape({2, 4, 128}));
  EXPECT_EQ(at4->at("sr"), Shape());

  // Without --shape the other dynamic dims are 1, and said so.
  layout = input_layout(inputs, {});
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->defaulted, (std::vector<std::string>{"input[1]"}));
}

TEST(OnnxMeasureInputs, FixedBatchAndBadShapes) {
  const std::vector<backend::TensorInfo> fixed = {info("x", {4, 3, -1, -1}, {"", "", "h", "w"})};
  auto layout = input_layout(fixed, {});
  ASSERT_TRUE(layout.ok());
  EXPECT_FALSE(layout->batch_dynamic);
  EXPECT_EQ(layout->fixed_batch, 4);
  EXPECT_EQ(layout->signature, "x=4,3,1,1");
  EXPECT_EQ(inputs_at_batch(fixed, {}, 2).status().code(), StatusCode::kInvalidArgument);

  InputShapes s;
  EXPECT_EQ(parse_input_shape("x", s).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse_input_shape("x=1,0", s).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse_input_shape("x=1,,3", s).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(parse_input_shape("x=4,3,640,640", s).ok());
  EXPECT_EQ(parse_input_shape("x=4,3,64,64", s).code(), StatusCode::kInvalidArgument);  // twice
  EXPECT_TRUE(input_layout(fixed, s).ok());
  InputShapes wrong_static{{"x", {4, 1, 640, 640}}};
  EXPECT_NE(input_layout(fixed, wrong_static).status().message().find("dimension 1 is 3"), std::string::npos);
  InputShapes wrong_rank{{"x", {4, 3}}};
  EXPECT_EQ(input_layout(fixed, wrong_rank).status().code(), StatusCode::kInvalidArgument);
  InputShapes unknown{{"y", {1}}};
  EXPECT_NE(input_layout(fixed, unknown).status().message().find("'y'"), std::string::npos);
}

class OnnxMeasure : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kMlp)) << kMlp << " is missing: run `make setup`";
    dir_ = fs::temp_directory_path() / ("gantry-onnx-measure-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  OnnxMeasureOptions options() const {
    OnnxMeasureOptions o;
    o.cache_dir = (dir_ / "cache").string();
    o.hardware = backend::local_machine();
    o.factory.provider = "cpu";  // the CPU pool is what is measured, whatever GPUs the machine has
    return o;
  }
  static RuntimeOptions runtime_options(std::string cache_dir) {
    RuntimeOptions o;
    o.verdict_cache_dir = std::move(cache_dir);
    o.keep_alive_timer = false;
    return o;
  }
  static LoadOptions cpu_only() {
    LoadOptions o;
    o.factory.provider = "cpu";
    return o;
  }
  static ModelInfo info_of(const Runtime& rt, const std::string& name) {
    for (const auto& m : rt.models())
      if (m.name == name) return m;
    return {};
  }
  fs::path dir_;
};

TEST_F(OnnxMeasure, MeasuresBothBaseBatchesCachesThemAndReadsThemBack) {
  OnnxMeasureOptions o = options();
  auto first = measure_onnx_memory(kMlp, o);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->measured, (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(first->cached.empty());
  ASSERT_FALSE(first->cache_file.empty());
  EXPECT_TRUE(fs::exists(first->cache_file));
  const auto& p = first->profile;
  EXPECT_TRUE(p.batch_dynamic);
  EXPECT_EQ(p.shapes, "input=N,64");
  ASSERT_EQ(p.points.size(), 2u);
  const plan::OnnxMemoryBytes& b1 = p.points[0].devices.at("cpu");
  const plan::OnnxMemoryBytes& b2 = p.points[1].devices.at("cpu");
  // 64x128 + 128x10 f32 weights and biases: at least their bytes, in the pool.
  EXPECT_GE(b1.weights, (64u * 128 + 128 + 128 * 10 + 10) * 4);
  EXPECT_GT(b1.activations, 0u);
  EXPECT_GT(b1.arena, 0u);
  EXPECT_GE(b2.activations, b1.activations);
  EXPECT_EQ(b2.weights, b1.weights);

  // Again: everything from the cache, nothing measured.
  auto second = measure_onnx_memory(kMlp, o);
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_TRUE(second->measured.empty());
  EXPECT_EQ(second->cached, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(plan::profile_to_json(second->profile), plan::profile_to_json(p));

  // Reading only: the same profile, without measuring.
  auto read = measure_onnx_memory(kMlp, o, /*measure=*/false);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->profile.points.size(), 2u);
  // Other input shapes are another profile: not mixed with these points.
  o.shapes["input"] = {1, 64};
  EXPECT_EQ(measure_onnx_memory(kMlp, o, false)->profile.points.size(), 2u);  // same shapes after all
}

TEST_F(OnnxMeasure, TheRuntimeReservesFromTheCachedProfile) {
  // Without a profile: the rule of thumb.
  uint64_t rule_of_thumb = 0;
  {
    auto rt = Runtime::create(runtime_options((dir_ / "cache").string()));
    ASSERT_TRUE(rt.ok()) << rt.status().message();
    auto h = (*rt)->load(kMlp, cpu_only());
    ASSERT_TRUE(h.ok()) << h.status().message();
    const ModelInfo m = info_of(**rt, "mlp_64_128_10");
    rule_of_thumb = m.reserved_bytes.at("cpu");
    EXPECT_EQ(rule_of_thumb, fs::file_size(kMlp) + fs::file_size(kMlp) / 4);
    EXPECT_EQ(m.memory_basis.find("memory profile"), std::string::npos) << m.memory_basis;
  }
  auto measured = measure_onnx_memory(kMlp, options());
  ASSERT_TRUE(measured.ok()) << measured.status().message();
  const auto at1 = plan::predict(measured->profile, 1);
  ASSERT_TRUE(at1.ok());
  {
    auto rt = Runtime::create(runtime_options((dir_ / "cache").string()));
    ASSERT_TRUE(rt.ok());
    auto h = (*rt)->load(kMlp, cpu_only());
    ASSERT_TRUE(h.ok()) << h.status().message();
    const ModelInfo m = info_of(**rt, "mlp_64_128_10");
    EXPECT_EQ(m.reserved_bytes.at("cpu"), at1->reservation());
    EXPECT_NE(m.reserved_bytes.at("cpu"), rule_of_thumb);
    EXPECT_NE(m.memory_basis.find("memory profile mlp_64_128_10.onnx at batch 1, measured at batch 1"),
              std::string::npos)
        << m.memory_basis;
  }
  // A package that batches up to 8 rows reserves the prediction at 8 (never measured) from 1 and 2.
  const fs::path pkg = dir_ / "pkg";
  fs::create_directories(pkg);
  fs::copy_file(kMlp, pkg / "mlp.onnx");
  model::Manifest mf;
  mf.name = "mlp-batched";
  mf.version = "1.0.0";
  mf.format = model::ModelFormat::kOnnx;
  mf.model_file = "mlp.onnx";
  mf.sha256["mlp.onnx"] = model::sha256_file(pkg / "mlp.onnx").value();
  mf.dynamic_batching = model::DynamicBatching{};
  mf.dynamic_batching->max_batch_size = 8;
  ASSERT_TRUE(model::write_manifest(pkg / "gantry.json", mf).ok());
  const auto at8 = plan::predict(measured->profile, 8);
  ASSERT_TRUE(at8.ok());
  EXPECT_FALSE(at8->measured);
  EXPECT_GT(at8->reservation(), at1->reservation());
  auto rt = Runtime::create(runtime_options((dir_ / "cache").string()));
  ASSERT_TRUE(rt.ok());
  auto h = (*rt)->load(pkg.string(), cpu_only());
  ASSERT_TRUE(h.ok()) << h.status().message();
  const ModelInfo m = info_of(**rt, "mlp-batched");
  EXPECT_EQ(m.reserved_bytes.at("cpu"), at8->reservation());
  EXPECT_NE(m.memory_basis.find("at batch 8, predicted from 1 and 2"), std::string::npos) << m.memory_basis;
  // With the cache off the profile is not consulted.
  auto off = Runtime::create(runtime_options("none"));
  ASSERT_TRUE(off.ok());
  auto h2 = (*off)->load(kMlp, cpu_only());
  ASSERT_TRUE(h2.ok());
  EXPECT_EQ(info_of(**off, "mlp_64_128_10").reserved_bytes.at("cpu"), rule_of_thumb);
}

TEST_F(OnnxMeasure, RefusesWhatIsNotAnOnnxModelAndABatchItCannotRun) {
  const std::string gguf = (kModels / "tiny-llama.gguf").string();
  ASSERT_TRUE(fs::exists(gguf));
  EXPECT_EQ(measure_onnx_memory(gguf, options()).status().code(), StatusCode::kInvalidArgument);
  OnnxMeasureOptions o = options();
  o.shapes["nope"] = {1};
  auto r = measure_onnx_memory(kMlp, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'nope'"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace gantry::runtime

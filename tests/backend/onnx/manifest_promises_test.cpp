// What a manifest promises, acted on by the ONNX backend: required_precision against the provider's kernels
// (a reason in the provider choice, which `gantry plan --explain` prints), runtime.bucket_max_dims bounding
// the dynamic dims (and so max_input_bytes / max_output_bytes, which admission enforces), and the device
// memory refusal of preferred_memory.
#include <gtest/gtest.h>
#include <onnxruntime_cxx_api.h>

#include <filesystem>
#include <memory>
#include <set>

#include "core/temp_dir.h"
#include "gantry/backend/loader.h"
#include "gantry/backend/onnx/onnx_backend.h"
#include "gantry/backend/onnx/onnx_model.h"
#include "gantry/hw/detect.h"
#include "gantry/model/manifest.h"
#include "gantry/model/package.h"
#include "gantry/model/sha256.h"
#include "gantry/runtime/runtime.h"

namespace gantry::onnx {
namespace {

namespace fs = std::filesystem;
const fs::path kMlp = fs::path(GANTRY_DEPS_DIR) / "models" / "mlp_64_128_10.onnx";

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

hw::Device device(std::string id, std::string family, std::optional<std::string> arch,
                  std::optional<std::string> cc) {
  hw::Device d;
  d.id = std::move(id);
  d.family = std::move(family);
  d.name = "test device";
  d.arch = std::move(arch);
  d.compute_capability = std::move(cc);
  return d;
}

TEST(RequiredPrecision, ProviderKernelsDecide) {
  OnnxBackend b;
  using model::Precision;
  const hw::Device x86 = device("cpu:0", "cpu", "x86_64", std::nullopt);
  const hw::Device arm = device("cpu:0", "cpu", "aarch64", std::nullopt);
  EXPECT_TRUE(b.precision_support("cpu", Precision::kFp32, &x86).ok);
  EXPECT_TRUE(b.precision_support("cpu", Precision::kInt8, &x86).ok);
  auto fp16 = b.precision_support("cpu", Precision::kFp16, &x86);
  EXPECT_FALSE(fp16.ok);
  EXPECT_NE(fp16.reason.find("fp16 kernels only on ARM64"), std::string::npos) << fp16.reason;
  EXPECT_TRUE(b.precision_support("cpu", Precision::kFp16, &arm).ok);
  EXPECT_FALSE(b.precision_support("cpu", Precision::kBf16, &arm).ok);

  const hw::Device t4 = device("cuda:0", "cuda", std::nullopt, "7.5");
  const hw::Device h100 = device("cuda:1", "cuda", std::nullopt, "9.0");
  EXPECT_TRUE(b.precision_support("cuda", Precision::kFp16, &t4).ok);
  auto bf16 = b.precision_support("cuda", Precision::kBf16, &t4);
  EXPECT_FALSE(bf16.ok);
  EXPECT_NE(bf16.reason.find("8.0"), std::string::npos) << bf16.reason;
  EXPECT_NE(bf16.reason.find("7.5"), std::string::npos) << bf16.reason;
  EXPECT_TRUE(b.precision_support("tensorrt", Precision::kBf16, &h100).ok);
}

TEST(RequiredPrecision, IsAReasonInTheProviderChoice) {
  ASSERT_TRUE(fs::exists(kMlp)) << kMlp;
  test_util::TempDir dir;
  const fs::path pkg = write_package(dir.path() / "fp16", [](model::Manifest& m) {
    m.hardware_requirements.required_precision = model::Precision::kBf16;
  });
  runtime::RuntimeOptions ro;
  ro.verdict_cache_dir = "none";
  ro.keep_alive_timer = false;
  auto rt = runtime::Runtime::create(std::move(ro));
  ASSERT_TRUE(rt.ok());
  auto ex = (*rt)->explain(pkg.string());
  ASSERT_TRUE(ex.ok()) << ex.status().to_string();
  const std::string text = ex->choice.explain();
  EXPECT_EQ(ex->choice.chosen, -1) << text;
  EXPECT_NE(text.find("cpu (default): rejected - needs bf16 precision: ONNX Runtime's CPU EP has no bf16"),
            std::string::npos)
      << text;
  // The load is refused with the same reason.
  auto h = (*rt)->load(pkg.string());
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("needs bf16 precision"), std::string::npos) << h.status().message();
}

TEST(BucketMaxDims, BoundTheDynamicDimsAndTheRequestSize) {
  ASSERT_TRUE(fs::exists(kMlp)) << kMlp;
  backend::Placement p;
  p.intra_op_threads = 1;
  auto unbounded = OnnxModel::open(kMlp, p);
  ASSERT_TRUE(unbounded.ok());
  EXPECT_EQ((*unbounded)->metadata().max_input_bytes, 0u) << "[batch,64]: unbounded";

  p.onnx.bucket_max_dims = {{"batch", 4}};
  auto m = OnnxModel::open(kMlp, p);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const backend::ModelMetadata& md = (*m)->metadata();
  EXPECT_EQ(md.max_input_bytes, 4u * 64 * 4);
  EXPECT_EQ(md.max_output_bytes, 4u * 10 * 4);
  auto rows = [](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n) * 64, 0.25f);
    return std::vector<backend::NamedTensor>{
        {"input", Tensor::from_values<float>(DType::kFloat32, Shape({n, 64}), v).value()}};
  };
  EXPECT_TRUE(backend::check_admission(md, rows(4)).ok());
  auto big = backend::check_admission(md, rows(5));
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(big.message().find("1280 bytes"), std::string::npos) << big.message();
  EXPECT_NE(big.message().find("1024 bytes"), std::string::npos) << big.message();
  // The model itself also refuses a dim beyond its bound, naming it.
  auto run = (*m)->infer_one(rows(5));
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("bucket_max_dims"), std::string::npos) << run.status().message();
  EXPECT_TRUE((*m)->infer_one(rows(4)).ok());

  // A bound on a dim the model does not have is a mistake in the manifest.
  p.onnx.bucket_max_dims = {{"sequence", 8}};
  auto wrong = OnnxModel::open(kMlp, p);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("'sequence'"), std::string::npos) << wrong.status().message();
}

// Shape buckets: the MLP's batch padded up to multiples of 4 and its logits trimmed back give the outputs of
// the plain model; one session per bucket, never more than kMaxDynamicBuckets.
TEST(ShapeBuckets, PaddedAndTrimmedOutputsEqualUnbucketedOnes) {
  ASSERT_TRUE(fs::exists(kMlp)) << kMlp;
  backend::Placement plain;
  plain.intra_op_threads = 1;
  backend::Placement bucketed = plain;
  bucketed.onnx.bucket_dim_granularity = 4;
  bucketed.onnx.bucket_dims = {{"input", {"batch"}}, {"logits", {"batch"}}};
  auto a = OnnxModel::open(kMlp, plain);
  auto b = OnnxModel::open(kMlp, bucketed);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().to_string();
  for (int64_t rows : {1, 3, 4, 5, 9, 2}) {
    std::vector<float> v(static_cast<size_t>(rows) * 64);
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.05f * static_cast<float>(i % 17) - 0.4f;
    std::vector<backend::NamedTensor> in{
        {"input", Tensor::from_values<float>(DType::kFloat32, Shape({rows, 64}), v).value()}};
    auto want = (*a)->infer_one(in);
    auto got = (*b)->infer_one(in);
    ASSERT_TRUE(want.ok() && got.ok()) << got.status().to_string();
    const Tensor& x = (*want)[0].tensor;
    const Tensor& y = (*got)[0].tensor;
    ASSERT_EQ(y.shape(), x.shape()) << rows;
    for (size_t i = 0; i < x.values<float>().size(); ++i)
      ASSERT_NEAR(y.values<float>()[i], x.values<float>()[i], 1e-5f) << rows << " rows, value " << i;
  }
  // Rows 1-4 -> bucket 4, 5-8 -> 8, 9 -> 12.
  auto sessions = (*b)->bucket_sessions();
  std::set<int64_t> sizes;
  for (const auto& s : sessions) sizes.insert(s.at("batch"));
  EXPECT_EQ(sizes, (std::set<int64_t>{4, 8, 12}));

  // A batched call (infer_batch) is bucketed too.
  std::vector<std::vector<backend::NamedTensor>> two(2);
  for (auto& r : two)
    r.push_back(
        {"input",
         Tensor::from_values<float>(DType::kFloat32, Shape({3, 64}), std::vector<float>(192, 0.5f)).value()});
  auto batch = (*b)->infer_batch(two);
  ASSERT_TRUE(batch.ok()) << batch.status().to_string();
  EXPECT_EQ((*batch)[1][0].tensor.shape(), Shape({3, 10}));

  // Granularity 1 and many sizes: never more than kMaxDynamicBuckets sessions.
  bucketed.onnx.bucket_dim_granularity = 1;
  auto c = OnnxModel::open(kMlp, bucketed);
  ASSERT_TRUE(c.ok());
  for (int64_t rows = 1; rows <= static_cast<int64_t>(kMaxDynamicBuckets) + 3; ++rows) {
    std::vector<float> v(static_cast<size_t>(rows) * 64, 0.25f);
    std::vector<backend::NamedTensor> in{
        {"input", Tensor::from_values<float>(DType::kFloat32, Shape({rows, 64}), v).value()}};
    ASSERT_TRUE((*c)->infer_one(in).ok());
  }
  EXPECT_EQ((*c)->bucket_sessions().size(), kMaxDynamicBuckets);

  // bucket_dims on a static dim, or without a granularity: refused at load, naming it.
  backend::Placement wrong = plain;
  wrong.onnx.bucket_dim_granularity = 4;
  wrong.onnx.bucket_dims = {{"input", {"features"}}};
  auto w = OnnxModel::open(kMlp, wrong);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("'features'"), std::string::npos) << w.status().message();
  wrong.onnx.bucket_dim_granularity.reset();
  wrong.onnx.bucket_dims = {{"input", {"batch"}}};
  EXPECT_NE(OnnxModel::open(kMlp, wrong).status().message().find("bucket_dim_granularity"),
            std::string::npos);
}

TEST(ShapeBuckets, PadAndTrimKeepTheLeadingCorner) {
  auto t = Tensor::from_values<float>(DType::kFloat32, Shape({2, 3}), {1, 2, 3, 4, 5, 6}).value();
  auto p = pad_to(t, Shape({3, 4}));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(std::vector<float>(p->values<float>().begin(), p->values<float>().end()),
            (std::vector<float>{1, 2, 3, 0, 4, 5, 6, 0, 0, 0, 0, 0}));
  auto back = trim_to(*p, Shape({2, 3}));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::vector<float>(back->values<float>().begin(), back->values<float>().end()),
            (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_FALSE(pad_to(t, Shape({1, 3})).ok());
  EXPECT_FALSE(trim_to(t, Shape({2, 4})).ok());
}

// The manifest's io must agree with the model: names, dtypes and declared shapes.
TEST(ManifestIo, DisagreementsAreRefusedAtLoad) {
  ASSERT_TRUE(fs::exists(kMlp)) << kMlp;
  test_util::TempDir dir;
  auto load = [&](const std::string& sub, const std::function<void(model::IoSpec&)>& edit) {
    const fs::path pkg = write_package(dir.path() / sub, [&](model::Manifest& m) {
      model::IoSpec io;
      io.inputs.push_back({"input", DType::kFloat32, Shape({Shape::kDynamic, 64}), {"batch", ""}, {}});
      io.outputs.push_back({"logits", DType::kFloat32, Shape({Shape::kDynamic, 10}), {"batch", ""}, {}});
      edit(io);
      m.io = io;
    });
    auto p = model::load_package(pkg.string());
    EXPECT_TRUE(p.ok()) << p.status().to_string();
    OnnxBackend backend;
    backend::Placement placement;
    placement.intra_op_threads = 1;
    return backend.load(*p, placement).status();
  };
  EXPECT_TRUE(load("ok", [](model::IoSpec&) {}).ok());
  EXPECT_TRUE(load("narrower",
                   [](model::IoSpec& io) {
                     io.inputs[0].shape = Shape({8, 64});
                     io.inputs[0].dim_names.clear();
                   })
                  .ok())
      << "a fixed size where the model is dynamic is a narrowing, not a disagreement";
  auto shape = load("shape", [](model::IoSpec& io) { io.outputs[0].shape = Shape({Shape::kDynamic, 12}); });
  EXPECT_NE(shape.message().find("says shape"), std::string::npos) << shape.message();
  auto rank = load("rank", [](model::IoSpec& io) {
    io.inputs[0].shape = Shape({64});
    io.inputs[0].dim_names.clear();
  });
  EXPECT_NE(rank.message().find("says shape"), std::string::npos) << rank.message();
  auto dtype = load("dtype", [](model::IoSpec& io) { io.inputs[0].dtype = DType::kFloat16; });
  EXPECT_NE(dtype.message().find("says dtype f16"), std::string::npos) << dtype.message();
  auto name = load("name", [](model::IoSpec& io) { io.outputs[0].name = "probabilities"; });
  EXPECT_NE(name.message().find("'probabilities'"), std::string::npos) << name.message();
}

// cpu_arena: ORT's own CPU memory is an arena (with allocation statistics) only when it is on.
TEST(SessionOptionsArena, CpuArenaDecidesWhatOrtAllocatesFrom) {
  ASSERT_TRUE(fs::exists(kMlp)) << kMlp;
  auto arena_stats = [&](bool arena) {
    backend::Placement p;
    p.intra_op_threads = 1;
    p.onnx.cpu_arena = arena;
    auto m = OnnxModel::open(kMlp, p);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    Ort::MemoryInfo info = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
    Ort::Allocator a((*m)->session(), info);
    try {
      return a.GetStats().GetKeyValuePairs().size();
    } catch (const Ort::Exception&) {
      return size_t{0};
    }
  };
  EXPECT_GT(arena_stats(true), 0u) << "an arena reports its statistics";
  EXPECT_EQ(arena_stats(false), 0u) << "the plain CPU allocator has none";
}

TEST(Admission, OutputsAndMemoryClass) {
  backend::ModelMetadata md;
  md.name = "m";
  md.provider = "cpu";
  md.inputs.push_back({"x", DType::kFloat32, Shape({Shape::kDynamic, 4}), {"n", ""}});
  md.outputs.push_back({"y", DType::kFloat32, Shape({Shape::kDynamic, 100}), {"n", ""}});
  md.max_output_bytes = 2 * 100 * 4;
  auto in = [](int64_t n, MemoryClass where) {
    auto storage = std::make_shared<std::vector<float>>(64);
    return std::vector<backend::NamedTensor>{
        {"x", Tensor::adopt(DType::kFloat32, Shape({n, 4}), storage->data(), static_cast<size_t>(n) * 16,
                            storage, where, 0)
                  .value()}};
  };
  EXPECT_TRUE(backend::check_admission(md, in(2, MemoryClass::kHost)).ok());
  EXPECT_TRUE(backend::check_admission(md, in(2, MemoryClass::kPinned)).ok());
  auto out = backend::check_admission(md, in(3, MemoryClass::kHost));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(out.message().find("outputs would be 1200 bytes"), std::string::npos) << out.message();
  // preferred_memory: a host model refuses device tensors, a device model host ones, with the reason.
  auto dev = backend::check_admission(md, in(1, MemoryClass::kDevice));
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.code(), StatusCode::kUnsupported);
  EXPECT_NE(dev.message().find("host (or pinned) tensors"), std::string::npos) << dev.message();
  md.preferred_memory = MemoryClass::kDevice;
  EXPECT_TRUE(backend::check_admission(md, in(1, MemoryClass::kDevice)).ok());
  EXPECT_FALSE(backend::check_admission(md, in(1, MemoryClass::kHost)).ok());
}

}  // namespace
}  // namespace gantry::onnx

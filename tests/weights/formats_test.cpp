// Every format and dtype, from files written by numpy / onnx / gguf-py, compared byte for byte.
#include <gtest/gtest.h>

#include "weights/weight_files.h"

namespace gantry::weights {
namespace {

using testing::expect_matches;
using testing::weight_files;

const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new testing::WeightFilesCleanup);

class Formats : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(weight_files().empty()) << "make_weights.py failed (python3 + numpy + onnx)";
  }
  WeightLoader open(const std::string& rel, LoadOptions o = {}) {
    auto src = WeightSource::open((weight_files() / rel).string());
    EXPECT_TRUE(src.ok()) << src.status().to_string();
    auto l = WeightLoader::open(*src, std::move(o));
    EXPECT_TRUE(l.ok()) << l.status().to_string();
    return std::move(*l);
  }
};

TEST_F(Formats, SafetensorsEveryDtype) {
  auto l = open("all.safetensors");
  EXPECT_EQ(l.metadata().format, WeightFormat::kSafetensors);
  EXPECT_EQ(l.metadata().tensors.size(), 17u);
  EXPECT_EQ(l.metadata().metadata.at("format"), "pt");
  EXPECT_EQ(l.metadata().metadata.at("note"), "written by numpy");
  expect_matches(l, "all.safetensors");
}

TEST_F(Formats, SafetensorsViewsAreZeroCopyIntoTheMapping) {
  auto src = WeightSource::file(weight_files() / "all.safetensors");
  ASSERT_TRUE(src.ok());
  auto l = WeightLoader::open(*src);
  ASSERT_TRUE(l.ok());
  auto w = l->load({"f32"});
  ASSERT_TRUE(w.ok());
  const auto* base = src->mapped();
  const auto* p = static_cast<const std::byte*>(w->data.data());
  EXPECT_TRUE(p >= base && p + w->data.byte_size() <= base + src->size()) << "not a view into the mapping";
  // Owned copies are not.
  LoadOptions copy;
  copy.zero_copy = false;
  auto owned = WeightLoader::open(*src, copy);
  auto c = owned->load({"f32"});
  ASSERT_TRUE(c.ok());
  const auto* q = static_cast<const std::byte*>(c->data.data());
  EXPECT_FALSE(q >= base && q < base + src->size());
  EXPECT_EQ(0, std::memcmp(p, q, c->data.byte_size()));
}

TEST_F(Formats, AllocatorGivesTheDestination) {
  std::vector<std::string> asked;
  auto arena = std::make_shared<std::vector<std::byte>>(1 << 16);
  size_t used = 0;
  LoadOptions o;
  o.allocate = [&](uint64_t bytes, const std::string& name) -> Result<Allocation> {
    asked.push_back(name);
    if (used + bytes > arena->size()) return ResourceExhausted("budget");
    Allocation a{arena->data() + used, arena};
    used += bytes;
    return a;
  };
  auto l = open("all.safetensors", o);
  auto w = l.load({"f64"});
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(asked, std::vector<std::string>{"f64"});
  EXPECT_EQ(w->data.data(), arena->data());
  EXPECT_EQ(used, 48u);
  // A budget that says no is the load's error.
  used = arena->size();
  auto refused = l.load({"f32"});
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
}

TEST_F(Formats, CheckpointDirectoryWithShardsAndConfig) {
  auto l = open("ckpt");
  const auto& m = l.metadata();
  EXPECT_EQ(m.format, WeightFormat::kSafetensorsIndex);
  ASSERT_EQ(m.shards.size(), 2u);
  EXPECT_EQ(m.shards[0], "model-00001-of-00002.safetensors");
  EXPECT_NE(m.config_json.find("TinyModel"), std::string::npos);
  EXPECT_EQ(m.metadata.at("total_size"), std::to_string(m.total_bytes));
  EXPECT_EQ(m.find("lm_head.weight")->shard, "model-00002-of-00002.safetensors");
  expect_matches(l, "ckpt");
  // The index named directly works the same.
  auto idx = open("ckpt/model.safetensors.index.json");
  EXPECT_EQ(idx.metadata().tensors.size(), 4u);
}

TEST_F(Formats, NumpyNpyAndNpzStoredAndDeflated) {
  auto npy = open("single.npy");
  EXPECT_EQ(npy.metadata().format, WeightFormat::kNpy);
  expect_matches(npy, "single.npy");
  for (const char* f : {"stored.npz", "deflated.npz"}) {
    auto l = open(f);
    EXPECT_EQ(l.metadata().format, WeightFormat::kNpz);
    EXPECT_EQ(l.metadata().tensors.size(), 5u);
    expect_matches(l, f);
  }
}

TEST_F(Formats, OnnxInitializersWithExternalData) {
  auto l = open("onnx/model.onnx");
  EXPECT_EQ(l.metadata().format, WeightFormat::kOnnx);
  ASSERT_EQ(l.metadata().shards, std::vector<std::string>{"weights.bin"});
  EXPECT_EQ(l.metadata().find("w1")->shard, "weights.bin");
  EXPECT_EQ(l.metadata().find("small")->shard, "");
  expect_matches(l, "model.onnx");
}

TEST_F(Formats, GgufPlainAndQuantisedTensors) {
  auto l = open("tiny.gguf");
  EXPECT_EQ(l.metadata().format, WeightFormat::kGguf);
  EXPECT_EQ(l.metadata().metadata.at("general.architecture"), "llama");
  auto q = l.load({"q8_0"});
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(q->quantised());
  EXPECT_EQ(q->shape, (Shape{2, 256}));  // ggml dims reversed to row-major
  expect_matches(l, "tiny.gguf");
}

TEST_F(Formats, MemorySourcesOwnedAndBorrowed) {
  const std::string bytes = testing::slurp(weight_files() / "all.safetensors");
  auto borrowed =
      WeightLoader::open(WeightSource::borrowed(std::as_bytes(std::span(bytes.data(), bytes.size()))));
  ASSERT_TRUE(borrowed.ok()) << borrowed.status().to_string();
  expect_matches(*borrowed, "all.safetensors");
  auto owned =
      WeightLoader::open(WeightSource::owned(testing::slurp(weight_files() / "deflated.npz"), "deflated"));
  ASSERT_TRUE(owned.ok()) << owned.status().to_string();
  expect_matches(*owned, "deflated.npz");
  auto gguf = WeightLoader::open(WeightSource::owned(testing::slurp(weight_files() / "tiny.gguf"), "tiny"));
  ASSERT_TRUE(gguf.ok()) << gguf.status().to_string();
  expect_matches(*gguf, "tiny.gguf");
}

TEST_F(Formats, PyTorchPicklesAreRefusedWithAdvice) {
  for (const char* f : {"torch.pt", "bare.pickle-data", "renamed.npz"}) {
    SCOPED_TRACE(f);
    auto src = WeightSource::open((weight_files() / f).string());
    ASSERT_TRUE(src.ok());
    auto m = metadata(*src);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(m.status().message().find("convert it to safetensors"), std::string::npos)
        << m.status().message();
    EXPECT_NE(m.status().message().find(f), std::string::npos);
  }
}

TEST_F(Formats, LoadManyAndMissingNames) {
  auto l = open("all.safetensors");
  auto many = l.load_many({{"u8"}, {"i64"}});
  ASSERT_TRUE(many.ok());
  EXPECT_EQ((*many)[1].name, "i64");
  auto missing = l.load({"nope"});
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("all.safetensors"), std::string::npos);
  EXPECT_TRUE(l.preload().ok());
  EXPECT_FALSE(capabilities().formats.empty());
}

}  // namespace
}  // namespace gantry::weights

namespace gantry::weights {
namespace {

// Specs with targets and transformations, through the loader.
TEST_F(Formats, QuantisedGgufAsF32IsGgmlsDequantisation) {
  auto l = open("tiny.gguf");
  const auto expected = nlohmann::json::parse(testing::slurp(weight_files() / "expected" / "tiny.gguf.json"));
  for (const char* q : {"q8_0", "q4_0", "q6_K"}) {
    SCOPED_TRACE(q);
    auto w = l.load({q, DType::kFloat32});
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    EXPECT_FALSE(w->quantised());
    EXPECT_EQ(w->shape, (Shape{2, 256}));
    const std::string want =
        testing::slurp(weight_files() / "expected" / "tiny.gguf" / (std::string(q) + ".f32.bin"));
    ASSERT_EQ(w->data.byte_size(), want.size());
    EXPECT_EQ(0, std::memcmp(w->data.data(), want.data(), want.size()))
        << "differs from gguf-py's dequantize";
  }
}

TEST_F(Formats, TransformsApplyInOrderAndTargetsConvertAtTheEnd) {
  auto l = open("all.safetensors");
  auto src = l.load({"f32"});
  ASSERT_TRUE(src.ok());
  const auto in = src->data.values<float>();  // [3,5]
  auto t = l.load({"f32", DType::kFloat64, {Transpose{{1, 0}}, Slice{{SliceDim{1, 3, 1}}}}});
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(std::get<DType>(t->type), DType::kFloat64);
  ASSERT_EQ(t->shape, (Shape{2, 3}));
  const auto out = t->data.values<double>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      EXPECT_EQ(out[static_cast<size_t>(i * 3 + j)],
                static_cast<double>(in[static_cast<size_t>(j * 5 + i + 1)]));
  // The source view is untouched, and a failing transform names the tensor.
  auto bad = l.load({"f32", std::nullopt, {Reshape{{7}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"f32\""), std::string::npos) << bad.status().message();
  // A ggml block target quantises.
  auto q = open("tiny.gguf").load({"f32", WeightType{model::GgmlType::kQ8_0}});
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_TRUE(q->quantised());
  EXPECT_EQ(q->data.byte_size(), 4u * 2 * 34);
}

TEST_F(Formats, TransformedWeightsLandInAllocatorMemory) {
  auto arena = std::make_shared<std::vector<std::byte>>(4096);
  LoadOptions o;
  o.allocate = [&](uint64_t bytes, const std::string&) -> Result<Allocation> {
    if (bytes > arena->size()) return ResourceExhausted("budget");
    return Allocation{arena->data(), arena};
  };
  auto l = open("all.safetensors", o);
  auto w = l.load({"f16", DType::kFloat32});
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->data.data(), arena->data());
  EXPECT_EQ(w->data.dtype(), DType::kFloat32);
}

}  // namespace
}  // namespace gantry::weights

// Runtime::load of a model in memory (model::ModelSource): the bundled ONNX models and the tiny GGUF give
// the same outputs, memory estimate and reservation from their bytes as from their files, nothing is
// written to disk, and damaged bytes are errors that name the source, never a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "gantry/core/file_io.h"
#include "gantry/model/memory_image.h"
#include "gantry/model/model_source.h"
#include "gantry/runtime/runtime.h"
#include "runtime/greedy_tokens.h"

namespace gantry::runtime {
namespace {

namespace fs = std::filesystem;
const fs::path kModels = fs::path(GANTRY_DEPS_DIR) / "models";
const fs::path kTinyLlama = kModels / "tiny-llama.gguf";
const fs::path kMlp = kModels / "mlp_64_128_10.onnx";
const fs::path kSilero = kModels / "silero_vad_v5.onnx";

RuntimeOptions test_options() {
  RuntimeOptions o;
  o.verdict_cache_dir = "none";
  o.keep_alive_timer = false;
  return o;
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

model::ModelSource from_bytes(const std::string& bytes, std::string name,
                              std::optional<model::ModelFormat> format = std::nullopt) {
  auto src = model::ModelSource::copy_of(as_bytes(bytes), std::move(name), format);
  EXPECT_TRUE(src.ok()) << src.status().message();
  return src.ok() ? std::move(*src) : model::ModelSource{};
}

LoadOptions named(std::string name) {
  LoadOptions o;
  o.name = std::move(name);
  // Small and single-threaded: quick on a busy machine.
  o.factory.llama.n_ctx = 256;
  o.factory.intra_op_threads = 1;
  return o;
}

std::vector<uint8_t> raw_output(ModelHandle& h, std::vector<NamedTensor> in) {
  auto out = h->infer_one(in);
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok() || out->empty()) return {};
  const auto* p = static_cast<const uint8_t*>((*out)[0].tensor.data());
  return {p, p + (*out)[0].tensor.byte_size()};
}

std::vector<uint8_t> run_mlp(ModelHandle& h) {
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i % 7) - 1.0f;
  return raw_output(h, {{h->metadata().inputs[0].name,
                         Tensor::from_values<float>(DType::kFloat32, Shape({1, 64}), x).value()}});
}

std::vector<uint8_t> run_silero(ModelHandle& h) {
  std::vector<float> audio(512), state(2 * 128, 0.0f);
  for (size_t i = 0; i < audio.size(); ++i) audio[i] = 0.5f * std::sin(0.1f * static_cast<float>(i));
  return raw_output(
      h, {{"input", Tensor::from_values<float>(DType::kFloat32, Shape({1, 512}), audio).value()},
          {"state", Tensor::from_values<float>(DType::kFloat32, Shape({2, 1, 128}), state).value()},
          {"sr", Tensor::from_values<int64_t>(DType::kInt64, Shape(), {16000}).value()}});
}

using runtime::testing::greedy_tokens;

uint64_t reserved(const Runtime& rt, const std::string& name) {
  for (const auto& m : rt.models())
    if (m.name == name) return m.reserved_bytes.count("cpu") ? m.reserved_bytes.at("cpu") : 0;
  ADD_FAILURE() << "no model " << name;
  return 0;
}

#define REQUIRE(p) ASSERT_TRUE(fs::exists(p)) << (p) << " is missing: run `make setup` (it makes the models)"

TEST(LoadFromBytes, OnnxModelsGiveTheSameOutputsAndReservationAsTheirFiles) {
  REQUIRE(kMlp);
  REQUIRE(kSilero);
  auto rt = Runtime::create(test_options());
  ASSERT_TRUE(rt.ok()) << rt.status().message();
  for (const fs::path& file : {kMlp, kSilero}) {
    SCOPED_TRACE(file.string());
    auto run = file == kMlp ? run_mlp : run_silero;
    const std::string stem = file.stem().string();
    auto from_file = (*rt)->load(file.string(), named(stem + "-file"));
    ASSERT_TRUE(from_file.ok()) << from_file.status().message();
    const std::string bytes = file_bytes(file);
    auto from_mem = (*rt)->load(from_bytes(bytes, "https://models.example/" + file.filename().string()),
                                named(stem + "-bytes"));
    ASSERT_TRUE(from_mem.ok()) << from_mem.status().message();
    const auto expected = run(*from_file);
    ASSERT_FALSE(expected.empty());
    EXPECT_EQ(run(*from_mem), expected);
    // Charged to the budget as the file is.
    EXPECT_GT(reserved(**rt, stem + "-bytes"), 0u);
    EXPECT_EQ(reserved(**rt, stem + "-bytes"), reserved(**rt, stem + "-file"));
    // The model list shows where it came from.
    auto info = (*rt)->manager().info(stem + "-bytes");
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->source, "https://models.example/" + file.filename().string());
    EXPECT_EQ((*from_mem)->metadata().backend, "onnxruntime");
  }
}

TEST(LoadFromBytes, TheDefaultNameComesFromTheSourceName) {
  REQUIRE(kMlp);
  auto rt = Runtime::create(test_options());
  ASSERT_TRUE(rt.ok()) << rt.status().message();
  auto h = (*rt)->load(from_bytes(file_bytes(kMlp), "https://h/dir/mlp_64_128_10.onnx?download=1"));
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->name(), "mlp_64_128_10");
  // No name in the source: the format hint says what it is, the model is called "model".
  auto hinted = (*rt)->load(from_bytes(file_bytes(kMlp), "https://h/", model::ModelFormat::kOnnx));
  ASSERT_TRUE(hinted.ok()) << hinted.status().message();
  EXPECT_EQ(hinted->name(), "model");
}

TEST(LoadFromBytes, GgufGivesTheSameGreedyTokensAsItsFile) {
  REQUIRE(kTinyLlama);
  auto rt = Runtime::create(test_options());
  ASSERT_TRUE(rt.ok()) << rt.status().message();
  std::vector<int32_t> expected;
  {
    auto from_file = (*rt)->load(kTinyLlama.string(), named("tiny-file"));
    ASSERT_TRUE(from_file.ok()) << from_file.status().message();
    expected = greedy_tokens(*from_file);
  }  // the handle goes: nothing waits to unload
  ASSERT_FALSE(expected.empty());
  ASSERT_TRUE((*rt)->unload("tiny-file").ok());

  for (bool mmap : {true, false}) {
    SCOPED_TRACE(mmap ? "mapped" : "read");
    LoadOptions o = named(mmap ? "tiny-mapped" : "tiny-read");
    o.factory.llama.mmap = mmap;
    {
      auto from_mem = (*rt)->load(from_bytes(file_bytes(kTinyLlama), "tiny-llama.gguf"), o);
      ASSERT_TRUE(from_mem.ok()) << from_mem.status().message();
      EXPECT_EQ(greedy_tokens(*from_mem), expected);
    }
    ASSERT_TRUE((*rt)->unload(o.name).ok());
  }
}

TEST(LoadFromBytes, EstimatesTheSameMemoryAsTheFile) {
  REQUIRE(kTinyLlama);
  REQUIRE(kMlp);
  auto rt = Runtime::create(test_options());
  ASSERT_TRUE(rt.ok()) << rt.status().message();
  for (const fs::path& file : {kTinyLlama, kMlp}) {
    SCOPED_TRACE(file.string());
    auto a = (*rt)->explain(file.string());
    auto b = (*rt)->explain(from_bytes(file_bytes(file), file.filename().string()));
    ASSERT_TRUE(a.ok()) << a.status().message();
    ASSERT_TRUE(b.ok()) << b.status().message();
    ASSERT_TRUE(a->memory.has_value());
    ASSERT_TRUE(b->memory.has_value());
    EXPECT_EQ(b->memory->bytes, a->memory->bytes);
    EXPECT_EQ(b->model_sha256, a->model_sha256);
    EXPECT_EQ(b->choice.placement.provider, a->choice.placement.provider);
  }
}

TEST(LoadFromBytes, TheModelLivesInASealedMemoryFileNotOnDisk) {
  REQUIRE(kTinyLlama);
  const std::string bytes = file_bytes(kTinyLlama);
  auto src = model::ModelSource::copy_of(as_bytes(bytes), "tiny-llama.gguf");
  ASSERT_TRUE(src.ok()) << src.status().message();
  auto pkg = model::load_package(*src);
  ASSERT_TRUE(pkg.ok()) << pkg.status().message();
  EXPECT_EQ(pkg->kind(), model::PackageKind::kMemory);
  EXPECT_EQ(pkg->manifest().format, model::ModelFormat::kGguf);
  EXPECT_EQ(pkg->manifest().name, "tiny-llama");
  // Its path is the image's descriptor, which the kernel names as an anonymous memory file.
  const fs::path target = fs::read_symlink(pkg->model_path());
  EXPECT_TRUE(target.string().starts_with("/memfd:gantry:tiny-llama.gguf")) << target;
  EXPECT_EQ(fs::file_size(pkg->model_path()), bytes.size());
  // Sealed: no write can reach it, not even through its own descriptor.
  const int fd = (*src).image->fd();
  EXPECT_LT(::pwrite(fd, "X", 1, 0), 0);
  EXPECT_LT(::ftruncate(fd, 10), 0);
  EXPECT_EQ(std::memcmp(pkg->image()->bytes().data(), bytes.data(), bytes.size()), 0);
}

// Damaged or unrecognisable bytes are errors naming the source (the parsers themselves are fuzzed by
// fuzz/): never a crash, never a model.
TEST(LoadFromBytes, DamagedBytesAreErrorsNotCrashes) {
  REQUIRE(kTinyLlama);
  REQUIRE(kMlp);
  auto rt = Runtime::create(test_options());
  ASSERT_TRUE(rt.ok()) << rt.status().message();
  const std::string gguf = file_bytes(kTinyLlama);
  const std::string onnx = file_bytes(kMlp);
  std::string garbage(4096, '\0');
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>((i * 2654435761u) >> 13);
  std::string tar(1024, '\0');
  std::memcpy(tar.data() + 257, "ustar", 5);

  struct Case {
    std::string what, bytes, name;
    std::optional<model::ModelFormat> format;
    StatusCode code;
  };
  const std::vector<Case> cases = {
      {"empty", "", "empty.onnx", std::nullopt, StatusCode::kCorrupt},
      {"garbage named .gguf", garbage, "garbage.gguf", std::nullopt, StatusCode::kCorrupt},
      {"garbage named .onnx", garbage, "garbage.onnx", std::nullopt, StatusCode::kCorrupt},
      {"garbage with no name", garbage, "https://h/blob", std::nullopt, StatusCode::kInvalidArgument},
      {"GGUF hinted as ONNX", gguf, "m", model::ModelFormat::kOnnx, StatusCode::kCorrupt},
      {"a package archive", tar, "p.tar", std::nullopt, StatusCode::kUnsupported},
      {"GGUF magic only", gguf.substr(0, 4), "t.gguf", std::nullopt, StatusCode::kOk},
      {"GGUF header only", gguf.substr(0, 200), "t.gguf", std::nullopt, StatusCode::kOk},
      {"GGUF cut in half", gguf.substr(0, gguf.size() / 2), "t.gguf", std::nullopt, StatusCode::kOk},
      {"GGUF missing its last byte", gguf.substr(0, gguf.size() - 1), "t.gguf", std::nullopt,
       StatusCode::kOk},
      {"ONNX cut in half", onnx.substr(0, onnx.size() / 2), "t.onnx", std::nullopt, StatusCode::kOk},
      {"ONNX first bytes", onnx.substr(0, 16), "t.onnx", std::nullopt, StatusCode::kOk},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto h = (*rt)->load(from_bytes(c.bytes, c.name, c.format), named("damaged"));
    ASSERT_FALSE(h.ok()) << "loaded";
    // kOk above: any error will do (which layer notices depends on where the bytes stop).
    if (c.code != StatusCode::kOk) {
      EXPECT_EQ(h.status().code(), c.code) << h.status().message();
    }
    EXPECT_NE(h.status().message().find(c.name), std::string::npos) << h.status().message();
  }
  // The runtime is still fine: the real model loads after all that.
  auto good = (*rt)->load(from_bytes(onnx, "mlp.onnx"), named("good"));
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_FALSE(run_mlp(*good).empty());
}

TEST(LoadFromBytes, AUrlNeedsAFetcher) {
  auto rt = Runtime::create(test_options());
  ASSERT_TRUE(rt.ok()) << rt.status().message();
  auto h = (*rt)->load("http://127.0.0.1:1/tiny.gguf");
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument) << h.status().message();
  // With one, the URL is fetched into memory and loaded from there.
  RuntimeOptions o = test_options();
  int fetched = 0;
  o.fetch_url = [&](const std::string& url, uint64_t max_bytes) -> Result<model::ModelSource> {
    ++fetched;
    EXPECT_GT(max_bytes, 0u);
    return model::ModelSource::copy_of(as_bytes(file_bytes(kMlp)), url);
  };
  auto rt2 = Runtime::create(std::move(o));
  ASSERT_TRUE(rt2.ok()) << rt2.status().message();
  auto m = (*rt2)->load("http://127.0.0.1:1/mlp.onnx");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->name(), "mlp");
  EXPECT_FALSE(run_mlp(*m).empty());
  // Loaded already: the handle comes back without fetching again.
  auto again = (*rt2)->load("http://127.0.0.1:1/mlp.onnx");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(fetched, 1);
}

}  // namespace
}  // namespace gantry::runtime

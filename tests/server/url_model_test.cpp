// Models at http(s) URLs: `gantry serve URL` lists them in the repository by name, and loading one fetches
// it from a loopback server (tests/weights/http_server.py) into memory, never onto disk, with the same
// outputs as its file. A server that fails or sends bad bytes is an error naming the URL.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "gantry/model/model_repository.h"
#include "gantry/runtime/runtime.h"
#include "gantry/weights/fetch_model.h"
#include "runtime/greedy_tokens.h"
#include "weights/http_fixture.h"

namespace gantry::server {
namespace {

namespace fs = std::filesystem;
using weights::testing::HttpServer;
const fs::path kModels = fs::path(GANTRY_DEPS_DIR) / "models";
const fs::path kTinyLlama = kModels / "tiny-llama.gguf";
const fs::path kMlp = kModels / "mlp_64_128_10.onnx";

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A private directory (removed with the test): the server's root, and an empty TMPDIR.
class TempDir {
 public:
  TempDir() {
    std::string t = (fs::temp_directory_path() / "gantry-url-model-XXXXXX").string();
    if (::mkdtemp(t.data()) != nullptr) path_ = t;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Points TMPDIR at `dir` for its lifetime.
class TmpdirOverride {
 public:
  explicit TmpdirOverride(const fs::path& dir) {
    if (const char* v = ::getenv("TMPDIR")) old_ = v;
    ::setenv("TMPDIR", dir.c_str(), 1);
  }
  ~TmpdirOverride() {
    if (old_) {
      ::setenv("TMPDIR", old_->c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
  }

 private:
  std::optional<std::string> old_;
};

class UrlModel : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kTinyLlama)) << kTinyLlama << " is missing: run `make setup`";
    ASSERT_TRUE(fs::exists(kMlp)) << kMlp << " is missing: run `make setup`";
    ASSERT_FALSE(root_.path().empty());
    fs::create_symlink(kTinyLlama, root_.path() / "tiny-llama.gguf");
    fs::create_symlink(kMlp, root_.path() / "mlp_64_128_10.onnx");
    const std::string gguf = file_bytes(kTinyLlama);
    std::ofstream(root_.path() / "half.gguf", std::ios::binary) << gguf.substr(0, gguf.size() / 2);
    std::ofstream(root_.path() / "garbage.gguf", std::ios::binary) << std::string(4096, 'x');
    std::ofstream(root_.path() / "garbage.onnx", std::ios::binary) << std::string(4096, '\xff');
    server_ = std::make_unique<HttpServer>(root_.path().string());
    ASSERT_TRUE(server_->ok()) << "the loopback HTTP server did not start";
  }

  static std::unique_ptr<runtime::Runtime> make_runtime() {
    runtime::RuntimeOptions o;
    o.verdict_cache_dir = "none";
    o.keep_alive_timer = false;
    o.fetch_url = [](const std::string& url, uint64_t max_bytes) {
      return weights::fetch_model_source(url, max_bytes);
    };
    auto rt = runtime::Runtime::create(std::move(o));
    EXPECT_TRUE(rt.ok()) << rt.status().message();
    return rt.ok() ? std::move(*rt) : nullptr;
  }

  TempDir root_;
  std::unique_ptr<HttpServer> server_;
};

using runtime::testing::greedy_tokens;

std::vector<uint8_t> run_mlp(runtime::ModelHandle& h) {
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i % 7) - 1.0f;
  std::vector<backend::NamedTensor> in{
      {h->metadata().inputs[0].name, Tensor::from_values<float>(DType::kFloat32, Shape({1, 64}), x).value()}};
  auto out = h->infer_one(in);
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok() || out->empty()) return {};
  const auto* p = static_cast<const uint8_t*>((*out)[0].tensor.data());
  return {p, p + (*out)[0].tensor.byte_size()};
}

runtime::LoadOptions named(std::string name) {
  runtime::LoadOptions o;
  o.name = std::move(name);
  // Small and single-threaded: quick on a busy machine.
  o.factory.llama.n_ctx = 256;
  o.factory.intra_op_threads = 1;
  return o;
}

std::string maps() { return file_bytes("/proc/self/maps"); }

TEST_F(UrlModel, TheRepositoryListsAUrlAndItLoadsWithoutAFileOnDisk) {
  auto rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  std::vector<int32_t> expected;
  {
    auto h = rt->load(kTinyLlama.string(), named("from-file"));
    ASSERT_TRUE(h.ok()) << h.status().message();
    expected = greedy_tokens(*h);
  }
  ASSERT_FALSE(expected.empty());
  ASSERT_TRUE(rt->unload("from-file").ok());

  const std::string url = server_->url("range/tiny-llama.gguf");
  model::ModelRepository repo;
  ASSERT_TRUE(repo.add(url).ok());
  auto entry = repo.find("tiny-llama");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->source.string(), url);
  ASSERT_TRUE(repo.add(url).ok()) << "the same URL twice is one model";

  TempDir tmp;
  {
    TmpdirOverride tmpdir(tmp.path());
    auto h = rt->load(entry->source.string(), named(entry->runtime_name));
    ASSERT_TRUE(h.ok()) << h.status().message();
    EXPECT_EQ(greedy_tokens(*h), expected);
    auto info = rt->manager().info("tiny-llama");
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->source, url);
    // llama.cpp maps the sealed memory file: the weights are in memory, under no path on disk.
    EXPECT_NE(maps().find("/memfd:gantry:tiny-llama.gguf"), std::string::npos);
    EXPECT_EQ(maps().find(kTinyLlama.string()), std::string::npos);
  }
  // No file there holds the model (ONNX Runtime may leave its own small logs).
  for (const auto& e : fs::recursive_directory_iterator(tmp.path())) {
    if (!e.is_regular_file()) continue;
    EXPECT_LT(e.file_size(), 65536u) << e.path();
    EXPECT_NE(file_bytes(e.path()).substr(0, 4), "GGUF") << e.path();
  }
}

TEST_F(UrlModel, AnOnnxModelFromAServerThatIgnoresRangeGivesTheFilesOutputs) {
  auto rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  auto file = rt->load(kMlp.string(), named("mlp-file"));
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto url = rt->load(server_->url("norange/mlp_64_128_10.onnx"));
  ASSERT_TRUE(url.ok()) << url.status().message();
  EXPECT_EQ(url->name(), "mlp_64_128_10");
  const auto expected = run_mlp(*file);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(run_mlp(*url), expected);
}

TEST_F(UrlModel, FailuresAreErrorsNamingTheUrl) {
  auto rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  struct Case {
    std::string path;
    StatusCode code;
  };
  for (const Case& c :
       std::vector<Case>{{"range/missing.gguf", StatusCode::kNotFound},
                         {"range/garbage.gguf", StatusCode::kCorrupt},
                         {"range/garbage.onnx", StatusCode::kCorrupt},
                         {"short/tiny-llama.gguf", StatusCode::kIoError},
                         {"drop/tiny-llama.gguf", StatusCode::kIoError},
                         {"range/half.gguf", StatusCode::kOk},  // any error: the GGUF reader's
                         {"redirect", StatusCode::kOk}}) {
    SCOPED_TRACE(c.path);
    const std::string url = server_->url(c.path);
    auto h = rt->load(url, named("bad"));
    ASSERT_FALSE(h.ok());
    if (c.code != StatusCode::kOk) {
      EXPECT_EQ(h.status().code(), c.code) << h.status().message();
    }
    // The URL, or for a damaged model the file part of it.
    const std::string named = c.path.substr(c.path.find('/') + 1);
    EXPECT_NE(h.status().message().find(named), std::string::npos) << h.status().message();
  }
  // Larger than the memory it may take: refused before the body is fetched.
  auto big = weights::fetch_model_source(server_->url("range/tiny-llama.gguf"), 1000);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted) << big.status().message();
  // The runtime still loads a good model afterwards.
  auto good = rt->load(server_->url("range/mlp_64_128_10.onnx"));
  ASSERT_TRUE(good.ok()) << good.status().message();
}

TEST(UrlRepository, AUrlWithoutAFileNameIsRefused) {
  model::ModelRepository repo;
  Status st = repo.add("http://127.0.0.1:1/");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
}

}  // namespace
}  // namespace gantry::server

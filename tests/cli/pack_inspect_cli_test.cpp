// `gantry pack` and `gantry inspect` run as a user would: exit codes, stdout, stderr.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>

#include "core/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const fs::path kGantry = fs::path(GANTRY_BINARY_DIR) / "bin" / "gantry";
const fs::path kModels = fs::path(GANTRY_DEPS_DIR) / "models";
const fs::path kSilero = kModels / "silero_vad_v5.onnx";

struct Run {
  int code = -1;
  std::string out;
  std::string err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

Run gantry(const std::vector<std::string>& args, const fs::path& scratch) {
  std::string cmd = quote(kGantry.string());
  for (const auto& a : args) cmd += " " + quote(a);
  const fs::path out = scratch / "stdout.txt", err = scratch / "stderr.txt";
  cmd += " >" + quote(out.string()) + " 2>" + quote(err.string());
  const int status = std::system(cmd.c_str());
  Run r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

void write(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

class PackInspectCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kGantry)) FAIL() << kGantry << " not built";
    if (!fs::exists(kSilero)) FAIL() << kSilero << " missing: run 'make setup'";
  }
  fs::path p(const std::string& rel) const { return dir_.path() / rel; }
  gantry::test_util::TempDir dir_;
};

TEST_F(PackInspectCli, InspectBareOnnxText) {
  auto r = gantry({"inspect", kSilero.string()}, dir_.path());
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* want : {"silero_vad_v5", "spox", "ai.onnx=16", "IR version: 8", "manifest synthesised"})
    EXPECT_NE(r.out.find(want), std::string::npos) << "missing '" << want << "' in:\n" << r.out;
  // One line per input: name, dtype, shape.
  EXPECT_NE(r.out.find("input  f32    [?,?]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("state  f32    [2,?,128]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sr     i64    []"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stateN"), std::string::npos);
}

TEST_F(PackInspectCli, InspectBareOnnxJson) {
  auto r = gantry({"inspect", kSilero.string(), "--json"}, dir_.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = Json::parse(r.out);
  EXPECT_EQ(j["kind"], "model file");
  EXPECT_EQ(j["manifest_synthesized"], true);
  EXPECT_EQ(j["manifest"]["format"], "onnx");
  EXPECT_EQ(j["manifest"]["name"], "silero_vad_v5");
  EXPECT_EQ(j["model"]["file_size"], fs::file_size(kSilero));
  EXPECT_EQ(j["model"]["opset_imports"][0]["version"], 16);
  EXPECT_EQ(j["model"]["inputs"][1]["name"], "state");
  EXPECT_EQ(j["model"]["inputs"][1]["shape"], Json::parse("[2, null, 128]"));
  EXPECT_EQ(j["model"]["inputs"][2]["dtype"], "i64");
  EXPECT_EQ(j["model"]["inputs"][2]["shape"], Json::array());
}

TEST_F(PackInspectCli, PackToDirectoryAndTarThenInspect) {
  auto packed = gantry({"pack", kSilero.string(), "-o", p("vad").string(), "--name", "vad", "--version",
                        "5.0.0", "--task", "vad", "--provider", "cuda", "--fallback", "cpu"},
                       dir_.path());
  ASSERT_EQ(packed.code, 0) << packed.err;
  EXPECT_NE(packed.out.find("packed vad 5.0.0"), std::string::npos) << packed.out;
  const auto manifest = Json::parse(slurp(p("vad/gantry.json")));
  EXPECT_EQ(manifest["sha256"]["silero_vad_v5.onnx"].get<std::string>().size(), 64u);
  EXPECT_EQ(manifest["hardware_requirements"]["fallback_providers"], Json::parse(R"(["cpu"])"));
  EXPECT_EQ(manifest["io"]["inputs"][0]["name"], "input");

  auto dir_inspect = gantry({"inspect", p("vad").string(), "--json"}, dir_.path());
  ASSERT_EQ(dir_inspect.code, 0) << dir_inspect.err;
  auto j = Json::parse(dir_inspect.out);
  EXPECT_EQ(j["kind"], "directory");
  EXPECT_EQ(j["checksums_verified"], true);
  EXPECT_EQ(j["manifest"]["version"], "5.0.0");
  EXPECT_EQ(j["model"]["inputs"].size(), 3u);

  auto tar = gantry({"pack", p("vad").string(), "-o", p("vad.tar").string()}, dir_.path());
  ASSERT_EQ(tar.code, 0) << tar.err;
  auto tar_inspect = gantry({"inspect", p("vad.tar").string()}, dir_.path());
  ASSERT_EQ(tar_inspect.code, 0) << tar_inspect.err;
  EXPECT_NE(tar_inspect.out.find("vad 5.0.0 (onnx)"), std::string::npos) << tar_inspect.out;
  EXPECT_NE(tar_inspect.out.find("(tar, manifest verified)"), std::string::npos) << tar_inspect.out;
  EXPECT_NE(tar_inspect.out.find("cuda -> cpu"), std::string::npos) << tar_inspect.out;
  EXPECT_NE(tar_inspect.out.find("Task:       vad"), std::string::npos) << tar_inspect.out;

  auto again = gantry({"pack", kSilero.string(), "-o", p("vad.tar").string()}, dir_.path());
  EXPECT_EQ(again.code, 1);
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;
  EXPECT_EQ(gantry({"pack", kSilero.string(), "-o", p("vad.tar").string(), "--force"}, dir_.path()).code, 0);
}

TEST_F(PackInspectCli, TamperedPackageFailsWithTheFileNamed) {
  ASSERT_EQ(gantry({"pack", kSilero.string(), "-o", p("vad").string()}, dir_.path()).code, 0);
  {
    std::fstream f(p("vad/silero_vad_v5.onnx"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1000);
    f.put('\x42');
  }
  auto r = gantry({"inspect", p("vad").string()}, dir_.path());
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(r.out.empty()) << "errors go to stderr only";
  EXPECT_NE(r.err.find("silero_vad_v5.onnx: sha256 mismatch"), std::string::npos) << r.err;
}

TEST_F(PackInspectCli, BadInputsAreClearErrors) {
  auto missing = gantry({"inspect", p("none.onnx").string()}, dir_.path());
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("none.onnx"), std::string::npos) << missing.err;

  write(p("empty.onnx"), "");
  auto empty = gantry({"inspect", p("empty.onnx").string()}, dir_.path());
  EXPECT_EQ(empty.code, 1);
  EXPECT_NE(empty.err.find("empty"), std::string::npos) << empty.err;

  const std::string bytes = slurp(kSilero);
  for (size_t n : {size_t{3}, size_t{64}, bytes.size() / 2, bytes.size() - 10}) {
    write(p("cut.onnx"), bytes.substr(0, n));
    auto r = gantry({"inspect", p("cut.onnx").string()}, dir_.path());
    EXPECT_EQ(r.code, 1) << "truncated to " << n;
    EXPECT_NE(r.err.find("cut.onnx"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("corrupt"), std::string::npos) << r.err;
  }
  std::mt19937 rng(5);
  std::string noise(2048, '\0');
  for (auto& c : noise) c = static_cast<char>(rng());
  write(p("noise.onnx"), noise);
  auto r = gantry({"inspect", p("noise.onnx").string()}, dir_.path());
  EXPECT_EQ(r.code, 1);
  EXPECT_FALSE(r.err.empty());

  write(p("fake.gguf"), "definitely not gguf");
  auto gguf = gantry({"inspect", p("fake.gguf").string()}, dir_.path());
  EXPECT_EQ(gguf.code, 1);
  EXPECT_FALSE(gguf.err.empty());

  auto usage = gantry({"pack", kSilero.string()}, dir_.path());
  EXPECT_EQ(usage.code, 2) << "missing -o is bad usage";
  auto badver = gantry({"pack", kSilero.string(), "-o", p("x").string(), "--version", "new"}, dir_.path());
  EXPECT_EQ(badver.code, 1);
  EXPECT_NE(badver.err.find("version"), std::string::npos) << badver.err;
  auto badprov = gantry({"pack", kSilero.string(), "-o", p("y").string(), "--provider", "gpu"}, dir_.path());
  EXPECT_EQ(badprov.code, 1);
  EXPECT_NE(badprov.err.find("'gpu' is not a known provider"), std::string::npos) << badprov.err;
}

TEST_F(PackInspectCli, InspectPaddleOcrDet) {
  const fs::path det = kModels / "paddleocr" / "ch_PP-OCRv4_det_infer.onnx";
  if (!fs::exists(det)) FAIL() << det << " missing";
  auto r = gantry({"inspect", det.string(), "--json"}, dir_.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = Json::parse(r.out);
  EXPECT_EQ(j["model"]["inputs"][0]["name"], "x");
  EXPECT_EQ(j["model"]["inputs"][0]["shape"],
            Json::parse(R"(["p2o.DynamicDimension.0", 3, "p2o.DynamicDimension.1",
                                                               "p2o.DynamicDimension.2"])"));
  EXPECT_EQ(j["model"]["opset_imports"][0]["version"], 11);
}

TEST_F(PackInspectCli, InspectGgufDelegatesToTheGgufReader) {
  fs::path gguf;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(kModels, ec))
    if (e.path().extension() == ".gguf" && fs::file_size(e.path()) < (64u << 20)) {
      gguf = e.path();
      break;
    }
  if (gguf.empty()) FAIL() << "no .gguf model under " << kModels;
  auto r = gantry({"inspect", gguf.string()}, dir_.path());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
  // A packaged GGUF: the manifest plus the GGUF summary embedded in the JSON.
  ASSERT_EQ(gantry({"pack", gguf.string(), "-o", p("g.tar").string()}, dir_.path()).code, 0);
  auto pj = gantry({"inspect", p("g.tar").string(), "--json"}, dir_.path());
  ASSERT_EQ(pj.code, 0) << pj.err;
  const auto j = Json::parse(pj.out);
  EXPECT_EQ(j["manifest"]["format"], "gguf");
  EXPECT_TRUE(j["model"].is_object()) << pj.out;
}

}  // namespace

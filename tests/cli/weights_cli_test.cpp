// gantry inspect on weights, gantry weights get / convert: outputs checked with numpy, the published
// safetensors layout (tests/weights/read_safetensors.py) and gguf-py; exit codes 0 / 1 / 2.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/cli_run.h"
#include "weights/http_fixture.h"

namespace gantry {
namespace {

namespace fs = std::filesystem;
using testing::run_gantry;

const fs::path& files() {
  static const fs::path dir = [] {
    char tpl[] = "/tmp/gantry-weights-cli-XXXXXX";
    const char* d = ::mkdtemp(tpl);
    const std::string cmd = "/usr/bin/python3 " GANTRY_SOURCE_DIR "/tests/weights/make_weights.py " +
                            std::string(d) + " " GANTRY_DEPS_DIR "/llama/src/gguf-py >/dev/null";
    if (d == nullptr || std::system(cmd.c_str()) != 0) return fs::path();
    return fs::path(d);
  }();
  return dir;
}

struct Cleanup : ::testing::Environment {
  void TearDown() override {
    std::error_code ec;
    if (!files().empty()) fs::remove_all(files(), ec);
  }
};
const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new Cleanup);

std::string f(const std::string& rel) { return (files() / rel).string(); }

// Runs python with numpy and gguf-py; true when the script exits 0.
bool python(const std::string& code) {
  const fs::path script = files() / "check.py";
  {
    std::ofstream out(script);
    out << "import sys, json, numpy as np\nsys.path.insert(0, '" GANTRY_DEPS_DIR "/llama/src/gguf-py')\n"
        << code;
  }
  return std::system(("/usr/bin/python3 " + script.string()).c_str()) == 0;
}

class WeightsCli : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(files().empty()) << "make_weights.py failed"; }
};

TEST_F(WeightsCli, InspectSafetensorsTextAndJson) {
  auto r = run_gantry({"inspect", f("all.safetensors")});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("Tensors:  17"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bf16"), std::string::npos);
  EXPECT_NE(r.out.find("[3,5]"), std::string::npos);
  r = run_gantry({"inspect", f("all.safetensors"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["format"], "safetensors");
  EXPECT_EQ(j["tensor_count"], 17);
  EXPECT_EQ(j["metadata"]["format"], "pt");
  bool found = false;
  for (const auto& t : j["tensors"])
    if (t["name"] == "f8_e4m3") {
      found = true;
      EXPECT_EQ(t["dtype"], "f8e4m3");
      EXPECT_EQ(t["bytes"], 6);
    }
  EXPECT_TRUE(found);
}

TEST_F(WeightsCli, InspectCheckpointDirectoryAndNpz) {
  auto r = run_gantry({"inspect", f("ckpt"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["format"], "safetensors-index");
  EXPECT_EQ(j["shards"].size(), 2u);
  EXPECT_EQ(j["config"]["hidden_size"], 3);
  EXPECT_EQ(j["tensors"][0]["shard"], "model-00001-of-00002.safetensors");
  r = run_gantry({"inspect", f("deflated.npz")});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("Tensors:  5"), std::string::npos) << r.out;
}

TEST_F(WeightsCli, GetAppliesTransformsInOrder) {
  const std::string out = f("t.npy");
  auto r = run_gantry({"weights", "get", f("all.safetensors"), "f32", "--transpose", "1,0", "--slice", "1:3",
                       "--cast", "f64", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(python("a = np.fromfile('" + f("expected/all.safetensors/f32.bin") +
                     "', dtype='<f4').reshape(3, 5)\n"
                     "b = np.load('" +
                     out +
                     "')\n"
                     "assert b.dtype == np.float64 and b.shape == (2, 3), (b.dtype, b.shape)\n"
                     "assert (b == a.T[1:3].astype(np.float64)).all()\n"));
}

TEST_F(WeightsCli, QuantisedTensorsNeedDequantisingForNpy) {
  auto r = run_gantry({"weights", "get", f("tiny.gguf"), "q8_0", "-o", f("q.npy")});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find(".npy cannot hold"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--dequantize"), std::string::npos);
  r = run_gantry({"weights", "get", f("tiny.gguf"), "q8_0", "--dequantize", "-o", f("q.npy")});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(python("a = np.fromfile('" + f("expected/tiny.gguf/q8_0.f32.bin") +
                     "', dtype='<f4').reshape(2, 256)\n"
                     "assert (np.load('" +
                     f("q.npy") + "') == a).all()\n"));
}

TEST_F(WeightsCli, ConvertToSafetensorsAndGgufReadBackByReferenceReaders) {
  const std::string st = f("out.safetensors");
  auto r = run_gantry({"weights", "convert", f("ckpt"), "-o", st, "--cast", "f32"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(
      python("import subprocess\n"
             "j = json.loads(subprocess.check_output([sys.executable, '" GANTRY_SOURCE_DIR
             "/tests/weights/read_safetensors.py', '" +
             st +
             "']))\n"
             "e = np.fromfile('" +
             f("expected/ckpt/embed.weight.bin") +
             "', dtype='<f4')\n"
             "t = j['tensors']['embed.weight']\n"
             "assert t['dtype'] == 'F32' and t['shape'] == [4, 3]\n"
             "assert bytes.fromhex(t['hex']) == e.tobytes()\n"
             "assert len(j['tensors']) == 4 and j['tensors']['lm_head.weight']['dtype'] == 'F32'\n"));
  const std::string gg = f("out.gguf");
  r = run_gantry({"weights", "convert", f("tiny.gguf"), "-o", gg, "--only", "f32", "--only", "q4_0",
                  "--quantize", "q8_0"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("1 quantised"), std::string::npos) << r.out;
  EXPECT_TRUE(
      python("from gguf import GGUFReader, GGMLQuantizationType as Q\n"
             "r = GGUFReader('" +
             gg +
             "')\n"
             "t = {x.name: x for x in r.tensors}\n"
             "assert set(t) == {'f32', 'q4_0'}, set(t)\n"
             "assert t['f32'].tensor_type == Q.Q8_0 and t['q4_0'].tensor_type == Q.Q4_0\n"
             "assert r.fields['general.architecture'].contents() == 'llama'\n"));
}

TEST_F(WeightsCli, BadUsageAndFailures) {
  auto r = run_gantry({"weights", "get", f("all.safetensors"), "f32", "--transpose", "x", "-o", f("x.npy")});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  r = run_gantry({"weights", "convert", f("all.safetensors"), "-o", f("x.txt")});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  r = run_gantry({"weights", "get", f("all.safetensors"), "nope", "-o", f("x.npy")});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("nope"), std::string::npos);
  r = run_gantry({"weights", "get", f("torch.pt"), "a", "-o", f("x.npy")});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("convert it to safetensors"), std::string::npos) << r.err;
  r = run_gantry({"weights", "get", f("all.safetensors"), "bf16", "-o", f("x.npy")});
  EXPECT_EQ(r.exit_code, 1) << r.describe();  // numpy has no bf16
  EXPECT_FALSE(fs::exists(f("x.npy")));
}

}  // namespace
}  // namespace gantry

namespace gantry {
namespace {

TEST_F(WeightsCli, InspectAUrlAndGetFromIt) {
  weights::testing::HttpServer server(files().string());
  ASSERT_TRUE(server.ok()) << "the loopback HTTP server did not start";
  auto r = run_gantry({"inspect", server.url("range/ckpt/model.safetensors.index.json"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kind"], "url");
  EXPECT_EQ(j["tensor_count"], 4);
  r = run_gantry(
      {"weights", "get", server.url("range/big.safetensors"), "big", "--slice", "0:2,0:3", "-o", f("u.npy")});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(python("a = np.fromfile('" + f("expected/big.safetensors/big.bin") +
                     "', dtype='<f4').reshape(512, 512)\n"
                     "assert (np.load('" +
                     f("u.npy") + "') == a[0:2, 0:3]).all()\n"));
  r = run_gantry({"inspect", server.url("drop/big.safetensors")});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gantry

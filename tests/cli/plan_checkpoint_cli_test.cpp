// `gantry plan` on Hugging Face checkpoints (scripts/models/hf_checkpoints.py): the plan from config.json and
// the safetensors headers equals the plan of the GGUF llama.cpp made of the checkpoint (converted, then
// quantised by llama_model_quantize), locally and over HTTP with Range requests (only the headers fetched,
// as the server counts them); --quant all picks the largest type that fits a captured machine; --params is
// an estimate that says so; an unknown architecture gets its weights alone.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_run.h"
#include "weights/http_fixture.h"

namespace {

using gantry::testing::run_gantry;
using nlohmann::json;
namespace fs = std::filesystem;

const std::string kHf = GANTRY_DEPS_DIR "/models/hf/";

json plan_json(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"plan"};
  all.insert(all.end(), args.begin(), args.end());
  all.push_back("--json");
  const auto r = run_gantry(all, std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  if (r.exit_code != 0) return json();
  return json::parse(r.out);
}

// The memory of every device and the totals, as plan --json reports them.
void expect_same_plan(const json& a, const json& b, const std::string& what) {
  ASSERT_FALSE(a.is_null());
  ASSERT_FALSE(b.is_null());
  EXPECT_EQ(a["totals"], b["totals"]) << what;
  ASSERT_EQ(a["devices"].size(), b["devices"].size()) << what;
  for (size_t i = 0; i < a["devices"].size(); ++i) {
    EXPECT_EQ(a["devices"][i]["predicted_bytes"], b["devices"][i]["predicted_bytes"]) << what;
    EXPECT_EQ(a["devices"][i]["layers"], b["devices"][i]["layers"]) << what;
  }
  EXPECT_EQ(a["context"], b["context"]) << what;
}

class PlanCheckpointCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kHf + "llama/config.json")) GTEST_FAIL() << "run 'make setup' to generate " << kHf;
  }
};

TEST_F(PlanCheckpointCli, SamePlanAsTheGgufLlamaCppMakesOfIt) {
  for (const char* arch : {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "mixtral", "qwen2moe"}) {
    for (const char* q : {"bf16", "q8_0", "q4_k_m", "q4_0", "q2_k"}) {
      const std::string what = std::string(arch) + " " + q;
      const json ck = plan_json({kHf + arch, "--quant", q, "--ctx", "4096", "--gpu-layers", "0"});
      const json gguf = plan_json({kHf + arch + "-" + q + ".gguf", "--ctx", "4096", "--gpu-layers", "0"});
      expect_same_plan(ck, gguf, what);
      // Only config.json and the headers were read: a few KiB of many MiB.
      const auto read = ck["checkpoint"]["bytes_read"].get<uint64_t>();
      EXPECT_GT(read, 1000u) << what;
      EXPECT_LT(read, ck["checkpoint"]["stored_bytes"].get<uint64_t>() / 100) << what;
      EXPECT_EQ(ck["quantization"], q) << what;
    }
  }
  // The index and one .safetensors file plan the same as their directory.
  expect_same_plan(plan_json({kHf + "mistral/model.safetensors.index.json", "--quant", "q6_k"}),
                   plan_json({kHf + "mistral", "--quant", "q6_k"}), "index");
  expect_same_plan(plan_json({kHf + "qwen2/model.safetensors", "--quant", "q5_1"}),
                   plan_json({kHf + "qwen2", "--quant", "q5_1"}), "one file");
}

uint64_t server_sent(const gantry::weights::testing::HttpServer& s) {
  const std::string tmp = fs::temp_directory_path() / "gantry-ckpt-stats";
  const std::string cmd = "curl -s " + s.url("stats") + " > " + tmp;
  if (std::system(cmd.c_str()) != 0) return 0;
  std::ifstream f(tmp);
  uint64_t n = 0;
  f >> n;
  fs::remove(tmp);
  return n;
}

TEST_F(PlanCheckpointCli, RemoteCheckpointFetchesOnlyTheHeaders) {
  gantry::weights::testing::HttpServer server(kHf);
  ASSERT_TRUE(server.ok());
  struct Case {
    std::string url, local;
  };
  for (const Case& c : {Case{server.url("range/mistral/"), kHf + "mistral"},
                        Case{server.url("range/mixtral/model.safetensors.index.json"), kHf + "mixtral"},
                        Case{server.url("range/qwen2/"), kHf + "qwen2"},
                        Case{server.url("range/gemma2/model.safetensors"), kHf + "gemma2"}}) {
    const uint64_t before = server_sent(server);
    const json remote = plan_json({c.url, "--quant", "q4_k_m", "--ctx", "2048"});
    const uint64_t sent = server_sent(server) - before;
    const json local = plan_json({c.local, "--quant", "q4_k_m", "--ctx", "2048"});
    expect_same_plan(remote, local, c.url);
    const auto read = remote["checkpoint"]["bytes_read"].get<uint64_t>();
    // What the plan says it read is what the server sent (the stats request itself is not counted)...
    EXPECT_EQ(read, sent) << c.url;
    // ...and far below the files: headers and config.json only.
    EXPECT_LT(read, 64u << 10) << c.url;
    EXPECT_LT(read * 100, remote["checkpoint"]["stored_bytes"].get<uint64_t>()) << c.url;
    EXPECT_EQ(remote["checkpoint"]["files"], local["checkpoint"]["files"]);
  }
  // A URL with no checkpoint behind it names what it tried.
  const auto r = run_gantry({"plan", server.url("range/nothing-here/"), "--quant", "q4_0"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("404"), std::string::npos) << r.err;
}

// A captured machine with `available` bytes of memory.
std::string sysroot_with(uint64_t available) {
  char tpl[] = "/tmp/gantry-ckpt-sysroot-XXXXXX";
  const std::string root = ::mkdtemp(tpl);
  fs::create_directories(root + "/proc");
  std::ofstream(root + "/proc/meminfo") << "MemTotal: " << (available / 1024) * 2 << " kB\n"
                                        << "MemAvailable: " << available / 1024 << " kB\n";
  return root;
}

TEST_F(PlanCheckpointCli, QuantAllPicksTheLargestThatFitsAndTheContextLeft) {
  // Here everything fits: the table lists every type, largest first.
  json all = plan_json({kHf + "llama", "--quant", "all", "--ctx", "1024"});
  ASSERT_TRUE(all.contains("quantizations"));
  const auto& rows = all["quantizations"];
  ASSERT_GE(rows.size(), 10u);
  for (size_t i = 1; i < rows.size(); ++i)
    EXPECT_GE(rows[i - 1]["weight_bytes"].get<uint64_t>(), rows[i]["weight_bytes"].get<uint64_t>());
  EXPECT_EQ(all["chosen"], rows[0]["quantization"]);
  EXPECT_EQ(rows[0]["max_context"].get<uint32_t>(), 4096u);  // the training context

  // A machine with memory between the q6_k and q8_0 plans at 1024 tokens: q6_k is the largest that fits.
  uint64_t q8 = 0, q6 = 0;
  for (const auto& r : rows) {
    if (r["quantization"] == "q8_0") q8 = r["total_bytes"].get<uint64_t>();
    if (r["quantization"] == "q6_k") q6 = r["total_bytes"].get<uint64_t>();
  }
  ASSERT_GT(q8, q6);
  const std::string root = sysroot_with((q8 + q6) / 2);
  json small = plan_json({kHf + "llama", "--quant", "all", "--ctx", "1024", "--sysroot", root});
  EXPECT_EQ(small["chosen"], "q6_k") << small.dump();
  EXPECT_TRUE(small["fits"].get<bool>());
  uint32_t q6_ctx = 0;
  for (const auto& r : small["quantizations"]) {
    if (r["quantization"] == "q8_0") {
      EXPECT_FALSE(r["fits"].get<bool>());
    }
    if (r["quantization"] == "q6_k") q6_ctx = r["max_context"].get<uint32_t>();
  }
  // It fits at 1024 but not at 4096 (the memory lies between): the context left is in between.
  EXPECT_GE(q6_ctx, 1024u);
  EXPECT_LT(q6_ctx, 4096u);
  // The text says the same.
  const auto text = run_gantry({"plan", kHf + "llama", "--quant", "all", "--ctx", "1024", "--sysroot", root});
  EXPECT_NE(text.out.find("largest that fits: q6_k"), std::string::npos) << text.out;
  // Too little memory for any: none fits, said so, exit 0.
  const std::string tiny = sysroot_with(8u << 20);
  json none = plan_json({kHf + "llama", "--quant", "all", "--sysroot", tiny});
  EXPECT_TRUE(none["chosen"].is_null());
  EXPECT_FALSE(none["fits"].get<bool>());
  fs::remove_all(root);
  fs::remove_all(tiny);
}

TEST_F(PlanCheckpointCli, WhatIfWithExactQuantisations) {
  // 0.55 GiB GPU (about 51 MiB free after the 512 MiB reserve) and a 0.58 GiB one (about 82 MiB free).
  const std::string cat = fs::temp_directory_path() / "gantry-ckpt-catalogue.json";
  std::ofstream(cat) << R"({"schema_version": 1, "catalogue_version": "ckpt-test",
    "accelerators": [
      {"id": "crumb", "name": "Crumb", "memory_gib": 0.55, "memory_bandwidth_gb_s": 100, "fp16_dense_tflops": 10, "source": "test"},
      {"id": "morsel", "name": "Morsel", "memory_gib": 0.58, "memory_bandwidth_gb_s": 200, "fp16_dense_tflops": 20, "source": "test"}],
    "instances": []})";
  json j = plan_json(
      {kHf + "llama", "--quant", "all", "--ctx", "4096", "--what-if", "crumb,morsel", "--catalogue", cat});
  ASSERT_TRUE(j.contains("targets"));
  ASSERT_EQ(j["targets"].size(), 2u);
  // Morsel fits at an exact llama-quantize type smaller than bf16, with at least the asked context left.
  const auto& morsel = j["targets"][0];
  EXPECT_EQ(morsel["target"], "morsel");
  ASSERT_TRUE(morsel["fits"].get<bool>()) << morsel.dump();
  const std::string q = morsel["quantization"].get<std::string>();
  EXPECT_NE(q, "bf16");
  EXPECT_TRUE(q == "f16" || q.find('_') != std::string::npos) << q;
  EXPECT_GE(morsel["max_context"].get<uint32_t>(), 4096u);
  // Crumb does not fit even at the smallest type, by its exact name.
  const auto& crumb = j["targets"][1];
  EXPECT_FALSE(crumb["fits"].get<bool>());
  EXPECT_NE(crumb["missing"].get<std::string>().find("q2_k"), std::string::npos) << crumb.dump();
  EXPECT_EQ(j["checkpoint"]["hf_architecture"], "LlamaForCausalLM");
  fs::remove(cat);
}

TEST_F(PlanCheckpointCli, ParamsIsAnEstimateWithItsAssumptions) {
  json j = plan_json({"--params", "70B", "--quant", "q4_k_m", "--ctx", "8192", "--gpu-layers", "0"});
  ASSERT_TRUE(j.contains("checkpoint"));
  EXPECT_TRUE(j["checkpoint"]["estimate"].get<bool>());
  EXPECT_EQ(j["checkpoint"]["layers"].get<uint32_t>(), 80u);
  EXPECT_EQ(j["checkpoint"]["kv_heads"].get<uint32_t>(), 8u);
  ASSERT_FALSE(j["checkpoint"]["assumptions"].empty());
  EXPECT_NE(j["checkpoint"]["assumptions"][0].get<std::string>().find("Llama 3.1 70B"), std::string::npos);
  // Llama 3.1 70B at Q4_K_M is a 42.5 GB file; the KV cache at 8192 tokens: 80 layers x 2 x 1024 x 8192 x 2.
  const uint64_t weights = j["weight_bytes"].get<uint64_t>();
  EXPECT_GT(weights, 40'000'000'000ull);
  EXPECT_LT(weights, 45'000'000'000ull);
  EXPECT_EQ(j["totals"]["kv_cache"].get<uint64_t>(), 80ull * 2 * 1024 * 8192 * 2);
  // A stated shape replaces the assumed one; the text says ESTIMATE.
  const auto r = run_gantry({"plan", "--params", "7B", "--layers", "30", "--quant", "q8_0", "--ctx", "2048"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("ESTIMATE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("30 layers (given)"), std::string::npos) << r.out;
  EXPECT_EQ(run_gantry({"plan", "--params", "seventy"}).exit_code, 2);
}

TEST_F(PlanCheckpointCli, UnknownArchitectureGetsItsWeightsAlone) {
  char tpl[] = "/tmp/gantry-ckpt-unknown-XXXXXX";
  const std::string dir = ::mkdtemp(tpl);
  fs::copy_file(kHf + "qwen2/model.safetensors", dir + "/model.safetensors");
  std::ofstream(dir + "/config.json") << R"({"architectures": ["FalconH1ForCausalLM"], "hidden_size": 256})";
  auto r = run_gantry({"plan", dir, "--quant", "q4_0"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("not planned yet: architecture FalconH1ForCausalLM"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("weights alone"), std::string::npos) << r.out;
  json j = plan_json({dir, "--quant", "q8_0"});
  EXPECT_FALSE(j["planned"].get<bool>());
  EXPECT_GT(j["weights_alone"]["q8_0"].get<uint64_t>(), 10u << 20);
  fs::remove_all(dir);
}

TEST_F(PlanCheckpointCli, UsageErrors) {
  EXPECT_EQ(run_gantry({"plan"}).exit_code, 2);
  EXPECT_EQ(run_gantry({"plan", kHf + "llama", "--quant", "q9_z"}).exit_code, 2);
  EXPECT_EQ(run_gantry({"plan", kHf + "llama", "--measure"}).exit_code, 2);
  EXPECT_EQ(run_gantry({"plan", kHf + "llama-q4_0.gguf", "--quant", "q8_0"}).exit_code, 2);
  EXPECT_EQ(run_gantry({"plan", kHf + "llama", "--params", "7B"}).exit_code, 2);
  const auto r = run_gantry({"plan", "/nonexistent/dir/model.safetensors"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
}

}  // namespace

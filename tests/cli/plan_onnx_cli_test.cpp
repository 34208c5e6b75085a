// `gantry plan MODEL.onnx --measure`: measured bytes per component, the cached profile (and a second run
// reading it), a prediction at a batch never measured, and the usage errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/cli_run.h"

namespace {

namespace fs = std::filesystem;
using gantry::testing::CliResult;
using gantry::testing::run_gantry;

const std::string kMlp = GANTRY_DEPS_DIR "/models/mlp_64_128_10.onnx";

class PlanOnnxCli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kMlp)) << "run 'make setup' to generate " << kMlp;
    cache_ = fs::temp_directory_path() / ("gantry-plan-onnx-cli-" + std::to_string(::getpid()));
    fs::remove_all(cache_);
  }
  void TearDown() override { fs::remove_all(cache_); }
  CliResult plan(std::vector<std::string> args) const {
    args.insert(args.begin(), "plan");
    if (args.size() >= 2 && args[1] == kMlp) {
      args.push_back("--provider");  // the CPU pool is what is measured, whatever GPUs the machine has
      args.push_back("cpu");
    }
    return run_gantry(args, std::chrono::seconds(120), {"GANTRY_CACHE_DIR=" + cache_.string()});
  }
  fs::path cache_;
};

TEST_F(PlanOnnxCli, MeasureReportsEveryComponentAndCachesTheProfile) {
  const CliResult r = plan({kMlp, "--measure", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["estimate"].get<bool>());
  EXPECT_EQ(j["batch"].get<int>(), 1);
  EXPECT_EQ(j["basis"], "measured at batch 1");
  ASSERT_TRUE(j["measured"].is_object());
  ASSERT_EQ(j["measured"]["devices"].size(), 1u);
  const auto& cpu = j["measured"]["devices"][0];
  EXPECT_EQ(cpu["device"], "cpu");
  for (const char* c : {"weights", "activations", "arena", "outside_pool", "total"})
    EXPECT_GT(cpu["bytes"][c].get<uint64_t>(), 0u) << c << "\n" << r.out;
  EXPECT_FALSE(j["profile"]["from_cache"].get<bool>());
  EXPECT_EQ(j["profile"]["measured_now"], nlohmann::json::array({1, 2}));
  const std::string file = j["profile"]["cache_file"].get<std::string>();
  EXPECT_EQ(file.rfind((cache_ / "measured").string(), 0), 0u)
      << file;  // beside the measured policy's verdicts
  EXPECT_TRUE(fs::exists(file)) << file;

  // A second run measures nothing and says the profile came from the cache.
  const CliResult again = plan({kMlp, "--measure"});
  ASSERT_EQ(again.exit_code, 0) << again.describe();
  EXPECT_NE(again.out.find("profile: from the cache (" + file + ")"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("nothing measured now"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("batch 1: measured"), std::string::npos) << again.out;
}

TEST_F(PlanOnnxCli, AnUnmeasuredBatchIsPredictedFromTwoMeasuredOnes) {
  ASSERT_EQ(plan({kMlp, "--measure"}).exit_code, 0);
  CliResult r = plan({kMlp, "--batch", "16", "--json"});  // no --measure: the cached profile
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["estimate"].get<bool>());
  EXPECT_TRUE(j["measured"].is_null());
  EXPECT_EQ(j["predicted"]["basis"], "predicted from 1 and 2");
  EXPECT_EQ(j["predicted"]["from_batches"], nlohmann::json::array({1, 2}));
  EXPECT_FALSE(j["predicted"]["measured"].get<bool>());
  EXPECT_TRUE(j["profile"]["from_cache"].get<bool>());
  const auto p = j["profile"]["points"];
  const uint64_t a1 = p[0]["devices"]["cpu"]["activations"].get<uint64_t>();
  const uint64_t a2 = p[1]["devices"]["cpu"]["activations"].get<uint64_t>();
  const int64_t slope = static_cast<int64_t>(a2) - static_cast<int64_t>(a1);
  EXPECT_EQ(j["totals"]["activations"].get<int64_t>(),
            std::max<int64_t>(0, static_cast<int64_t>(a1) + 15 * slope));
  r = plan({kMlp, "--batch", "16"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("batch 16: predicted from 1 and 2"), std::string::npos) << r.out;

  // Measuring at 16 too: measured there, with the prediction from 1 and 2 beside it and its error.
  r = plan({kMlp, "--measure", "--batch", "16", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["profile"]["measured_now"], nlohmann::json::array({16}));
  EXPECT_EQ(j["profile"]["cached"], nlohmann::json::array({1, 2}));
  EXPECT_TRUE(j["measured"]["measured"].get<bool>());
  EXPECT_EQ(j["predicted"]["basis"], "predicted from 1 and 2");
  EXPECT_TRUE(j["prediction_error"]["reservation"].is_number());
}

TEST_F(PlanOnnxCli, WithoutAProfileTheRuleOfThumbSaysHowToMeasure) {
  const CliResult r = plan({kMlp});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("--measure"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("estimate"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(cache_ / "measured"));  // nothing measured, nothing written
}

TEST_F(PlanOnnxCli, UsageErrorsNameTheFlag) {
  CliResult r = plan({kMlp, "--measure", "--shape", "input"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("--shape"), std::string::npos) << r.err;
  r = plan({kMlp, "--measure", "--shape", "nope=1,64"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("'nope'"), std::string::npos) << r.err;
  r = plan({kMlp, "--measure", "--shape", "input=1,65"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  r = plan({kMlp, "--speed"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  r = plan({GANTRY_DEPS_DIR "/models/tiny-llama.gguf", "--shape", "x=1"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_FALSE(fs::exists(cache_ / "measured"));
}

}  // namespace

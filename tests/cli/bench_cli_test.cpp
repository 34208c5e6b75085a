// `gantry bench MODEL.gguf`: pp/tg tokens/s as text and JSON; bad usage exits 2.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace {

std::pair<int, std::string> gantry_bench(const std::string& args) {
  const std::string cmd = std::string(GANTRY_BINARY_DIR) + "/bin/gantry bench " + args + " 2>/dev/null";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {-1, ""};
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

const std::string kModel = std::string(GANTRY_DEPS_DIR) + "/models/tiny-llama.gguf";

TEST(BenchCli, JsonHasPpAndTgRates) {
  auto [code, out] = gantry_bench(kModel + " -p 32 -n 8 -r 2 -t 1 --json");
  ASSERT_EQ(code, 0) << out;
  auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["test"], "pp32");
  EXPECT_EQ(j["results"][1]["test"], "tg8");
  EXPECT_EQ(j["n_threads"], 1);
  for (const auto& r : j["results"]) {
    EXPECT_GT(r["avg_ts"].get<double>(), 0.0);
    EXPECT_EQ(r["samples_ts"].size(), 2u);
  }
}

TEST(BenchCli, TextOutputAndBadUsage) {
  auto [code, out] = gantry_bench(kModel + " -p 16 -n 0 -r 1 -t 1");
  ASSERT_EQ(code, 0);
  EXPECT_NE(out.find("pp16"), std::string::npos) << out;
  EXPECT_NE(out.find("t/s"), std::string::npos) << out;
  EXPECT_EQ(out.find("tg"), std::string::npos) << out;
  EXPECT_EQ(gantry_bench(kModel + " -r 0").first, 2);
  EXPECT_EQ(gantry_bench(kModel + " -p 0 -n 0").first, 2);
  EXPECT_EQ(gantry_bench(kModel + " --kv-type q9").first, 2);
  EXPECT_EQ(gantry_bench("/nonexistent.gguf -r 1").first, 1);
}

}  // namespace

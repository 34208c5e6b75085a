// `gantry run MODEL.gguf`: only the generated text on stdout, greedy output equal to the engine's,
// seeds, chat, stop strings, and clear errors with the right exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "gantry/backend/llama/batch_engine.h"

namespace {

struct Run {
  int code = -1;
  std::string out, err;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// `env`: "NAME=VALUE ..." put before the command (the shell runs it).
Run gantry(const std::string& args, const std::string& env = "") {
  const auto err_file =
      std::filesystem::temp_directory_path() / ("gantry-run-err-" + std::to_string(::getpid()));
  const std::string cmd =
      env + " " + std::string(GANTRY_BINARY_DIR) + "/bin/gantry " + args + " 2>" + err_file.string();
  Run r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream e(err_file);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  std::filesystem::remove(err_file);
  return r;
}

const std::string kModel = std::string(GANTRY_DEPS_DIR) + "/models/tiny-llama.gguf";

TEST(RunGgufCli, GreedyOutputIsExactlyTheEnginesText) {
  for (const std::string prompt : {"Hello my name is", "The capital of France is"}) {
    auto r = gantry("run " + quote(kModel) + " --prompt " + quote(prompt) +
                    " --temperature 0 --max-tokens 16 --threads 1");
    ASSERT_EQ(r.code, 0) << r.err;
    auto w = gantry::llama::LlamaWeights::load(kModel);
    ASSERT_TRUE(w.ok());
    gantry::llama::ContextOptions co;
    co.n_ctx = 2048;
    co.n_threads = 1;
    auto e = gantry::llama::BatchEngine::create(*w, co);
    ASSERT_TRUE(e.ok());
    gantry::backend::GenerationRequest req;
    req.prompt = prompt;
    req.max_tokens = 16;
    req.sampling.temperature = 0;
    auto expected = (*e)->generate(req);
    ASSERT_TRUE(expected.ok());
    EXPECT_EQ(r.out, expected->text) << "stdout must hold only the generated text";
    EXPECT_EQ(r.out.find(prompt), std::string::npos) << "the prompt must not be echoed";
  }
}

TEST(RunGgufCli, SeedReproducesAndAnotherSeedDiffers) {
  const std::string base = "run " + quote(kModel) +
                           " --prompt 'Once upon a time' --max-tokens 24 --temperature 1 "
                           "--top-k 0 --top-p 1 --min-p 0 --threads 1 --seed ";
  auto a = gantry(base + "7"), b = gantry(base + "7"), c = gantry(base + "8");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_FALSE(a.out.empty());
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

TEST(RunGgufCli, ChatAndStopStrings) {
  auto chat = gantry("run " + quote(kModel) +
                     " --prompt 'Hi' --chat --system 'Be brief' --temperature 0 "
                     "--max-tokens 8 --threads 1");
  ASSERT_EQ(chat.code, 0) << chat.err;
  EXPECT_FALSE(chat.out.empty());
  auto full =
      gantry("run " + quote(kModel) + " --prompt 'Hello my name is' --temperature 0 --max-tokens 16 -t 1");
  ASSERT_EQ(full.code, 0);
  ASSERT_GT(full.out.size(), 10u);
  const std::string stop = full.out.substr(full.out.size() / 2, 3);
  auto cut = gantry("run " + quote(kModel) +
                    " --prompt 'Hello my name is' --temperature 0 --max-tokens 16 -t 1 "
                    "--stop " +
                    quote(stop));
  ASSERT_EQ(cut.code, 0) << cut.err;
  EXPECT_EQ(cut.out, full.out.substr(0, full.out.find(stop)));
}

TEST(RunGgufCli, BadInputGivesClearErrorsAndNoOutput) {
  auto missing = gantry("run /nonexistent/m.gguf --prompt hi");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("/nonexistent/m.gguf"), std::string::npos) << missing.err;
  EXPECT_TRUE(missing.out.empty());

  for (const std::string bad : {"--top-p 0", "--top-p 1.5", "--temperature -1", "--top-k -3", "--min-p 2",
                                "--repeat-penalty 0", "--max-tokens 0"}) {
    auto r = gantry("run " + quote(kModel) + " --prompt hi " + bad);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("error"), std::string::npos) << bad;
    EXPECT_TRUE(r.out.empty()) << bad;
  }
  std::string long_prompt;
  for (int i = 0; i < 400; ++i) long_prompt += "word ";
  auto too_long = gantry("run " + quote(kModel) + " --ctx 256 --prompt " + quote(long_prompt));
  EXPECT_EQ(too_long.code, 2) << "bad usage: a larger --ctx or a shorter prompt";
  EXPECT_NE(too_long.err.find("the context holds 256"), std::string::npos) << too_long.err;

  const auto trunc = std::filesystem::temp_directory_path() / "gantry-cli-truncated.gguf";
  std::filesystem::copy_file(kModel, trunc, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(trunc, std::filesystem::file_size(kModel) / 2);
  auto t = gantry("run " + trunc.string() + " --prompt hi");
  EXPECT_EQ(t.code, 1);
  EXPECT_NE(t.err.find("truncated"), std::string::npos) << t.err;
  std::filesystem::remove(trunc);

  auto kv = gantry("run " + quote(kModel) +
                       " --ctx 256 --prompt 'Once upon a time' --temperature 0 "
                       "--max-tokens 1000 -t 1",
                   "GANTRY_LOG_LEVEL=info");  // the summary line is an info log
  // The generated model is deterministic and never emits end-of-text within 1000 greedy tokens: the
  // generation stops when the 256-cell context is full (5 prompt tokens + 251), as a length limit.
  ASSERT_EQ(kv.code, 0) << kv.err;
  EXPECT_NE(kv.err.find("251 tokens generated"), std::string::npos) << kv.err;
  EXPECT_NE(kv.err.find("finish: max_tokens"), std::string::npos) << kv.err;
  EXPECT_FALSE(kv.out.empty());
}

}  // namespace

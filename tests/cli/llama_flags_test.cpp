// The llama.cpp flags shared by `plan`, `run`, `serve` and `bench` (cli/llama_flags.h): every spelling of a
// flag (Gantry's, llama.cpp's, the rewritten multi-letter short ones) sets the same value and the same
// llama option on every command that takes it; each command really declares its set (its --help lists it)
// and the spellings reach the command (plan's and bench's JSON).
#include "cli/llama_flags.h"

#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_run.h"

namespace gantry::cli {
namespace {

using Args = std::vector<std::string>;

struct Parsed {
  LlamaFlags flags;
  model::LlamaOptions options;
};

// Parses `args` (after llama_cpp_alias, as the engine does) with `which`'s flags, then applies them.
Parsed parse(uint32_t which, const Args& args) {
  CLI::App app{"test", "gantry"};
  Parsed p;
  add_llama_flags(app, p.flags, which);
  std::vector<const char*> argv{"gantry"};
  for (const auto& a : args) argv.push_back(llama_cpp_alias(a.c_str()));
  app.parse(static_cast<int>(argv.size()), argv.data());
  const Status st = apply(p.flags, p.options, which);
  EXPECT_TRUE(st.ok()) << st.message();
  return p;
}

struct Case {
  LlamaFlag flag;
  std::vector<Args> spellings;  // the first is Gantry's
};

const std::vector<Case>& cases() {
  static const std::vector<Case> kCases = {
      {kLlamaCtx, {{"--ctx", "512"}, {"--ctx-size", "512"}, {"-c", "512"}, {"--ctx=512"}}},
      {kLlamaParallel, {{"--parallel", "3"}, {"-np", "3"}, {"--parallel=3"}}},
      {kLlamaBatch, {{"--batch-size", "64"}, {"--batch", "64"}, {"-b", "64"}}},
      {kLlamaUbatch, {{"--ubatch-size", "32"}, {"--ubatch", "32"}, {"-ub", "32"}}},
      {kLlamaGpuLayers, {{"--n-gpu-layers", "7"}, {"--gpu-layers", "7"}, {"--ngl", "7"}, {"-ngl", "7"}}},
      {kLlamaKvType, {{"--kv-type", "q8_0"}, {"--kv-type=q8_0"}}},
      {kLlamaFlashAttn, {{"--flash-attn", "off"}, {"-fa", "off"}}},
      {kLlamaThreads, {{"--threads", "3"}, {"-t", "3"}}},
      {kLlamaMmap, {{"--no-mmap"}}},
      {kLlamaChatTemplate, {{"--chat-template-file", "t.jinja"}}},
      {kLlamaReasoningFormat, {{"--reasoning-format", "none"}}},
      {kLlamaSpeculative,
       {{"--draft-model", "d.gguf", "--draft-max", "5"},
        {"-md", "d.gguf", "--draft", "5"},
        {"--model-draft", "d.gguf", "--draft-n", "5"},
        {"--spec-draft-model", "d.gguf", "--spec-draft-n-max", "5"}}},
      {kLlamaPromptCache,
       {{"--cache-ram", "512", "--no-prompt-cache"}, {"-cram", "512", "--no-cache-prompt"}}},
      {kLlamaKvUnified, {{"--kv-unified"}, {"-kvu"}}},
      {kLlamaPrefillChunk, {{"--prefill-chunk", "8"}}},
      {kLlamaRpc,
       {{"--rpc", "10.0.0.2:50052,10.0.0.3:50052"}, {"--rpc", "10.0.0.2:50052", "--rpc", "10.0.0.3:50052"}}},
  };
  return kCases;
}

struct Command {
  const char* name;
  uint32_t which;
};
constexpr Command kCommands[] = {{"plan", kPlanLlamaFlags},
                                 {"run", kRunLlamaFlags},
                                 {"serve", kServeLlamaFlags},
                                 {"bench", kBenchLlamaFlags}};

TEST(LlamaFlags, EverySpellingSetsTheSameOptionOnEveryCommand) {
  int checked = 0;
  for (const Command& c : kCommands) {
    for (const Case& k : cases()) {
      if (!(c.which & k.flag)) continue;
      SCOPED_TRACE(std::string(c.name) + " " + k.spellings[0][0]);
      const Parsed base = parse(c.which, k.spellings[0]);
      const Parsed none = parse(c.which, {});
      // The flag does something: its value or the llama option differs from not giving it.
      EXPECT_TRUE(!(base.flags == none.flags)) << "the flag set nothing";
      if (k.flag != kLlamaThreads) {
        EXPECT_NE(base.options, none.options) << "no llama option set";
      }
      for (const Args& spelling : k.spellings) {
        SCOPED_TRACE(spelling[0]);
        const Parsed p = parse(c.which, spelling);
        EXPECT_TRUE(p.flags == base.flags);
        EXPECT_EQ(p.options, base.options);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 60);
}

TEST(LlamaFlags, TheOptionsTheyStandFor) {
  const Parsed p = parse(kServeLlamaFlags, {"-c",
                                            "512",
                                            "-np",
                                            "2",
                                            "-b",
                                            "64",
                                            "-ub",
                                            "32",
                                            "-ngl",
                                            "-1",
                                            "--kv-type",
                                            "q8_0",
                                            "-fa",
                                            "on",
                                            "--no-mmap",
                                            "-cram",
                                            "1GiB",
                                            "-kvu",
                                            "--prefill-chunk",
                                            "8",
                                            "-md",
                                            "d.gguf"});
  EXPECT_EQ(p.options.n_ctx, 512);
  EXPECT_EQ(p.options.parallel, 2);
  EXPECT_EQ(p.options.n_batch, 64);
  EXPECT_EQ(p.options.n_ubatch, 32);
  EXPECT_EQ(p.options.n_gpu_layers, -1);
  EXPECT_EQ(p.options.kv_type, KvType::kQ8_0);
  EXPECT_EQ(p.options.flash_attn, true);
  EXPECT_EQ(p.options.mmap, false);
  EXPECT_EQ(p.options.cache_ram, 1024);
  EXPECT_EQ(p.options.kv_unified, true);
  EXPECT_EQ(p.options.prefill_chunk, 8);
  EXPECT_EQ(p.options.draft_model, "d.gguf");
}

TEST(LlamaFlags, ACommandRefusesTheFlagsItDoesNotActOn) {
  CLI::App app{"test", "gantry"};
  LlamaFlags f;
  add_llama_flags(app, f, kBenchLlamaFlags);
  const char* argv[] = {"gantry", "--ctx", "512"};
  EXPECT_THROW(app.parse(3, argv), CLI::ParseError);
}

TEST(LlamaFlags, ErrorsNameTheFlag) {
  LlamaFlags f;
  f.ctx = 1u << 25;
  model::LlamaOptions o;
  Status st = apply(f, o);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--ctx"), std::string::npos) << st.message();
  f = {};
  f.kv_type = "q3";
  st = apply(f, o);
  EXPECT_NE(st.message().find("--kv-type"), std::string::npos) << st.message();
  f = {};
  f.cache_ram = "lots";
  st = apply(f, o);
  EXPECT_NE(st.message().find("--cache-ram"), std::string::npos) << st.message();
  EXPECT_STREQ(llama_cpp_alias("-ub"), "--ubatch-size");
  EXPECT_STREQ(llama_cpp_alias("-x"), "-x");
}

// `name` as a flag of its own in a help text (so "-ub" is not found inside "--ubatch").
bool mentions(const std::string& help, const std::string& name) {
  auto flag_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; };
  for (size_t at = help.find(name); at != std::string::npos; at = help.find(name, at + 1)) {
    const bool starts = at == 0 || !flag_char(help[at - 1]);
    const size_t end = at + name.size();
    if (starts && (end == help.size() || !flag_char(help[end]))) return true;
  }
  return false;
}

// Each command declares its set: its --help names every flag (and llama.cpp's short spellings).
TEST(LlamaFlagsCli, EachCommandDeclaresItsSet) {
  const std::vector<std::pair<LlamaFlag, std::string>> names = {{kLlamaCtx, "--ctx-size"},
                                                                {kLlamaParallel, "-np"},
                                                                {kLlamaBatch, "--batch-size"},
                                                                {kLlamaUbatch, "-ub"},
                                                                {kLlamaGpuLayers, "-ngl"},
                                                                {kLlamaKvType, "--kv-type"},
                                                                {kLlamaFlashAttn, "-fa"},
                                                                {kLlamaThreads, "--threads"},
                                                                {kLlamaMmap, "--no-mmap"},
                                                                {kLlamaChatTemplate, "--chat-template-file"},
                                                                {kLlamaReasoningFormat, "--reasoning-format"},
                                                                {kLlamaSpeculative, "--spec-draft-model"},
                                                                {kLlamaPromptCache, "-cram"},
                                                                {kLlamaKvUnified, "-kvu"},
                                                                {kLlamaPrefillChunk, "--prefill-chunk"},
                                                                {kLlamaRpc, "--rpc"}};
  for (const Command& c : kCommands) {
    const auto r = gantry::testing::run_gantry({c.name, "--help"});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    for (const auto& [flag, name] : names) {
      EXPECT_EQ(mentions(r.out, name), (c.which & flag) != 0) << c.name << " --help and " << name << ":\n"
                                                              << r.out;
    }
  }
}

// The spellings reach the command: plan's JSON options and bench's batch sizes are the same whichever is
// used.
TEST(LlamaFlagsCli, PlanAndBenchTakeEverySpelling) {
  const std::string tiny = GANTRY_DEPS_DIR "/models/tiny-llama.gguf";
  ASSERT_TRUE(std::filesystem::exists(tiny)) << "run 'make setup'";
  nlohmann::json first;
  for (const Args& spelling :
       {Args{"--ctx", "512", "--ubatch", "64", "--gpu-layers", "0", "--parallel", "2"},
        Args{"--ctx-size", "512", "--ubatch-size", "64", "--n-gpu-layers", "0", "-np", "2"},
        Args{"-c", "512", "-ub", "64", "-ngl", "0", "--parallel", "2"}}) {
    Args args{"plan", tiny, "--json"};
    args.insert(args.end(), spelling.begin(), spelling.end());
    const auto r = gantry::testing::run_gantry(args);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["context"]["n_ctx"].get<uint32_t>(), 512u) << r.out;
    // The plan itself (not the free memory the machine reports, which moves between runs).
    const nlohmann::json plan = {{"context", j["context"]}, {"totals", j["totals"]}};
    if (first.is_null()) first = plan;
    EXPECT_EQ(plan, first);
  }
  for (const Args& spelling : {Args{"--batch-size", "48", "--ubatch-size", "16"},
                               Args{"-b", "48", "-ub", "16"}, Args{"--batch", "48", "--ubatch", "16"}}) {
    Args args{"bench", tiny, "-p", "16", "-n", "0", "-r", "1", "-t", "1", "--json"};
    args.insert(args.end(), spelling.begin(), spelling.end());
    const auto r = gantry::testing::run_gantry(args, std::chrono::seconds(120));
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["n_batch"].get<uint32_t>(), 48u);
    EXPECT_EQ(j["n_ubatch"].get<uint32_t>(), 16u);
  }
}

}  // namespace
}  // namespace gantry::cli

// llama-server's command line respelled for `gantry serve` (cli/llama_server_args.h): each kind of flag
// (kept, respelled, listed, dropped, refused), --flag=value, and Gantry's own spelling untouched.
#include "cli/llama_server_args.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gantry::cli {
namespace {

using Args = std::vector<std::string>;

Args respell(const Args& in) {
  auto r = respell_llama_server_args(in);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : Args{};
}

std::string refusal(const Args& in) {
  auto r = respell_llama_server_args(in);
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.status().message();
}

TEST(LlamaServerArgs, GantrysOwnSpellingPassesUnchanged) {
  const Args in = {"m.gguf", "--port", "0", "--ctx", "512", "--api-key-file", "k.txt", "--grpc-port", "-1"};
  EXPECT_EQ(respell(in), in);
}

TEST(LlamaServerArgs, TheModelBecomesTheArgumentUnderAnyName) {
  EXPECT_EQ(respell({"-m", "a.gguf", "--port", "8080"}),
            (Args{"a.gguf", "--port", "8080", "--any-model-name"}));
  EXPECT_EQ(respell({"--model=a.gguf"}), (Args{"a.gguf", "--any-model-name"}));
  EXPECT_EQ(respell({"-mu", "https://h/m.gguf"}), (Args{"https://h/m.gguf", "--any-model-name"}));
}

TEST(LlamaServerArgs, FlagsAreRespelled) {
  EXPECT_EQ(respell({"-a", "x", "--temp", "0.5", "-s", "7", "-n", "64", "--top-k", "10", "--pooling", "cls"}),
            (Args{"--alias", "x", "--temp", "0.5", "--seed", "7", "--max-tokens", "64", "--top-k", "10",
                  "--pooling", "cls"}));
  EXPECT_EQ(respell({"--n-predict", "-1"}), Args{});  // until the end: Gantry's default
  EXPECT_EQ(respell({"--threads-http", "3", "--no-webui"}), (Args{"--http-threads", "3", "--no-dashboard"}));
}

TEST(LlamaServerArgs, CommaListsBecomeRepeatedFlags) {
  // As --flag=VALUE: CLI11 would give a list option the model that follows too.
  EXPECT_EQ(respell({"--api-key", "k1,k2", "-m", "a.gguf"}),
            (Args{"--api-key=k1", "--api-key=k2", "a.gguf", "--any-model-name"}));
  EXPECT_EQ(respell({"--cors-origins=https://a,https://b"}),
            (Args{"--cors-origin=https://a", "--cors-origin=https://b"}));
  EXPECT_EQ(respell({"--host", "127.0.0.1,::1"}),
            (Args{"--host", "127.0.0.1,::1"}));  // Gantry takes the list
}

TEST(LlamaServerArgs, KAndVCacheTypesMustAgree) {
  EXPECT_EQ(respell({"-ctk", "q8_0", "-ctv", "q8_0"}), (Args{"--kv-type", "q8_0"}));
  EXPECT_NE(refusal({"-ctk", "f16", "-ctv", "q8_0"}).find("one type for K and V"), std::string::npos);
}

TEST(LlamaServerArgs, WhatGantryDoesAnywayIsDropped) {
  EXPECT_EQ(respell({"--jinja", "--no-jinja", "--embedding", "--reranking", "--metrics", "--no-slots", "-cb",
                     "--offline", "--keep", "10", "-sps", "0.5"}),
            Args{});
}

TEST(LlamaServerArgs, TheRestIsRefusedByNameWithAReason) {
  EXPECT_EQ(refusal({"-m", "a.gguf", "--lora", "x.gguf"}),
            "llama-server's --lora is not supported: Gantry applies no LoRA adapters or control vectors");
  EXPECT_NE(refusal({"-hf", "org/repo"}).find("Hugging Face"), std::string::npos);
  EXPECT_NE(refusal({"--mirostat=2"}).find("llama-server's --mirostat is not supported"), std::string::npos);
  EXPECT_NE(refusal({"--slots"}).find("/slots"), std::string::npos);
}

TEST(LlamaServerArgs, AMissingValueIsAnError) {
  EXPECT_EQ(refusal({"--alias"}), "--alias needs a value");
  EXPECT_EQ(refusal({"-m"}), "-m needs a value");
}

}  // namespace
}  // namespace gantry::cli

// Shared helpers for the llama.cpp tests: the generated tiny model, loaded once per process.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "gantry/backend/llama/weights.h"

namespace gantry::llama::testing {

inline std::string tiny_model_path() { return std::string(GANTRY_DEPS_DIR) + "/models/tiny-llama.gguf"; }
// The ~125M-parameter Q8_0 model (llama arch, 12 layers, 4 KV heads of 64).
inline std::string bench_model_path() {
  return std::string(GANTRY_DEPS_DIR) + "/models/bench-100m-q8_0.gguf";
}

// The tiny model (llama arch, 2 layers, n_embd 64), or nullptr when set-up has not generated it.
inline std::shared_ptr<LlamaWeights> tiny_model() {
  static std::shared_ptr<LlamaWeights> w = [] {
    auto r = LlamaWeights::load(tiny_model_path());
    return r.ok() ? *r : nullptr;
  }();
  return w;
}

#define GANTRY_REQUIRE_TINY_MODEL()                                                     \
  auto weights = ::gantry::llama::testing::tiny_model();                                \
  ASSERT_TRUE(weights) << "cannot load " << ::gantry::llama::testing::tiny_model_path() \
                       << " (run scripts/setup.sh: it generates the test models)"

}  // namespace gantry::llama::testing

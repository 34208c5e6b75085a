// Shared by the tests that compare a GGUF loaded two ways (a file and bytes, a file and a URL): the tokens
// a model handle generates greedily for one fixed prompt, or none (the failure reported) when it cannot.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "gantry/runtime/runtime.h"

namespace gantry::runtime::testing {

inline std::vector<int32_t> greedy_tokens(ModelHandle& h) {
  backend::GenerationRequest r;
  r.prompt = "Once upon a time";
  r.max_tokens = 12;
  r.sampling.temperature = 0;
  auto g = h->generate(r);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? g->tokens : std::vector<int32_t>();
}

}  // namespace gantry::runtime::testing

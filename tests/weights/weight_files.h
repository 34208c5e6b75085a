// Weight files written by tests/weights/make_weights.py (numpy, onnx, gguf-py: no Gantry code), once per
// test binary, into a temporary directory, with the bytes each tensor must load as.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "gantry/weights/loader.h"

namespace gantry::weights::testing {

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// The generated files' directory ("" with a message when python3/numpy/onnx are missing).
inline const std::filesystem::path& weight_files() {
  static const std::filesystem::path dir = [] {
    char tpl[] = "/tmp/gantry-weights-test-XXXXXX";
    const char* d = ::mkdtemp(tpl);
    if (d == nullptr) return std::filesystem::path();
    const std::string cmd = "/usr/bin/python3 " GANTRY_SOURCE_DIR "/tests/weights/make_weights.py " +
                            std::string(d) + " " GANTRY_DEPS_DIR "/llama/src/gguf-py >/dev/null";
    if (std::system(cmd.c_str()) != 0) return std::filesystem::path();
    return std::filesystem::path(d);
  }();
  return dir;
}

// Removes the generated files at exit.
struct WeightFilesCleanup : ::testing::Environment {
  void TearDown() override {
    std::error_code ec;
    if (!weight_files().empty()) std::filesystem::remove_all(weight_files(), ec);
  }
};

// Checks that every tensor listed in expected/<file>.json loads with that type, shape and bytes.
inline void expect_matches(const WeightLoader& loader, const std::string& file, bool raw_only = true) {
  const auto dir = weight_files();
  const auto expected = nlohmann::json::parse(slurp(dir / "expected" / (file + ".json")));
  size_t checked = 0;
  for (const auto& [name, v] : expected.items()) {
    if (raw_only && name.ends_with(".f32")) continue;
    SCOPED_TRACE(file + ": " + name);
    auto w = loader.load({name});
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    EXPECT_EQ(weight_type_name(w->type), v[0].get<std::string>());
    EXPECT_EQ(w->shape, Shape(v[1].get<std::vector<int64_t>>()));
    const std::string want = slurp(dir / "expected" / file / (name + ".bin"));
    ASSERT_EQ(w->data.byte_size(), want.size());
    // An empty tensor's data may be null (a URL source reads no bytes for it): memcmp must not see it.
    if (!want.empty()) {
      EXPECT_EQ(0, std::memcmp(w->data.data(), want.data(), want.size()));
    }
    const auto* info = loader.metadata().find(name);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->bytes, want.size());
    ++checked;
  }
  EXPECT_GT(checked, 0u);
}

}  // namespace gantry::weights::testing

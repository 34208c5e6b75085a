// Shared helpers of the ONNX backend tests: the bundled models' paths, a one-thread placement and
// deterministic random inputs.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "gantry/backend/placement.h"
#include "gantry/core/tensor.h"

namespace gantry::testing {

inline const std::filesystem::path kModels = std::filesystem::path(GANTRY_DEPS_DIR) / "models";
inline const std::filesystem::path kMlp = kModels / "mlp_64_128_10.onnx";
inline const std::filesystem::path kSilero = kModels / "silero_vad_v5.onnx";
inline const std::filesystem::path kDet = kModels / "paddleocr" / "ch_PP-OCRv4_det_infer.onnx";

// One intra-op and one inter-op thread: results comparable bit for bit, timings steady on 2 cores.
inline backend::Placement one_thread() {
  backend::Placement p;
  p.intra_op_threads = 1;
  p.inter_op_threads = 1;
  return p;
}

// f32 values uniform in [-1, 1), the same for the same seed.
inline Tensor random_f32(const Shape& shape, unsigned seed) {
  auto t = Tensor::allocate(DType::kFloat32, shape).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (auto& v : t.values<float>()) v = dist(rng);
  return t;
}

}  // namespace gantry::testing

// Fails (not skips) the test when set-up's model is missing: `make test` always makes them.
#define REQUIRE_MODEL(path)           \
  if (!std::filesystem::exists(path)) \
  FAIL() << (path).string() << " is missing: run `make setup` to generate models"

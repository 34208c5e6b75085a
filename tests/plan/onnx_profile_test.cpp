// The ONNX memory profile: prediction from two measured batch sizes, JSON round trip, the disk cache.
#include "gantry/plan/onnx_profile.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace gantry::plan {
namespace {

namespace fs = std::filesystem;

OnnxMemoryPoint point(int64_t batch, uint64_t activations, uint64_t arena = 1000) {
  OnnxMemoryPoint p;
  p.batch = batch;
  OnnxMemoryBytes b;
  b.weights = 5000;
  b.load_peak = 6000;
  b.activations = activations;
  b.arena = arena;
  b.outside_pool = 300;
  p.devices["cpu"] = b;
  return p;
}

OnnxMemoryProfile profile_1_2() {
  OnnxMemoryProfile p;
  p.key = onnx_profile_key("abc", "cpu X", "cpu", "1.29.0");
  p.model = "m.onnx";
  p.provider = "cpu";
  p.shapes = "x=N,3,64,64";
  p.batch_dynamic = true;
  p.put(point(2, 700, 2000));
  p.put(point(1, 400));
  return p;
}

TEST(OnnxProfile, MeasuredBatchIsReturnedAsMeasured) {
  const auto p = predict(profile_1_2(), 2);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->measured);
  EXPECT_EQ(p->basis, "measured at batch 2");
  EXPECT_EQ(p->devices.at("cpu").activations, 700u);
  // The load's peak (6000) is above weights + activations (5700): it is the pool's peak.
  EXPECT_EQ(p->peak_in_use(), 6000u);
  EXPECT_EQ(p->reservation(), 6300u);
  EXPECT_EQ(p->total(), 8300u);
}

TEST(OnnxProfile, UnmeasuredBatchIsPredictedLinearlyFromTwoPoints) {
  const auto p = predict(profile_1_2(), 8);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_FALSE(p->measured);
  EXPECT_EQ(p->basis, "predicted from 1 and 2");
  EXPECT_EQ(p->from, (std::vector<int64_t>{1, 2}));
  const auto& cpu = p->devices.at("cpu");
  EXPECT_EQ(cpu.activations, 400u + 7 * 300u);
  EXPECT_EQ(cpu.weights, 5000u);
  EXPECT_EQ(cpu.outside_pool, 300u);
  EXPECT_EQ(cpu.arena, 2000u);  // the larger point's
  EXPECT_EQ(p->peak_in_use(), 5000u + 2500u);
}

TEST(OnnxProfile, PrefersTheTwoLargestMeasuredBatchesBelow) {
  OnnxMemoryProfile prof = profile_1_2();
  prof.put(point(8, 2000));  // not linear with 1 and 2: the nearer pair wins
  auto p = predict(prof, 16);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->basis, "predicted from 2 and 8");
  EXPECT_EQ(p->devices.at("cpu").activations, 3733u);  // 2000 + (16 - 8) * 1300 / 6, rounded
  p = predict(prof, 4);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->basis, "predicted from 1 and 2");
}

TEST(OnnxProfile, RefusesWhatItCannotPredict) {
  OnnxMemoryProfile one = profile_1_2();
  one.points.pop_back();
  EXPECT_EQ(predict(one, 8).status().code(), StatusCode::kFailedPrecondition);
  OnnxMemoryProfile fixed = one;
  fixed.batch_dynamic = false;
  EXPECT_TRUE(predict(fixed, 1).ok());
  EXPECT_EQ(predict(fixed, 2).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(predict(profile_1_2(), 0).status().code(), StatusCode::kInvalidArgument);
  // Shrinking activations extrapolate to zero, never below.
  OnnxMemoryProfile down = profile_1_2();
  down.put(point(2, 100));
  auto p = predict(down, 9);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->devices.at("cpu").activations, 0u);
}

TEST(OnnxProfile, BaseBatches) {
  EXPECT_EQ(base_batches(true, 1), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(base_batches(false, 4), (std::vector<int64_t>{4}));
}

TEST(OnnxProfile, JsonRoundTripAndTheCache) {
  const OnnxMemoryProfile p = profile_1_2();
  auto back = profile_from_json(profile_to_json(p));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(profile_to_json(*back), profile_to_json(p));

  const fs::path dir = fs::temp_directory_path() / ("gantry-onnx-profile-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const OnnxProfileCache cache(dir.string());
  EXPECT_FALSE(cache.get(p.key));
  ASSERT_TRUE(cache.put(p).ok());
  EXPECT_TRUE(fs::exists(cache.path_for(p.key)));
  auto got = cache.get(p.key);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->points.size(), 2u);
  EXPECT_EQ(got->points[0].devices.at("cpu").outside_pool, 300u);
  // Another key, even at the same path, is not this profile's.
  EXPECT_FALSE(cache.get(onnx_profile_key("abc", "cpu X", "cuda", "1.29.0")));
  // A damaged file is no profile (measured again), never an error.
  std::ofstream(cache.path_for(p.key)) << "{\"key\": 1";
  EXPECT_FALSE(cache.get(p.key));
  fs::remove_all(dir);
}

TEST(OnnxProfile, MalformedJsonIsRefusedWithTheField) {
  nlohmann::json j = profile_to_json(profile_1_2());
  j["points"][0]["devices"]["cpu"]["weights"] = -1;
  auto r = profile_from_json(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("weights"), std::string::npos) << r.status().message();
  j = profile_to_json(profile_1_2());
  j["points"][1]["batch"] = 1;
  EXPECT_FALSE(profile_from_json(j).ok());
}

}  // namespace
}  // namespace gantry::plan

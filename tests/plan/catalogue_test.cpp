// The accelerator/instance catalogue: the shipped file parses, and bad files fail naming the file and field.
#include "gantry/plan/catalogue.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gantry/hw/bandwidth.h"

namespace gantry::plan {
namespace {

using nlohmann::json;

json valid() {
  return json::parse(R"({
    "schema_version": 1, "catalogue_version": "test-1", "notes": ["a test"],
    "accelerators": [
      {"id": "big", "name": "Big GPU", "memory_gib": 80, "memory_bandwidth_gb_s": 3000,
       "fp16_dense_tflops": 900, "source": "test", "match": ["Big GPU X"]},
      {"id": "big-lite", "name": "Big GPU Lite", "memory_gib": 24, "memory_bandwidth_gb_s": 300,
       "fp16_dense_tflops": 100, "source": "test", "match": ["Big GPU"]}],
    "instances": [
      {"id": "cloud-big8", "provider": "cloud", "name": "big8", "accelerator": "big", "count": 8,
       "interconnect": "links", "host_memory_gib": 1024, "storage_bandwidth_gb_s": 4,
       "price_usd_per_hour": 80, "price_date": "2026-11-24", "price_source": "test",
       "price_note": "approximate"}]})");
}

// Parses `j` and returns the error message ("" when it parses).
std::string error_of(const json& j) {
  auto c = parse_catalogue(j.dump(), "test.json");
  return c.ok() ? "" : c.status().message();
}

TEST(Catalogue, ParsesAValidFile) {
  auto c = parse_catalogue(valid().dump(), "test.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->version, "test-1");
  ASSERT_EQ(c->accelerators.size(), 2u);
  EXPECT_DOUBLE_EQ(c->accelerators[0].memory_bandwidth_gb_s, 3000);
  ASSERT_NE(c->find_instance("cloud-big8"), nullptr);
  EXPECT_EQ(c->find_instance("cloud-big8")->count, 8);
  EXPECT_EQ(c->find_instance("cloud-big8")->price_date, "2026-11-24");
  EXPECT_EQ(c->find_accelerator("nope"), nullptr);
  // The first accelerator whose substring matches, case-insensitively.
  EXPECT_EQ(c->match_device("NVIDIA big gpu x 80GB")->id, "big");
  EXPECT_EQ(c->match_device("Big GPU Lite")->id, "big-lite");
  EXPECT_EQ(c->match_device("Other"), nullptr);
}

TEST(Catalogue, TheShippedCatalogueParses) {
  auto c = load_catalogue(std::string(GANTRY_SOURCE_DIR) + "/data/catalogue.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->schema_version, kCatalogueSchemaVersion);
  for (const char* id : {"h100-80gb", "h100-pcie", "h200", "a100-80gb", "a100-40gb", "l4", "l40s", "a10g",
                         "t4", "rtx-4090", "mi300x"}) {
    EXPECT_NE(c->find_accelerator(id), nullptr) << id;
  }
  EXPECT_GE(c->instances.size(), 6u);
  for (const auto& i : c->instances)
    EXPECT_FALSE(i.price_note.empty()) << i.id << ": unverified prices say so";
  // L40S must not be taken for an L4.
  EXPECT_EQ(c->match_device("NVIDIA L40S")->id, "l40s");
  EXPECT_EQ(c->match_device("NVIDIA L4")->id, "l4");
}

TEST(Catalogue, DeviceBandwidthHasOneDefinitionTheHardwareTable) {
  auto c = load_catalogue(std::string(GANTRY_SOURCE_DIR) + "/data/catalogue.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  for (const auto& a : c->accelerators) {
    const hw::KnownDevice* k = hw::known_device_by_id(a.id);
    ASSERT_NE(k, nullptr) << a.id << ": the shipped catalogue's accelerators are all in hw's table";
    EXPECT_DOUBLE_EQ(a.memory_bandwidth_gb_s * 1e9, static_cast<double>(k->memory_bandwidth_bytes_per_s))
        << a.id;
  }
  // Repeating the figure is allowed; contradicting it is an error naming both.
  const std::string head =
      R"({"schema_version": 1, "catalogue_version": "t", "instances": [], "accelerators": [
      {"id": "h100-80gb", "name": "H100", "memory_gib": 80, "fp16_dense_tflops": 989, "source": "s")";
  auto same = parse_catalogue(head + R"(, "memory_bandwidth_gb_s": 3350}]})", "t.json");
  ASSERT_TRUE(same.ok()) << same.status().to_string();
  EXPECT_DOUBLE_EQ(same->accelerators[0].memory_bandwidth_gb_s, 3350);
  auto other = parse_catalogue(head + R"(, "memory_bandwidth_gb_s": 9999}]})", "t.json");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("disagrees with the hardware registry"), std::string::npos)
      << other.status().message();
  auto omitted = parse_catalogue(head + "}]}", "t.json");
  ASSERT_TRUE(omitted.ok()) << omitted.status().to_string();
  EXPECT_DOUBLE_EQ(omitted->accelerators[0].memory_bandwidth_gb_s, 3350);
}

TEST(Catalogue, BadFilesNameTheFileAndField) {
  EXPECT_NE(parse_catalogue("{not json", "x.json").status().message().find("x.json"), std::string::npos);
  EXPECT_FALSE(parse_catalogue("[]", "x.json").ok());
  const std::string deep = R"({"x":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_NE(
      parse_catalogue(deep, "x.json").status().message().find("x.json: JSON nests deeper than 64 levels"),
      std::string::npos)
      << parse_catalogue(deep, "x.json").status().message();
  struct Case {
    std::function<void(json&)> edit;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j["schema_version"] = 2; }, "schema_version 2"},
      {[](json& j) { j.erase("schema_version"); }, "schema_version"},
      {[](json& j) { j.erase("instances"); }, "\"instances\""},
      {[](json& j) { j["extra"] = 1; }, "unknown field \"extra\""},
      {[](json& j) { j["accelerators"][0].erase("memory_bandwidth_gb_s"); },
       "accelerators[0]: missing field \"memory_bandwidth_gb_s\""},
      {[](json& j) { j["accelerators"][1]["memory_gib"] = -1; }, "accelerators[1]: field \"memory_gib\""},
      {[](json& j) { j["accelerators"][0]["fp16_dense_tflops"] = "900"; }, "\"fp16_dense_tflops\""},
      {[](json& j) { j["accelerators"][0]["typo"] = 1; }, "accelerators[0]: unknown field \"typo\""},
      {[](json& j) { j["accelerators"][1]["id"] = "big"; }, "duplicate id \"big\""},
      {[](json& j) { j["instances"][0]["accelerator"] = "small"; }, "instances[0]: field \"accelerator\""},
      {[](json& j) { j["instances"][0]["count"] = 0; }, "instances[0]: field \"count\""},
      {[](json& j) { j["instances"][0]["price_date"] = "last week"; }, "\"price_date\" must be YYYY-MM-DD"},
      {[](json& j) { j["instances"][0].erase("price_usd_per_hour"); },
       "missing field \"price_usd_per_hour\""},
      {[](json& j) { j["instances"][0]["match"] = json::array(); }, "unknown field \"match\""},
  };
  for (const auto& c : cases) {
    json j = valid();
    c.edit(j);
    const std::string e = error_of(j);
    EXPECT_NE(e.find("test.json"), std::string::npos) << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << "expected \"" << c.expect << "\" in: " << e;
  }
  // An instance without a price note is fine (a verified price).
  json j = valid();
  j["instances"][0].erase("price_note");
  EXPECT_EQ(error_of(j), "");
}

TEST(Catalogue, MissingFileSaysWhatToDo) {
  auto c = load_catalogue("/nonexistent/cat.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("/nonexistent/cat.json"), std::string::npos);
  EXPECT_NE(c.status().message().find("--catalogue"), std::string::npos);
}

}  // namespace
}  // namespace gantry::plan

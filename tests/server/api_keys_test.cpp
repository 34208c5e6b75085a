#include "gantry/server/api_keys.h"

#include <gtest/gtest.h>

#include <fstream>

namespace gantry::server {
namespace {

HttpRequest with(std::string name, std::string value) {
  HttpRequest r;
  r.headers.emplace_back(std::move(name), std::move(value));
  return r;
}

TEST(ApiKeys, AcceptsBearerAndKeyHeadersOnlyWithARightKey) {
  auto keys = ApiKeys::from_keys({"alpha-key", "beta-key"});
  EXPECT_TRUE(keys.allows(with("authorization", "Bearer alpha-key")));
  EXPECT_TRUE(keys.allows(with("authorization", "bearer beta-key")));
  EXPECT_TRUE(keys.allows(with("api-key", "beta-key")));
  EXPECT_TRUE(keys.allows(with("x-api-key", "alpha-key")));
  EXPECT_FALSE(keys.allows(with("authorization", "Bearer alpha-ke")));
  EXPECT_FALSE(keys.allows(with("authorization", "Bearer alpha-key2")));
  EXPECT_FALSE(keys.allows(with("authorization", "Basic alpha-key")));
  EXPECT_FALSE(keys.allows(with("x-api-key", "")));
  EXPECT_FALSE(keys.allows(HttpRequest{}));
  EXPECT_TRUE(ApiKeys{}.allows(HttpRequest{})) << "no key configured: open";
}

TEST(ApiKeys, OwnerNamesTheKeyByItsPosition) {
  auto keys = ApiKeys::from_keys({"alpha-key", "beta-key", "alpha-key"});
  EXPECT_EQ(keys.owner(with("authorization", "Bearer alpha-key")), 1u);
  EXPECT_EQ(keys.owner(with("x-api-key", "alpha-key")), 1u) << "any header, the same owner";
  EXPECT_EQ(keys.owner(with("api-key", "beta-key")), 2u);
  EXPECT_EQ(keys.owner(with("authorization", "Bearer beta-ke")), 0u);
  EXPECT_EQ(keys.owner(HttpRequest{}), 0u);
  EXPECT_EQ(ApiKeys{}.owner(with("authorization", "Bearer alpha-key")), 0u) << "no key configured: one owner";
}

TEST(ApiKeys, ConstantTimeEqualIsEquality) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
  EXPECT_FALSE(constant_time_equal("", "a"));
  EXPECT_TRUE(constant_time_equal("", ""));
}

TEST(ApiKeys, ReadsFilesAndRefusesEmptyOrMissingOnes) {
  auto dir = std::filesystem::temp_directory_path() / ("gantry_keys_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "k1") << "# team A\n  key-one  \n\nkey-two # trailing comment\n";
  std::ofstream(dir / "empty") << "# nothing here\n\n";
  std::vector<std::filesystem::path> files = {dir / "k1"};
  auto keys = ApiKeys::from_files(files);
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  EXPECT_EQ(keys->size(), 2u);
  EXPECT_TRUE(keys->allows(with("api-key", "key-one")));
  EXPECT_TRUE(keys->allows(with("api-key", "key-two")));
  std::vector<std::filesystem::path> empty = {dir / "empty"};
  auto e = ApiKeys::from_files(empty);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("holds no key"), std::string::npos);
  std::vector<std::filesystem::path> missing = {dir / "nope"};
  EXPECT_EQ(ApiKeys::from_files(missing).status().code(), StatusCode::kIoError);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gantry::server

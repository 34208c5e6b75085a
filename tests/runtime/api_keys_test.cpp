#include "gantry/runtime/api_keys.h"

#include <gtest/gtest.h>

#include <fstream>

namespace gantry::runtime {
namespace {

// A request carrying one header (as the HTTP and gRPC front ends look headers up: lower-case names).
ApiKeys::HeaderLookup with(std::string name, std::string value) {
  return [name = std::move(name),
          value = std::move(value)](std::string_view n) -> std::optional<std::string_view> {
    if (n == name) return std::string_view(value);
    return std::nullopt;
  };
}
const ApiKeys::HeaderLookup kNoHeaders = [](std::string_view) -> std::optional<std::string_view> {
  return std::nullopt;
};

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
  EXPECT_FALSE(keys.allows(kNoHeaders));
  EXPECT_TRUE(ApiKeys{}.allows(kNoHeaders)) << "no key configured: open";
}

TEST(ApiKeys, OwnerNamesTheKeyByItsPosition) {
  auto keys = ApiKeys::from_keys({"alpha-key", "beta-key", "alpha-key"});
  EXPECT_EQ(keys.owner(with("authorization", "Bearer alpha-key")), 1u);
  EXPECT_EQ(keys.owner(with("x-api-key", "alpha-key")), 1u) << "any header, the same owner";
  EXPECT_EQ(keys.owner(with("api-key", "beta-key")), 2u);
  EXPECT_EQ(keys.owner(with("authorization", "Bearer beta-ke")), 0u);
  EXPECT_EQ(keys.owner(kNoHeaders), 0u);
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

constexpr std::string_view kTenants = R"({"tenants": [
  {"name": "chat", "keys": ["chat-key-1", "chat-key-2"], "priority": "interactive", "weight": 3,
   "requests_per_minute": 600, "tokens_per_minute": 20000, "max_concurrent": 8, "deadline_ms": 5000},
  {"name": "nightly", "key": "nightly-key", "priority": "batch", "max_tokens": 512, "models": ["qwen"]}
]})";

TEST(ApiKeys, ATenantsFileNamesEachKeysTenantAndLimits) {
  auto keys = ApiKeys::from_json(kTenants);
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  EXPECT_EQ(keys->size(), 3u);
  ASSERT_EQ(keys->tenants().size(), 2u);
  EXPECT_EQ(keys->tenant(with("authorization", "Bearer chat-key-2")), "chat");
  EXPECT_EQ(keys->tenant(with("x-api-key", "nightly-key")), "nightly");
  EXPECT_EQ(keys->tenant(with("x-api-key", "nightly-ke")), "") << "no key matched: no tenant";
  const auto& chat = keys->tenants()[0].limits;
  EXPECT_EQ(chat.requests_per_minute, 600u);
  EXPECT_EQ(chat.tokens_per_minute, 20000u);
  EXPECT_EQ(chat.max_concurrent, 8u);
  EXPECT_EQ(chat.weight, 3);
  EXPECT_EQ(chat.deadline, std::chrono::milliseconds(5000));
  EXPECT_EQ(chat.priority, runtime::Priority::kInteractive);
  const auto& nightly = keys->tenants()[1].limits;
  EXPECT_EQ(nightly.priority, runtime::Priority::kBatch);
  EXPECT_EQ(nightly.max_tokens, 512);
  EXPECT_EQ(nightly.models, std::vector<std::string>{"qwen"});
  EXPECT_FALSE(nightly.requests_per_minute);
  EXPECT_NE(keys->owner(with("api-key", "chat-key-1")), keys->owner(with("api-key", "chat-key-2")))
      << "each key its own owner, even within a tenant";
}

TEST(ApiKeys, BareKeysAreTheOneUnlimitedDefaultTenant) {
  auto keys = ApiKeys::from_keys({"alpha-key", "beta-key"});
  ASSERT_EQ(keys.tenants().size(), 1u);
  EXPECT_EQ(keys.tenants()[0].name, "default");
  EXPECT_FALSE(keys.tenants()[0].limits.requests_per_minute);
  EXPECT_EQ(keys.tenant(with("api-key", "beta-key")), "default");
  EXPECT_EQ(ApiKeys{}.tenant(with("api-key", "beta-key")), "") << "no keys: no tenant";
}

TEST(ApiKeys, ABadTenantsFileIsRefusedNamingTheTenantNeverTheKey) {
  const std::pair<std::string_view, std::string_view> bad[] = {
      {R"({"tenants": [{"name": "a", "key": "secret-key-1", "requests_per_min": 5}]})", "unknown field"},
      {R"({"tenants": [{"name": "a", "key": "secret-key-1", "requests_per_minute": 0}]})",
       "requests_per_minute"},
      {R"({"tenants": [{"name": "a", "key": "secret-key-1", "weight": -1}]})", "weight"},
      {R"({"tenants": [{"name": "a", "key": "secret-key-1", "priority": "urgent"}]})", "priority"},
      {R"({"tenants": [{"name": "a"}]})", "needs 'key'"},
      {R"({"tenants": [{"key": "secret-key-1"}]})", "needs a 'name'"},
      {R"({"tenants": [{"name": "a", "key": "short"}]})", "at least 8"},
      {R"({"tenants": [{"name": "a", "key": "secret-key-1"}, {"name": "a", "key": "secret-key-2"}]})",
       "twice"},
      {R"({"tenants": []})", "at least one"},
      {R"({"tenant": []})", "unknown field"},
      {R"({"tenants": [)", "not a JSON object"},
  };
  for (const auto& [text, why] : bad) {
    auto k = ApiKeys::from_json(text, "f.json");
    ASSERT_FALSE(k.ok()) << text;
    EXPECT_EQ(k.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(k.status().message().find(why), std::string::npos) << k.status().message();
    EXPECT_EQ(k.status().message().find("secret-key"), std::string::npos)
        << "a key echoed: " << k.status().message();
  }
}

TEST(ApiKeys, FilesMixAndAReloadKeepsAKeysOwner) {
  auto dir = std::filesystem::temp_directory_path() / ("gantry_tenants_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "t.json") << kTenants;
  std::ofstream(dir / "bare") << "bare-key-1\n";
  std::vector<std::filesystem::path> files = {dir / "t.json", dir / "bare"};
  auto keys = ApiKeys::from_files(files);
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  EXPECT_EQ(keys->tenant(with("api-key", "bare-key-1")), "default");
  EXPECT_EQ(keys->tenant(with("api-key", "nightly-key")), "nightly");
  const size_t nightly_owner = keys->owner(with("api-key", "nightly-key"));
  // The reload: chat's keys are gone, a new key comes first.
  std::ofstream(dir / "t.json") << R"({"tenants": [{"name": "new", "key": "brand-new-key"},
                                                  {"name": "nightly", "key": "nightly-key"}]})";
  auto reloaded = ApiKeys::from_files(files, {}, &*keys);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().message();
  EXPECT_FALSE(reloaded->allows(with("api-key", "chat-key-1")));
  EXPECT_EQ(reloaded->owner(with("api-key", "nightly-key")), nightly_owner) << "what it stored stays its own";
  const size_t fresh = reloaded->owner(with("api-key", "brand-new-key"));
  for (const char* old : {"chat-key-1", "chat-key-2", "nightly-key", "bare-key-1"})
    EXPECT_NE(fresh, keys->owner(with("api-key", old))) << "a new key never takes an old key's number";
  std::ofstream(dir / "bare") << "nightly-key\n";
  auto twice = ApiKeys::from_files(files);
  ASSERT_FALSE(twice.ok()) << "one key in two tenants";
  EXPECT_EQ(twice.status().message().find("nightly-key"), std::string::npos) << twice.status().message();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gantry::runtime

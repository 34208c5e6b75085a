// The dashboard's embedded assets: every file of src/server/dashboard/ is compiled in byte for byte
// with the right content type and an ETag, the page references only assets that exist, has no inline
// code, and every asset answer carries the security headers.
#include "server/dashboard_assets.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "server/server_state.h"

namespace gantry::server {
namespace {
namespace fs = std::filesystem;
const fs::path kDir = fs::path(GANTRY_SOURCE_DIR) / "src/server/dashboard";

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string_view header(const HttpResponse& r, std::string_view name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return {};
}

TEST(DashboardAssets, EveryFileIsEmbeddedByteForByte) {
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(kDir)) files.insert(e.path().filename().string());
  ASSERT_FALSE(files.empty());
  std::set<std::string> embedded;
  for (const auto& a : embedded_dashboard_assets()) embedded.insert(std::string(a.name));
  EXPECT_EQ(files, embedded) << "rebuild after adding or removing a file in " << kDir;
  for (const auto& name : files) {
    const EmbeddedAsset* a = find_dashboard_asset(name);
    ASSERT_NE(a, nullptr) << name;
    EXPECT_EQ(a->bytes, read(kDir / name)) << name << " is stale in the binary";
  }
}

TEST(DashboardAssets, ContentTypesAndEtags) {
  std::set<std::string_view> etags;
  for (const auto& a : embedded_dashboard_assets()) {
    const std::string name(a.name);
    auto ends = [&](std::string_view s) { return name.size() >= s.size() && name.ends_with(s); };
    if (ends(".html"))
      EXPECT_EQ(a.content_type, "text/html; charset=utf-8");
    else if (ends(".js"))
      EXPECT_EQ(a.content_type, "text/javascript; charset=utf-8");
    else if (ends(".css"))
      EXPECT_EQ(a.content_type, "text/css; charset=utf-8");
    else if (ends(".svg"))
      EXPECT_EQ(a.content_type, "image/svg+xml");
    else
      ADD_FAILURE() << "no expected content type for " << name;
    ASSERT_EQ(a.etag.size(), 34u) << name;
    EXPECT_EQ(a.etag.front(), '"');
    EXPECT_EQ(a.etag.back(), '"');
    EXPECT_TRUE(etags.insert(a.etag).second) << name << " shares its ETag";
  }
}

TEST(DashboardAssets, PageReferencesOnlyEmbeddedAssetsAndHasNoInlineCode) {
  const EmbeddedAsset* index = find_dashboard_asset("index.html");
  ASSERT_NE(index, nullptr);
  const std::string html(index->bytes);
  std::regex ref(R"re((?:src|href)="([^"]*)")re");
  int refs = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), ref); it != std::sregex_iterator(); ++it) {
    const std::string url = (*it)[1];
    ASSERT_EQ(url.rfind("/dashboard/", 0), 0u) << "index.html refers outside /dashboard/: " << url;
    EXPECT_NE(find_dashboard_asset(url.substr(11)), nullptr) << "index.html refers to a missing " << url;
    ++refs;
  }
  EXPECT_GE(refs, 3);  // the script, the style sheet, the icon
  // CSP forbids inline code: no <script> without src, no style attributes or <style>, no on* handlers.
  EXPECT_FALSE(std::regex_search(html, std::regex(R"(<script(?![^>]*\ssrc=)[^>]*>)")));
  EXPECT_FALSE(std::regex_search(html, std::regex(R"(\sstyle=|<style|\son[a-z]+=)", std::regex::icase)));
  // Module imports between the scripts resolve to embedded assets too.
  std::regex import(R"re(from\s+'\./([^']+)')re");
  int imports = 0;
  for (const auto& a : embedded_dashboard_assets()) {
    if (!a.name.ends_with(".js")) continue;
    const std::string js(a.bytes);
    for (auto it = std::sregex_iterator(js.begin(), js.end(), import); it != std::sregex_iterator(); ++it) {
      EXPECT_NE(find_dashboard_asset((*it)[1].str()), nullptr) << a.name << " imports a missing " << (*it)[1];
      ++imports;
    }
    EXPECT_EQ(js.find("innerHTML"), std::string::npos) << a.name << " writes HTML";
  }
  EXPECT_GE(imports, 4);
}

TEST(DashboardAssets, NamesOutsideTheSetAreNotFound) {
  EXPECT_EQ(find_dashboard_asset(""), nullptr);
  EXPECT_EQ(find_dashboard_asset("../server.cpp"), nullptr);
  EXPECT_EQ(find_dashboard_asset(".hidden"), nullptr);
  EXPECT_EQ(find_dashboard_asset("a/app.js"), nullptr);
  EXPECT_EQ(find_dashboard_asset("missing.js"), nullptr);
}

TEST(DashboardAssets, AnswersCarrySecurityHeadersAndRevalidate) {
  HttpRequest req;
  req.method = "GET";
  auto r = dashboard_asset("app.js", req);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(header(*r, "Content-Security-Policy"), kDashboardCsp);
  EXPECT_NE(kDashboardCsp.find("script-src 'self'"), std::string_view::npos);
  EXPECT_EQ(kDashboardCsp.find("unsafe-inline"), std::string_view::npos);
  EXPECT_EQ(header(*r, "X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(header(*r, "Referrer-Policy"), "no-referrer");
  EXPECT_EQ(header(*r, "Cache-Control"), "no-cache");
  const std::string etag(header(*r, "ETag"));
  EXPECT_EQ(etag, find_dashboard_asset("app.js")->etag);
  EXPECT_FALSE(r->body.empty());

  req.headers.emplace_back("if-none-match", etag);
  auto again = dashboard_asset("app.js", req);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());
  EXPECT_EQ(header(*again, "ETag"), etag);

  req.headers = {{"if-none-match", "\"something-else\""}};
  EXPECT_EQ(dashboard_asset("app.js", req)->status, 200);
  EXPECT_FALSE(dashboard_asset("nope.js", req));
}

}  // namespace
}  // namespace gantry::server

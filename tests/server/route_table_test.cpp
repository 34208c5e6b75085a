// The composed route tables (route_table.h): what a method and path select, before any body is read.
#include "server/route_table.h"

#include <gtest/gtest.h>

#include <set>

namespace gantry::server {
namespace {

TEST(RouteTable, CapturesModelVersionAndIdFromDecodedSegments) {
  auto r = find_route("/v2/models/my%20model/versions/1/infer", "POST");
  ASSERT_NE(r.route, nullptr);
  EXPECT_EQ(r.route->pattern, "/v2/models/{model}/versions/{version}/infer");
  EXPECT_EQ(r.params.model, "my model");
  EXPECT_EQ(r.params.version, "1");
  EXPECT_EQ(r.protocol, Protocol::kKserve);
  EXPECT_TRUE(r.route->inference && r.route->batched && r.route->versioned);

  r = find_route("/v1/responses/resp_1", "DELETE");
  ASSERT_NE(r.route, nullptr);
  EXPECT_EQ(r.route->method, "DELETE");
  EXPECT_EQ(r.params.id, "resp_1");
  EXPECT_TRUE(r.params.model.empty());  // an id is not a metrics label
}

TEST(RouteTable, AnotherMethodSelectsTheFirstRouteOfThatPathFor405) {
  auto r = find_route("/v1/responses/resp_1", "POST");
  ASSERT_NE(r.route, nullptr);
  EXPECT_EQ(r.route->method, "GET");
  r = find_route("/v1/embeddings", "GET");
  ASSERT_NE(r.route, nullptr);
  EXPECT_EQ(r.route->method, "POST");
  r = find_route("/v1/chat/completions", "GET");  // the stored chat completions, listed
  ASSERT_NE(r.route, nullptr);
  EXPECT_EQ(r.route->method, "GET");
  EXPECT_EQ(r.route->pattern, "/v1/chat/completions");
  r = find_route("/api/tags", "HEAD");  // HEAD is GET
  ASSERT_NE(r.route, nullptr);
  EXPECT_EQ(r.route->method, "GET");
}

TEST(RouteTable, UnknownPathsHaveNoRouteButTheirPrefixesProtocol) {
  auto r = find_route("/api/push", "POST");
  EXPECT_EQ(r.route, nullptr);
  EXPECT_EQ(r.protocol, Protocol::kOllama);
  r = find_route("/v1/nothing", "GET");
  EXPECT_EQ(r.route, nullptr);
  EXPECT_EQ(r.protocol, Protocol::kOpenai);
  r = find_route("/v2/models/m/bogus", "GET");  // no route, still labelled with its model
  EXPECT_EQ(r.route, nullptr);
  EXPECT_EQ(r.protocol, Protocol::kKserve);
  EXPECT_EQ(r.params.model, "m");
  r = find_route("/nowhere", "GET");
  EXPECT_EQ(r.route, nullptr);
  EXPECT_EQ(r.protocol, Protocol::kHttp);
}

TEST(RouteTable, ProtocolsOfSharedPrefixesAndOpenRoutes) {
  EXPECT_EQ(find_route("/v1/messages", "POST").protocol, Protocol::kAnthropic);
  // An unknown path under /v1/messages is Anthropic's (its 404 in Anthropic's shape).
  auto nothing = find_route("/v1/messages/nothing", "POST");
  EXPECT_EQ(nothing.route, nullptr);
  EXPECT_EQ(nothing.protocol, Protocol::kAnthropic);
  // Responses' fixed sub-paths are not taken for response ids.
  auto tokens = find_route("/v1/responses/input_tokens", "POST");
  ASSERT_NE(tokens.route, nullptr);
  EXPECT_EQ(tokens.route->pattern, "/v1/responses/input_tokens");
  EXPECT_EQ(find_route("/v1/responses/resp_1/nothing", "POST").route, nullptr);
  EXPECT_EQ(find_route("/rerank", "POST").protocol, Protocol::kOpenai);
  EXPECT_EQ(find_route("/metrics", "GET").protocol, Protocol::kHttp);
  auto live = find_route("/v2/health/live", "POST");
  ASSERT_NE(live.route, nullptr);
  EXPECT_EQ(live.route->access, Route::Access::kProbe);
  auto page = find_route("/", "GET");
  ASSERT_NE(page.route, nullptr);
  EXPECT_EQ(page.route->access, Route::Access::kPublicPage);
  EXPECT_TRUE(find_route("/metrics", "GET").route->while_draining);
}

TEST(RouteTable, NoTwoRoutesShareMethodAndPattern) {
  std::set<std::pair<std::string_view, std::string_view>> seen;
  for (auto table :
       {kserve_routes(), openai_routes(), chat_store_routes(), anthropic_routes(), responses_routes(),
        rerank_routes(), ollama_routes(), dashboard_routes(), metrics_routes()}) {
    for (const Route& r : table) {
      if (!r.handle) continue;
      EXPECT_TRUE(seen.emplace(r.method, r.pattern).second) << r.method << " " << r.pattern;
    }
  }
  EXPECT_GE(seen.size(), 40u);
}

}  // namespace
}  // namespace gantry::server

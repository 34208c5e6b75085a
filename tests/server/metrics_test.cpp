// Metrics: what strangers can and cannot put into the exposition.
#include "gantry/server/metrics.h"

#include <gtest/gtest.h>

#include "gantry/core/utf8.h"
#include "gantry/runtime/runtime.h"

namespace gantry::server {
namespace {

std::unique_ptr<runtime::Runtime> make_runtime() {
  runtime::RuntimeOptions o;
  o.verdict_cache_dir = "none";
  o.keep_alive_timer = false;
  return runtime::Runtime::create(std::move(o)).value();
}

TEST(Metrics, OnlyServedModelsBecomeLabelsEverythingElseIsDash) {
  auto rt = make_runtime();
  Metrics m;
  m.set_model_names({"mlp", "silero"});
  const std::string long_name(8192, 'x');
  for (int i = 0; i < 100; ++i)
    m.request(long_name + std::to_string(i), "kserve", 401, Metrics::Seconds(0.001));
  m.request("\xFF\xFE", "grpc", 404, Metrics::Seconds(0.001));
  m.request("mlp", "kserve", 200, Metrics::Seconds(0.001));
  m.queue_time("nope", Metrics::Seconds(0.001));
  m.tokens(long_name, 1, 1, Metrics::Seconds(0.1));
  const std::string text = m.render(*rt, ServerGauges{});
  EXPECT_EQ(text.find("xxxx"), std::string::npos);
  EXPECT_NE(text.find(R"(gantry_requests_total{code="401",model="-",protocol="kserve"} 100)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(gantry_requests_total{code="404",model="-",protocol="grpc"} 1)"), std::string::npos);
  EXPECT_NE(text.find(R"(gantry_requests_total{code="200",model="mlp",protocol="kserve"} 1)"),
            std::string::npos);
  EXPECT_TRUE(is_valid_utf8(text));
  // A hundred 8 KB names cost nothing: the exposition stays the size of a few series.
  EXPECT_LT(text.size(), 64u * 1024) << text.size();
}

TEST(Metrics, WithoutAListEveryNameIsKeptAsValidUtf8) {
  auto rt = make_runtime();
  Metrics m;
  m.request("caf\xC3\xA9", "openai", 200, Metrics::Seconds(0.001));
  m.request("bad\xFF", "openai", 200, Metrics::Seconds(0.001));
  const std::string text = m.render(*rt, ServerGauges{});
  EXPECT_NE(text.find("model=\"caf\xC3\xA9\""), std::string::npos);
  EXPECT_NE(text.find("model=\"bad\xEF\xBF\xBD\""), std::string::npos);
  EXPECT_TRUE(is_valid_utf8(text));
}

}  // namespace
}  // namespace gantry::server

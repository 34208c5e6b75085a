// URL sources against a loopback server started by the test: Range reads, a server that ignores
// Range, one that drops the connection mid-body, one that lies about Range, redirects to file://.
#include <gtest/gtest.h>

#include "weights/http_fixture.h"
#include "weights/weight_files.h"

namespace gantry::weights {
namespace {

using testing::expect_matches;
using testing::weight_files;

class Url : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(weight_files().empty()) << "make_weights.py failed";
    server_ = std::make_unique<testing::HttpServer>(weight_files().string());
    ASSERT_TRUE(server_->ok()) << "the loopback HTTP server did not start";
    http_.timeout = std::chrono::seconds(20);
    http_.stall_timeout = std::chrono::seconds(10);
  }
  uint64_t bytes_sent() {
    auto s = WeightSource::url(server_->url("stats"), http_);
    if (!s.ok()) return UINT64_MAX;
    auto b = s->read(0, s->size());
    return std::stoull(std::string(reinterpret_cast<const char*>(b->data.data()), b->data.size()));
  }
  Result<WeightLoader> open(const std::string& path) {
    GANTRY_ASSIGN_OR_RETURN(auto src, WeightSource::url(server_->url(path), http_));
    LoadOptions o;
    o.http = http_;
    return WeightLoader::open(src, o);
  }
  std::unique_ptr<testing::HttpServer> server_;
  HttpOptions http_;
};

TEST_F(Url, ListingARemoteSafetensorsFileReadsOnlyItsHeader) {
  const uint64_t before = bytes_sent();
  auto src = WeightSource::url(server_->url("range/big.safetensors"), http_);
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  EXPECT_EQ(src->size(), std::filesystem::file_size(weight_files() / "big.safetensors"));
  auto m = metadata(*src);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_EQ(m->tensors.size(), 1u);
  EXPECT_EQ(m->tensors[0].bytes, 1u << 20);
  const uint64_t listed = bytes_sent() - before;
  EXPECT_LT(listed, 4096u) << "listing downloaded the tensor data";
  // Loading downloads exactly the tensor.
  auto l = open("range/big.safetensors");
  ASSERT_TRUE(l.ok());
  expect_matches(*l, "big.safetensors");
}

TEST_F(Url, EveryDtypeAndShardedIndexOverHttp) {
  auto l = open("range/all.safetensors");
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  expect_matches(*l, "all.safetensors");
  auto idx = open("range/ckpt/model.safetensors.index.json");
  ASSERT_TRUE(idx.ok()) << idx.status().to_string();
  expect_matches(*idx, "ckpt");
  auto npz = open("range/deflated.npz");
  ASSERT_TRUE(npz.ok()) << npz.status().to_string();
  expect_matches(*npz, "deflated.npz");
}

TEST_F(Url, AServerThatIgnoresRangeIsReadInOneBoundedDownload) {
  auto l = open("norange/all.safetensors");
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  expect_matches(*l, "all.safetensors");
  HttpOptions small = http_;
  small.max_unranged_bytes = 1000;  // big.safetensors is 1 MiB
  auto too_big = WeightSource::url(server_->url("norange/big.safetensors"), small);
  EXPECT_EQ(too_big.status().code(), StatusCode::kResourceExhausted) << too_big.status().to_string();
}

TEST_F(Url, TruncatedDownloadsAndLyingServersAreErrors) {
  auto dropped = open("drop/big.safetensors");
  ASSERT_FALSE(dropped.ok());
  EXPECT_NE(dropped.status().message().find("truncated"), std::string::npos) << dropped.status().to_string();
  EXPECT_NE(dropped.status().message().find("drop/big.safetensors"), std::string::npos);
  auto dropped_probe = WeightSource::url(server_->url("drop/all.safetensors"), http_);
  ASSERT_TRUE(dropped_probe.ok());  // one byte arrives whole
  auto lie = open("lie/big.safetensors");
  ASSERT_FALSE(lie.ok());
  EXPECT_EQ(lie.status().code(), StatusCode::kCorrupt) << lie.status().to_string();
  EXPECT_NE(lie.status().message().find("Content-Range"), std::string::npos);
  auto short_body = open("short/big.safetensors");
  ASSERT_FALSE(short_body.ok());
  EXPECT_NE(short_body.status().message().find("truncated"), std::string::npos)
      << short_body.status().to_string();
}

TEST_F(Url, NoRedirectToOtherSchemesAndClearNetworkErrors) {
  auto r = WeightSource::url(server_->url("redirect"), http_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("http"), std::string::npos) << r.status().to_string();
  auto missing = WeightSource::url(server_->url("range/nope.safetensors"), http_);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().to_string();
  auto refused = WeightSource::url("http://127.0.0.1:1/x.safetensors", http_);
  EXPECT_EQ(refused.status().code(), StatusCode::kIoError) << refused.status().to_string();
}

}  // namespace
}  // namespace gantry::weights

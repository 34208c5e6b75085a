// URL sources against a loopback server started by the test: Range reads, a server that ignores
// Range, one that drops the connection mid-body, one that lies about Range, redirects to file://.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>

#include "gantry/weights/hub_url.h"
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

// ferrum's default headers: sent with every request of the source (the probe and each Range read).
TEST_F(Url, DefaultHeadersGoWithEveryRequest) {
  auto refused = WeightSource::url(server_->url("private/big.safetensors"), http_);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("HTTP 401"), std::string::npos) << refused.status().to_string();
  http_.headers = {"Authorization: Bearer t0ken"};
  auto l = open("private/big.safetensors");
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  expect_matches(*l, "big.safetensors");  // the Range reads carried it too
  // A header that would split the request, or is no header, is refused before anything is sent.
  for (const char* bad : {"X-Evil: a\r\nHost: elsewhere", "no colon", ": empty name"}) {
    http_.headers = {bad};
    auto r = WeightSource::url(server_->url("private/big.safetensors"), http_);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(r.status().message().find("Evil"), std::string::npos) << "a header is never echoed";
  }
}

// Sets an environment variable for one test; puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// hf://OWNER/REPO[@REVISION]/PATH: the Hub's download path at that revision, from $HF_ENDPOINT with
// $HF_TOKEN, against a loopback stand-in for the Hub (tests/weights/http_server.py /hub/).
TEST_F(Url, HubFilesResolveToTheRevisionAskedFor) {
  ScopedEnv endpoint("HF_ENDPOINT", server_->url("hub"));
  {
    ScopedEnv no_token("HF_TOKEN", "");
    auto gated = WeightSource::url("hf://org/tiny/big.safetensors", http_);
    EXPECT_NE(gated.status().message().find("HTTP 401"), std::string::npos) << gated.status().to_string();
  }
  ScopedEnv token("HF_TOKEN", "t0ken");
  for (const char* spec : {"hf://org/tiny/big.safetensors", "hf://org/tiny@v1.0/big.safetensors",
                           "hf://org/tiny@refs%2Fpr%2F3/big.safetensors"}) {
    auto src = WeightSource::open(spec, http_);
    ASSERT_TRUE(src.ok()) << spec << ": " << src.status().to_string();
    EXPECT_EQ(src->label(), spec);
    LoadOptions o;
    o.http = http_;
    auto l = WeightLoader::open(*src, o);
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    expect_matches(*l, "big.safetensors");
  }
  auto other = WeightSource::url("hf://org/tiny@v2.0/big.safetensors", http_);
  EXPECT_EQ(other.status().code(), StatusCode::kNotFound) << other.status().to_string();
  EXPECT_NE(other.status().message().find("/resolve/v2.0/"), std::string::npos) << other.status().message();
}

TEST(HubUrl, ResolvesAsHuggingfaceHubDoes) {
  HubEnvironment env;
  auto f = resolve_hub_file("hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_0.gguf", env);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(
      f->url,
      "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/main/qwen2.5-0.5b-instruct-q4_0.gguf");
  EXPECT_EQ(f->revision, "main");
  EXPECT_TRUE(f->headers.empty());
  env.endpoint = "http://mirror.local:8080/";
  env.token = "hf_abc";
  f = resolve_hub_file("hf://org/repo@0123456789abcdef0123456789abcdef01234567/sub dir/w.safetensors", env);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->url,
            "http://mirror.local:8080/org/repo/resolve/0123456789abcdef0123456789abcdef01234567/sub%20dir/"
            "w.safetensors");
  ASSERT_EQ(f->headers.size(), 1u);
  EXPECT_EQ(f->headers[0], "Authorization: Bearer hf_abc");
  for (const char* bad :
       {"hf://", "hf://org", "hf://org/repo", "hf://org/repo/", "hf://org/repo@/x", "hf://org/repo@main",
        "hf://org/../x", "hf://org/repo/a/../../b", "hf://org/repo//x", "hf://org/repo/x\n"}) {
    auto r = resolve_hub_file(bad, env);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  env.endpoint = "ftp://mirror";
  EXPECT_FALSE(resolve_hub_file("hf://org/repo/x", env).ok());
}

}  // namespace
}  // namespace gantry::weights

// Bad input is refused with an error naming the file and the tensor, never trusted.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "gantry/weights/loader.h"

namespace gantry::weights {
namespace {

std::string safetensors(const std::string& header, size_t data_bytes, uint64_t claimed_len = 0) {
  std::string out(8, '\0');
  const uint64_t n = claimed_len ? claimed_len : header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\x01');
}

Status open_status(const std::string& bytes, const std::string& label = "bad.safetensors") {
  auto m = metadata(WeightSource::owned(bytes, label));
  return m.ok() ? Status::Ok() : m.status();
}

void expect_refused(const std::string& bytes, const std::string& needle, const std::string& tensor = "") {
  const Status s = open_status(bytes);
  ASSERT_FALSE(s.ok()) << "accepted: " << needle;
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("bad.safetensors"), std::string::npos) << s.message();
  if (!tensor.empty()) {
    EXPECT_NE(s.message().find("\"" + tensor + "\""), std::string::npos) << s.message();
  }
}

TEST(Hostile, HeaderLengthAboveTheCap) {
  expect_refused(safetensors("{}", 0, kMaxSafetensorsHeader + 1), "limit");
  expect_refused(safetensors("{}", 0, 1000), "past the end");
  expect_refused(std::string("\x02\0\0", 3), "too short");
}

TEST(Hostile, OffsetsOutsideTheFileOrOverlapping) {
  expect_refused(safetensors(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8), "outside",
                 "a");
  expect_refused(safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                             16),
                 "overlap", "a");
  expect_refused(safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8), "begin", "a");
}

TEST(Hostile, ShapeOverflowAndSizeMismatch) {
  expect_refused(
      safetensors(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}})", 0),
      "overflow", "w");
  expect_refused(safetensors(R"({"w":{"dtype":"F64","shape":[3],"data_offsets":[0,16]}})", 16),
                 "needs 24 bytes", "w");
  expect_refused(safetensors(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4), "non-negative",
                 "w");
  expect_refused(safetensors(R"({"w":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", 8), "C64", "w");
  expect_refused(safetensors(R"({"w":{"dtype":"F32","shape":[1]}})", 4), "data_offsets", "w");
  expect_refused(safetensors(R"([1,2])", 0), "not a JSON object");
  expect_refused(safetensors(R"({"__metadata__":{"a":1}})", 0), "__metadata__");
}

TEST(Hostile, DeepOrOverflowingJsonIsCorruptNotACrash) {
  // 100,000 levels in __metadata__ would overflow the stack when walked; a huge number made nlohmann throw.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  expect_refused(safetensors(R"({"__metadata__":{"a":)" + deep + "}}", 0), "nests deeper than 64 levels");
  EXPECT_EQ(open_status(safetensors(R"({"__metadata__":{"a":)" + deep + "}}", 0)).code(),
            StatusCode::kCorrupt);
  expect_refused(safetensors(R"({"w":{"dtype":"F32","shape":[1e6079],"data_offsets":[0,4]}})", 4),
                 "not valid JSON");
}

TEST(Hostile, GoodHeaderIsAccepted) {
  // The control: the same builder with a consistent header loads.
  auto m = metadata(WeightSource::owned(
      safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8), "ok.safetensors"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->tensors.at(0).bytes, 8u);
}

class HostileIndex : public ::testing::Test {
 protected:
  void SetUp() override {
    char tpl[] = "/tmp/gantry-weights-index-XXXXXX";
    dir_ = ::mkdtemp(tpl);
    std::filesystem::create_directories(dir_ / "ckpt");
    write(dir_ / "outside.safetensors",
          safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8));
    write(dir_ / "ckpt" / "s1.safetensors",
          safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  static void write(const std::filesystem::path& p, const std::string& s) {
    std::ofstream(p, std::ios::binary) << s;
  }
  Status index_status(const std::string& json) {
    write(dir_ / "ckpt" / "model.safetensors.index.json", json);
    auto src = WeightSource::open((dir_ / "ckpt").string());
    if (!src.ok()) return src.status();
    auto m = metadata(*src);
    return m.ok() ? Status::Ok() : m.status();
  }
  std::filesystem::path dir_;
};

TEST_F(HostileIndex, MissingShardsEscapesAndLies) {
  EXPECT_TRUE(index_status(R"({"weight_map":{"a":"s1.safetensors"}})").ok());
  Status s = index_status(R"({"weight_map":{"a":"s2.safetensors"}})");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("s2.safetensors"), std::string::npos) << s.message();
  s = index_status(R"({"weight_map":{"a":"../outside.safetensors"}})");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("directory"), std::string::npos) << s.message();
  s = index_status(R"({"weight_map":{"a":")" + (dir_ / "outside.safetensors").string() + R"("}})");
  EXPECT_NE(s.message().find("absolute"), std::string::npos) << s.message();
  s = index_status(R"({"weight_map":{"b":"s1.safetensors"}})");
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("\"b\""), std::string::npos) << s.message();
  s = index_status(R"({"weight_map":{"a":"https://example.com/x.safetensors"}})");
  EXPECT_FALSE(s.ok());
  s = index_status(R"({"metadata":{}})");
  EXPECT_NE(s.message().find("weight_map"), std::string::npos) << s.message();
  // Its metadata values are dumped as text: a deep one must be refused before (dump recurses).
  s = index_status(R"({"metadata":{"m":)" + std::string(100000, '[') + std::string(100000, ']') +
                   R"(},"weight_map":{"a":"s1.safetensors"}})");
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("nests deeper than 64 levels"), std::string::npos) << s.message();
}

TEST(Hostile, NpzAndNpyRefusals) {
  // A .npy whose data is shorter than its shape.
  std::string npy = "\x93NUMPY\x01";
  npy += '\0';
  std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
  h.resize(118, ' ');
  h += '\n';
  npy += static_cast<char>(h.size() & 0xff);
  npy += static_cast<char>(h.size() >> 8);
  npy += h + std::string(12, '\0');
  auto m = metadata(WeightSource::owned(npy, "short.npy"));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("short.npy"), std::string::npos);
  EXPECT_NE(m.status().message().find("16 bytes"), std::string::npos) << m.status().message();
  npy += std::string(4, '\0');
  EXPECT_TRUE(metadata(WeightSource::owned(npy, "ok.npy")).ok());
  // Garbage behind a zip magic.
  auto z = metadata(WeightSource::owned(std::string("PK\x03\x04garbage-garbage", 19), "x.npz"));
  EXPECT_FALSE(z.ok());
}

TEST(Hostile, UnknownBytesAndSchemes) {
  auto m = metadata(WeightSource::owned(std::string(64, 'z'), "noise.dat"));
  EXPECT_EQ(m.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(m.status().message().find("noise.dat"), std::string::npos);
  auto f = WeightSource::open("file:///etc/passwd");
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  auto missing = WeightSource::open("/nonexistent/model.safetensors");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gantry::weights

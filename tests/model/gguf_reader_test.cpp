// The GGUF reader against hand-made files: every value type, and malformed bytes that must give a clear
// error.
#include <gtest/gtest.h>

#include "gantry/model/gguf.h"
#include "model/gguf_builder.h"

namespace gantry::model {
namespace {

using testing::GgufBuilder;

Result<GgufFile> parse(const GgufBuilder& b) { return GgufFile::parse(b.bytes, "test.gguf"); }

void expect_error(const GgufBuilder& b, StatusCode code, const std::string& needle) {
  auto r = parse(b);
  ASSERT_FALSE(r.ok()) << "expected an error containing: " << needle;
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("test.gguf"), std::string::npos) << "error must name the file";
}

// A valid file with every metadata type and two F32 tensors.
GgufBuilder valid_file() {
  GgufBuilder b;
  b.header(2, 15);
  b.kv_str("general.architecture", "llama");
  b.str("v.u8").u32(0).u8(200);
  b.str("v.i8").u32(1).u8(0xFF);  // -1
  b.str("v.u16").u32(2).u16(65000);
  b.str("v.i16").u32(3).u16(0xFFFE);  // -2
  b.kv_u32("llama.block_count", 7);
  b.str("v.i32").u32(5).i32(-123456);
  b.str("v.f32").u32(6).f32(0.5f);
  b.str("v.bool").u32(7).u8(1);
  b.str("v.u64").u32(10).u64(1ull << 40);
  b.str("v.i64").u32(11).u64(static_cast<uint64_t>(-5));
  b.str("v.f64").u32(12).f64(2.25);
  b.str("v.strings").u32(9).u32(8).u64(2).str("a").str("bc");
  // Nested: array of 2 arrays of i32.
  b.str("v.nested").u32(9).u32(9).u64(2).u32(5).u64(1).i32(1).u32(5).u64(2).i32(2).i32(3);
  b.str("v.empty").u32(9).u32(4).u64(0);
  b.tensor_info("a", {4, 2}, 0, 0);  // 32 bytes
  b.tensor_info("b", {8}, 0, 32);    // 32 bytes
  b.pad_to(32);
  for (int i = 0; i < 16; ++i) b.f32(static_cast<float>(i));
  return b;
}

TEST(GgufReader, ParsesEveryValueType) {
  auto r = parse(valid_file());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const GgufFile& f = *r;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.architecture(), "llama");
  EXPECT_EQ(f.get_uint(f.arch_key("block_count")), 7u);
  EXPECT_EQ(f.get_uint("v.u8"), 200u);
  EXPECT_EQ(f.find("v.i8")->as_int(), -1);
  EXPECT_EQ(f.find("v.i8")->as_uint(), std::nullopt);
  EXPECT_EQ(f.get_uint("v.u16"), 65000u);
  EXPECT_EQ(f.find("v.i16")->as_int(), -2);
  EXPECT_EQ(f.find("v.i32")->as_int(), -123456);
  EXPECT_EQ(f.get_float("v.f32"), 0.5);
  EXPECT_EQ(f.find("v.bool")->as_bool(), true);
  EXPECT_EQ(f.get_uint("v.u64"), 1ull << 40);
  EXPECT_EQ(f.find("v.i64")->as_int(), -5);
  EXPECT_EQ(f.get_float("v.f64"), 2.25);
  const GgufArray* strings = f.find("v.strings")->as_array();
  ASSERT_NE(strings, nullptr);
  ASSERT_EQ(strings->size(), 2u);
  EXPECT_EQ(*strings->at(1).as_string(), "bc");
  const GgufArray* nested = f.find("v.nested")->as_array();
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->element_type(), GgufType::kArray);
  ASSERT_EQ(nested->size(), 2u);
  const GgufValue second = nested->at(1);
  const GgufArray* inner = second.as_array();
  ASSERT_NE(inner, nullptr);
  ASSERT_EQ(inner->size(), 2u);
  EXPECT_EQ(inner->at(1).as_int(), 3);
  EXPECT_EQ(f.find("v.empty")->as_array()->size(), 0u);
  EXPECT_EQ(f.find("v.nested")->to_string(), "[2 x array: [1 x i32: 1], [2 x i32: 2, 3]]");

  ASSERT_EQ(f.tensors().size(), 2u);
  const GgufTensorInfo* b = f.find_tensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->n_elements, 8u);
  EXPECT_EQ(b->size_bytes, 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  auto data = f.tensor_data(*b);
  float first = 0;
  std::memcpy(&first, data.data(), 4);
  EXPECT_EQ(first, 8.0f);
}

TEST(GgufReader, BadMagic) {
  GgufBuilder b;
  b.raw("GGML", 4).u32(3).u64(0).u64(0);
  expect_error(b, StatusCode::kCorrupt, "bad magic");
}

TEST(GgufReader, EmptyAndTinyInputs) {
  expect_error(GgufBuilder{}, StatusCode::kCorrupt, "at byte 0");
  GgufBuilder b;
  b.raw("GGUF", 4).u8(3);
  expect_error(b, StatusCode::kCorrupt, "version");
}

TEST(GgufReader, BadVersion) {
  GgufBuilder v1;
  v1.header(0, 0, 1);
  expect_error(v1, StatusCode::kUnsupported, "version 1");
  GgufBuilder v9;
  v9.header(0, 0, 9);
  expect_error(v9, StatusCode::kCorrupt, "unknown GGUF version 9");
}

TEST(GgufReader, HugeCountsAreRefusedBeforeAllocating) {
  GgufBuilder kv;
  kv.header(0, 1ull << 60);
  expect_error(kv, StatusCode::kCorrupt, "metadata key/value count");
  GgufBuilder tensors;
  tensors.header(~0ull, 0);
  expect_error(tensors, StatusCode::kCorrupt, "tensor count");
  GgufBuilder arr;
  arr.header(0, 1).str("k").u32(9).u32(10).u64(1ull << 61);
  expect_error(arr, StatusCode::kCorrupt, "array element count");
}

TEST(GgufReader, StringLengthPastTheEnd) {
  GgufBuilder key;
  key.header(0, 1).u64(1000).raw("abc", 3).zeros(16);
  expect_error(key, StatusCode::kCorrupt, "claims 1000 bytes");
  GgufBuilder value;
  value.header(0, 1).str("k").u32(8).u64(~0ull);
  expect_error(value, StatusCode::kCorrupt, "at byte 37");
}

TEST(GgufReader, UnknownTypes) {
  GgufBuilder value;
  value.header(0, 1).str("k").u32(13).u32(0);
  expect_error(value, StatusCode::kCorrupt, "unknown value type 13");
  GgufBuilder elem;
  elem.header(0, 1).str("k").u32(9).u32(77).u64(0);
  expect_error(elem, StatusCode::kCorrupt, "unknown array element type 77");
  GgufBuilder ggml;
  ggml.header(1, 0).tensor_info("t", {32}, 4 /* removed Q4_2 */, 0).pad_to(32).zeros(64);
  expect_error(ggml, StatusCode::kUnsupported, "unknown ggml type id 4");
  GgufBuilder badbool;
  badbool.header(0, 1).str("k").u32(7).u8(2);
  expect_error(badbool, StatusCode::kCorrupt, "neither 0 nor 1");
}

TEST(GgufReader, NestingDepthIsBounded) {
  GgufBuilder b;
  b.header(0, 1).str("deep").u32(9);
  for (int i = 0; i < 20; ++i) b.u32(9).u64(1);
  b.u32(4).u64(0);
  expect_error(b, StatusCode::kCorrupt, "nested deeper");
}

TEST(GgufReader, TensorInfoChecks) {
  GgufBuilder rank;
  rank.header(1, 0).tensor_info("t", {1, 1, 1, 1, 1}, 0, 0);
  expect_error(rank, StatusCode::kCorrupt, "5 dimensions");
  GgufBuilder past;
  past.header(1, 0).tensor_info("t", {16}, 0, 0).pad_to(32).zeros(32);
  expect_error(past, StatusCode::kCorrupt, "runs past the end");
  GgufBuilder offset;
  offset.header(1, 0).tensor_info("t", {4}, 0, 1ull << 62).pad_to(32).zeros(16);
  expect_error(offset, StatusCode::kCorrupt, "runs past the end");
  GgufBuilder misaligned;
  misaligned.header(1, 0).tensor_info("t", {4}, 0, 8).pad_to(32).zeros(64);
  expect_error(misaligned, StatusCode::kCorrupt, "not a multiple of the alignment");
  GgufBuilder overlap;
  overlap.header(2, 0).tensor_info("a", {16}, 0, 0).tensor_info("b", {16}, 0, 32).pad_to(32).zeros(96);
  expect_error(overlap, StatusCode::kCorrupt, "overlap");
  GgufBuilder dup;
  dup.header(2, 0).tensor_info("a", {8}, 0, 0).tensor_info("a", {8}, 0, 32).pad_to(32).zeros(64);
  expect_error(dup, StatusCode::kCorrupt, "duplicate tensor name");
  GgufBuilder block;
  block.header(1, 0).tensor_info("q", {33}, 8 /* q8_0 */, 0).pad_to(32).zeros(128);
  expect_error(block, StatusCode::kCorrupt, "not a multiple of the q8_0 block size 32");
  GgufBuilder overflow;
  overflow.header(1, 0).tensor_info("o", {1ull << 32, 1ull << 32}, 0, 0).pad_to(32).zeros(32);
  expect_error(overflow, StatusCode::kCorrupt, "overflows");
}

TEST(GgufReader, MetadataChecks) {
  GgufBuilder dup;
  dup.header(0, 2).kv_u32("k", 1).kv_u32("k", 2);
  expect_error(dup, StatusCode::kCorrupt, "duplicate metadata key");
  GgufBuilder align;
  align.header(0, 1).kv_u32("general.alignment", 24);
  expect_error(align, StatusCode::kCorrupt, "power of two");
}

TEST(GgufReader, CustomAlignmentMovesTheDataSection) {
  GgufBuilder b;
  b.header(1, 1)
      .kv_u32("general.alignment", 64)
      .tensor_info("t", {4}, 0, 0)
      .pad_to(64)
      .f32(1)
      .f32(2)
      .f32(3)
      .f32(4);
  auto r = parse(b);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->alignment(), 64u);
  EXPECT_EQ(r->data_offset() % 64, 0u);
  EXPECT_EQ(r->data_offset() + 16, r->file_size());
}

TEST(GgufReader, EveryTruncationOfAValidFileFails) {
  const GgufBuilder full = valid_file();
  for (size_t n = 0; n < full.bytes.size(); ++n) {
    auto r = GgufFile::parse(std::span(full.bytes).first(n), "test.gguf");
    EXPECT_FALSE(r.ok()) << "truncated at " << n << " bytes parsed";
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << r.status().to_string();
    }
  }
}

TEST(GgufReader, MissingFileIsNotFound) {
  auto r = GgufFile::open("/nonexistent/model.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

TEST(GgmlTypes, SizesMatchGgml) {
  auto q8 = ggml_type_by_name("Q8_0");
  ASSERT_TRUE(q8);
  EXPECT_EQ(q8->block_size, 32u);
  EXPECT_EQ(q8->type_size, 34u);
  EXPECT_EQ(ggml_row_bytes(*q8, 768), 24u * 34u);
  EXPECT_EQ(ggml_type_traits(14)->name, "q6_K");
  EXPECT_EQ(ggml_type_traits(14)->type_size, 210u);
  EXPECT_EQ(ggml_type_traits(30)->name, "bf16");
  EXPECT_FALSE(ggml_type_traits(31).has_value());
  EXPECT_FALSE(ggml_type_traits(43).has_value());
}

}  // namespace
}  // namespace gantry::model

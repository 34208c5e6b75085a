#include "gantry/backend/onnx/onnx_model.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <thread>

#include "backend/onnx/onnx_test_util.h"
#include "backend/onnx/raw_ort.h"
#include "gantry/model/tensor_proto.h"

namespace gantry::onnx {
namespace {

namespace fs = std::filesystem;
using backend::NamedTensor;
using backend::Placement;

using namespace ::gantry::testing;

std::unique_ptr<OnnxModel> open_mlp() {
  if (!fs::exists(kMlp)) return nullptr;
  auto m = OnnxModel::open(kMlp, one_thread());
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(m).value() : nullptr;
}

TEST(OnnxModel, MlpMetadata) {
  REQUIRE_MODEL(kMlp);
  auto m = open_mlp();
  ASSERT_TRUE(m);
  const auto& meta = m->metadata();
  EXPECT_EQ(meta.name, "mlp_64_128_10");
  EXPECT_EQ(meta.backend, "onnxruntime");
  ASSERT_EQ(meta.inputs.size(), 1u);
  EXPECT_EQ(meta.inputs[0].name, "input");
  EXPECT_EQ(meta.inputs[0].dtype, DType::kFloat32);
  EXPECT_EQ(meta.inputs[0].shape, Shape({Shape::kDynamic, 64}));
  EXPECT_EQ(meta.inputs[0].dim_names[0], "batch");
  ASSERT_EQ(meta.outputs.size(), 1u);
  EXPECT_EQ(meta.outputs[0].shape, Shape({Shape::kDynamic, 10}));
  EXPECT_TRUE(meta.batchable);
  EXPECT_EQ(meta.max_input_bytes, 0u);  // dynamic batch: unbounded
  EXPECT_EQ(meta.properties.at("producer"), "gantry-scripts");
}

TEST(OnnxModel, MlpMatchesRawOrtBitForBit) {
  REQUIRE_MODEL(kMlp);
  auto m = open_mlp();
  ASSERT_TRUE(m);
  Ort::Session raw(testing::raw_env(), kMlp.c_str(), testing::raw_options(1));
  for (int64_t batch : {1, 32}) {
    Tensor x = random_f32(Shape({batch, 64}), 7);
    std::vector<NamedTensor> in{{"input", x}};
    auto out = m->infer_one(in);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    ASSERT_EQ(out->size(), 1u);
    EXPECT_EQ((*out)[0].name, "logits");
    EXPECT_EQ((*out)[0].tensor.shape(), Shape({batch, 10}));
    auto want = testing::raw_run(raw, {x});
    ASSERT_EQ(want[0].size(), (*out)[0].tensor.byte_size());
    EXPECT_EQ(0, std::memcmp(want[0].data(), (*out)[0].tensor.data(), want[0].size())) << "batch " << batch;
  }
}

TEST(OnnxModel, InputsAreBorrowedNotModified) {
  REQUIRE_MODEL(kMlp);
  auto m = open_mlp();
  ASSERT_TRUE(m);
  auto caller = std::make_shared<std::vector<float>>(64, 0.25f);
  auto view =
      Tensor::adopt(DType::kFloat32, Shape({1, 64}), caller->data(), caller->size() * 4, caller).value();
  std::vector<NamedTensor> in{{"input", view}};
  auto a = m->infer_one(in);
  ASSERT_TRUE(a.ok());
  caller->assign(64, -0.5f);  // the caller's buffer now holds other values: the next run must see them
  auto b = m->infer_one(in);
  ASSERT_TRUE(b.ok());
  EXPECT_NE(0, std::memcmp((*a)[0].tensor.data(), (*b)[0].tensor.data(), 40));
  EXPECT_EQ((*caller)[0], -0.5f);
}

TEST(OnnxModel, InferBatchConcatenatesAndSplits) {
  REQUIRE_MODEL(kMlp);
  auto m = open_mlp();
  ASSERT_TRUE(m);
  std::vector<std::vector<NamedTensor>> reqs;
  for (int r = 0; r < 5; ++r) reqs.push_back({{"input", random_f32(Shape({r % 2 + 1, 64}), 100 + r)}});
  auto batched = m->infer_batch(reqs);
  ASSERT_TRUE(batched.ok()) << batched.status().to_string();
  ASSERT_EQ(batched->size(), 5u);
  for (int r = 0; r < 5; ++r) {
    auto single = m->infer_one(reqs[r]);
    ASSERT_TRUE(single.ok());
    const Tensor& got = (*batched)[r][0].tensor;
    EXPECT_EQ(got.shape(), Shape({r % 2 + 1, 10}));
    auto a = got.values<float>();
    auto b = (*single)[0].tensor.values<float>();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5f) << "request " << r << " value " << i;
  }
  // A request that cannot be batched (wrong width) fails the whole batch with its index.
  reqs.push_back({{"input", random_f32(Shape({1, 63}), 1)}});
  auto bad = m->infer_batch(reqs);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("request 5"), std::string::npos) << bad.status().message();
}

TEST(OnnxModel, ConcurrentCallsAgree) {
  REQUIRE_MODEL(kMlp);
  auto m = open_mlp();
  ASSERT_TRUE(m);
  Tensor x = random_f32(Shape({4, 64}), 3);
  std::vector<NamedTensor> in{{"input", x}};
  auto ref = m->infer_one(in);
  ASSERT_TRUE(ref.ok());
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto r = m->infer_one(in);
        if (!r.ok() || std::memcmp((*r)[0].tensor.data(), (*ref)[0].tensor.data(), 160) != 0) ++mismatches;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(OnnxModel, DrainRefusesThenResetAccepts) {
  REQUIRE_MODEL(kMlp);
  auto m = open_mlp();
  ASSERT_TRUE(m);
  std::vector<NamedTensor> in{{"input", random_f32(Shape({1, 64}), 1)}};
  ASSERT_TRUE(m->drain().ok());
  auto r = m->infer_one(in);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("draining"), std::string::npos);
  ASSERT_TRUE(m->reset().ok());
  EXPECT_TRUE(m->infer_one(in).ok());
}

struct BadInputCase {
  const char* what;
  std::vector<NamedTensor> inputs;
  StatusCode code;
  std::vector<std::string> mentions;
};

TEST(OnnxModel, BadInputsGiveClearErrors) {
  REQUIRE_MODEL(kMlp);
  auto m = open_mlp();
  ASSERT_TRUE(m);
  auto i64 = Tensor::allocate(DType::kInt64, Shape({1, 64})).value();
  std::vector<BadInputCase> cases = {
      {"unknown name", {{"inptu", random_f32(Shape({1, 64}), 1)}}, StatusCode::kNotFound, {"inptu", "input"}},
      {"missing", {}, StatusCode::kInvalidArgument, {"missing input 'input'", "[?,64]"}},
      {"dtype",
       {{"input", i64}},
       StatusCode::kInvalidArgument,
       {"'input'", "expected f32 [?,64]", "got i64 [1,64]"}},
      {"rank",
       {{"input", random_f32(Shape({64}), 1)}},
       StatusCode::kInvalidArgument,
       {"expected f32 [?,64]", "[64]"}},
      {"shape", {{"input", random_f32(Shape({2, 65}), 1)}}, StatusCode::kInvalidArgument, {"got f32 [2,65]"}},
      {"twice",
       {{"input", random_f32(Shape({1, 64}), 1)}, {"input", random_f32(Shape({1, 64}), 1)}},
       StatusCode::kInvalidArgument,
       {"given twice"}},
  };
  for (const auto& c : cases) {
    auto r = m->infer_one(c.inputs);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.status().code(), c.code) << c.what << ": " << r.status().to_string();
    for (const auto& s : c.mentions)
      EXPECT_NE(r.status().message().find(s), std::string::npos) << c.what << ": " << r.status().message();
  }
}

TEST(OnnxModel, BadModelFilesGiveClearErrors) {
  const fs::path dir = fs::temp_directory_path() / ("gantry-onnx-bad-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write = [&](const char* name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
    return dir / name;
  };
  auto missing = OnnxModel::open(dir / "nope.onnx", one_thread());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.onnx"), std::string::npos);

  auto empty = OnnxModel::open(write("empty.onnx", ""), one_thread());
  EXPECT_EQ(empty.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos);

  auto corrupt = OnnxModel::open(write("corrupt.onnx", std::string(4096, '\xff')), one_thread());
  EXPECT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.status().message().find("corrupt.onnx"), std::string::npos) << corrupt.status().message();

  if (fs::exists(kMlp)) {
    std::ifstream in(kMlp, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    auto truncated =
        OnnxModel::open(write("truncated.onnx", bytes.substr(0, bytes.size() / 2)), one_thread());
    EXPECT_FALSE(truncated.ok());
    EXPECT_NE(truncated.status().message().find("truncated.onnx"), std::string::npos)
        << truncated.status().message();
  }
  auto dirmodel = OnnxModel::open(dir, one_thread());
  EXPECT_EQ(dirmodel.status().code(), StatusCode::kInvalidArgument);
  fs::remove_all(dir);
}

TEST(OnnxModel, StringTensorsInAndOut) {
  const fs::path root = "/usr/share/libonnx-testdata/data/node";
  if (!fs::exists(root / "test_cast_STRING_to_FLOAT"))
    FAIL() << root << " is missing (install libonnx-testdata)";
  // string -> f32
  {
    const fs::path t = root / "test_cast_STRING_to_FLOAT";
    auto m = OnnxModel::open(t / "model.onnx", one_thread());
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    auto in = model::read_tensor_proto(t / "test_data_set_0/input_0.pb");
    auto want = model::read_tensor_proto(t / "test_data_set_0/output_0.pb");
    ASSERT_TRUE(in.ok() && want.ok());
    ASSERT_EQ(in->tensor.dtype(), DType::kString);
    std::vector<NamedTensor> inputs{{(*m)->metadata().inputs[0].name, in->tensor}};
    auto out = (*m)->infer_one(inputs);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    auto a = (*out)[0].tensor.values<float>();
    auto b = want->tensor.values<float>();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      if (std::isnan(b[i]))
        EXPECT_TRUE(std::isnan(a[i]));
      else
        EXPECT_FLOAT_EQ(a[i], b[i]);
  }
  // f32 -> string
  {
    const fs::path t = root / "test_cast_FLOAT_to_STRING";
    auto m = OnnxModel::open(t / "model.onnx", one_thread());
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    auto in = model::read_tensor_proto(t / "test_data_set_0/input_0.pb");
    ASSERT_TRUE(in.ok());
    std::vector<NamedTensor> inputs{{(*m)->metadata().inputs[0].name, in->tensor}};
    auto out = (*m)->infer_one(inputs);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    ASSERT_EQ((*out)[0].tensor.dtype(), DType::kString);
    const auto& strings = (*out)[0].tensor.strings();
    auto x = in->tensor.values<float>();
    ASSERT_EQ(strings.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i)
      if (!std::isfinite(x[i]))
        continue;
      else
        EXPECT_NEAR(std::stof(strings[i]), x[i], 1e-5f * std::abs(x[i]) + 1e-6f);
  }
}

TEST(OnnxModel, SessionBucketServesItsShape) {
  REQUIRE_MODEL(kMlp);
  Placement p = one_thread();
  p.onnx.session_buckets.push_back({{"input", Shape({8, 64})}});
  auto m = OnnxModel::open(kMlp, p);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  auto plain = open_mlp();
  for (int64_t b : {8, 3}) {
    std::vector<NamedTensor> in{{"input", random_f32(Shape({b, 64}), 9)}};
    auto a = (*m)->infer_one(in);
    auto c = plain->infer_one(in);
    ASSERT_TRUE(a.ok() && c.ok()) << a.status().to_string();
    auto x = (*a)[0].tensor.values<float>();
    auto y = (*c)[0].tensor.values<float>();
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-5f);
  }
  Placement bad = one_thread();
  bad.onnx.session_buckets.push_back({{"nope", Shape({1, 64})}});
  auto e = OnnxModel::open(kMlp, bad);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("'nope'"), std::string::npos) << e.status().message();
}

// Real pretrained models: Gantry equals raw ONNX Runtime bit for bit (same options, one thread).
TEST(OnnxModel, SileroVadMatchesRawOrt) {
  const fs::path path = kModels / "silero_vad_v5.onnx";
  REQUIRE_MODEL(path);
  auto m = OnnxModel::open(path, one_thread());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  Ort::Session raw(testing::raw_env(), path.c_str(), testing::raw_options(1));
  Tensor audio = random_f32(Shape({1, 512}), 42);
  Tensor state = random_f32(Shape({2, 1, 128}), 43);
  Tensor sr = Tensor::from_values<int64_t>(DType::kInt64, Shape(), {16000}).value();
  std::vector<NamedTensor> in{{"input", audio}, {"state", state}, {"sr", sr}};
  auto out = (*m)->infer_one(in);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  auto want = testing::raw_run(raw, {audio, state, sr});
  ASSERT_EQ(want.size(), out->size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].size(), (*out)[i].tensor.byte_size());
    EXPECT_EQ(0, std::memcmp(want[i].data(), (*out)[i].tensor.data(), want[i].size())) << (*out)[i].name;
  }
  // Wrong dtype for sr: a clear error, no crash.
  std::vector<NamedTensor> bad{{"input", audio}, {"state", state}, {"sr", random_f32(Shape(), 1)}};
  auto e = (*m)->infer_one(bad);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("'sr'"), std::string::npos);
}

// Inputs that made ONNX Runtime call std::terminate (a zero batch) or fail inside Run (an empty input, a
// batch the state disagrees with) are refused before Run with the input named; the model still works.
TEST(OnnxModel, SileroVadRefusesEmptyAndMismatchedInputs) {
  REQUIRE_MODEL(kSilero);
  auto m = OnnxModel::open(kSilero, one_thread());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const Tensor sr = Tensor::from_values<int64_t>(DType::kInt64, Shape(), {16000}).value();
  auto run = [&](const Shape& input, const Shape& state) {
    std::vector<NamedTensor> in{{"input", random_f32(input, 1)}, {"state", random_f32(state, 2)}, {"sr", sr}};
    return (*m)->infer_one(in);
  };
  struct Case {
    Shape input, state;
    std::vector<std::string> phrases;
  };
  const Case cases[] = {
      {Shape({0, 512}), Shape({2, 0, 128}), {"'input'", "dimension 0 is 0"}},  // the zero batch
      {Shape({1, 512}), Shape({2, 0, 128}), {"'state'", "dimension 1 is 0"}},
      {Shape({1, 0}), Shape({2, 1, 128}), {"'input'", "dimension 1 is 0"}},  // an empty input
      // Silero names no dims, so only Run finds these (its LSTM checks the state): still the request's.
      {Shape({2, 512}), Shape({2, 1, 128}), {"ONNX Runtime Run failed", "initial_h"}},  // batch 2, state 1
      {Shape({1, 512}), Shape({2, 3, 128}), {"ONNX Runtime Run failed", "initial_h"}},  // batch 1, state 3
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("input " + c.input.to_string() + " state " + c.state.to_string());
    auto r = run(c.input, c.state);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().to_string();
    for (const auto& p : c.phrases)
      EXPECT_NE(r.status().message().find(p), std::string::npos) << r.status().message();
  }
  // The model still answers, as raw ONNX Runtime does.
  Ort::Session raw(testing::raw_env(), kSilero.c_str(), testing::raw_options(1));
  for (int64_t batch : {1, 3}) {
    Tensor audio = random_f32(Shape({batch, 512}), 42);
    Tensor state = random_f32(Shape({2, batch, 128}), 43);
    std::vector<NamedTensor> in{{"input", audio}, {"state", state}, {"sr", sr}};
    auto out = (*m)->infer_one(in);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    auto want = testing::raw_run(raw, {audio, state, sr});
    ASSERT_EQ(want.size(), out->size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(want[i].size(), (*out)[i].tensor.byte_size());
      EXPECT_EQ(0, std::memcmp(want[i].data(), (*out)[i].tensor.data(), want[i].size())) << (*out)[i].name;
    }
  }
}

// z = Add(a, b), every tensor [batch, 4]: two inputs sharing the symbolic dim "batch".
fs::path write_add_model() {
  ::onnx::ModelProto mp;
  mp.set_ir_version(8);
  auto* op = mp.add_opset_import();
  op->set_domain("");
  op->set_version(17);
  auto* g = mp.mutable_graph();
  g->set_name("add");
  auto* n = g->add_node();
  n->set_op_type("Add");
  n->add_input("a");
  n->add_input("b");
  n->add_output("z");
  for (auto* v : {g->add_input(), g->add_input(), g->add_output()}) {
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(::onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_param("batch");
    t->mutable_shape()->add_dim()->set_dim_value(4);
  }
  g->mutable_input(0)->set_name("a");
  g->mutable_input(1)->set_name("b");
  g->mutable_output(0)->set_name("z");
  const fs::path file = fs::temp_directory_path() / ("gantry-add-" + std::to_string(::getpid()) + ".onnx");
  std::ofstream f(file, std::ios::binary);
  EXPECT_TRUE(mp.SerializeToOstream(&f));
  return file;
}

TEST(OnnxModel, InputsSharingADimNameMustAgree) {
  const fs::path file = write_add_model();
  auto m = OnnxModel::open(file, one_thread());
  fs::remove(file);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_EQ((*m)->metadata().inputs[1].name, "b");
  ASSERT_EQ((*m)->metadata().inputs[1].dim_names[0], "batch");
  for (bool in_order : {true, false}) {
    std::vector<NamedTensor> in{{"a", random_f32(Shape({2, 4}), 1)}, {"b", random_f32(Shape({3, 4}), 2)}};
    if (!in_order) std::swap(in[0], in[1]);
    auto r = (*m)->infer_one(in);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(
        r.status().message().find("inputs 'a' and 'b' disagree on dimension 'batch': 2 (dim 0 of 'a') vs 3"),
        std::string::npos)
        << r.status().message();
  }
  // Batched: each request is checked, and named.
  std::vector<std::vector<NamedTensor>> reqs = {
      {{"a", random_f32(Shape({1, 4}), 1)}, {"b", random_f32(Shape({1, 4}), 2)}},
      {{"a", random_f32(Shape({1, 4}), 3)}, {"b", random_f32(Shape({2, 4}), 4)}}};
  ASSERT_TRUE((*m)->metadata().batchable);
  auto b = (*m)->infer_batch(reqs);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("request 1"), std::string::npos) << b.status().message();
  EXPECT_NE(b.status().message().find("disagree on dimension 'batch'"), std::string::npos)
      << b.status().message();
  // Agreeing inputs run.
  std::vector<NamedTensor> ok{{"a", random_f32(Shape({3, 4}), 1)}, {"b", random_f32(Shape({3, 4}), 2)}};
  auto r = (*m)->infer_one(ok);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FLOAT_EQ((*r)[0].tensor.values<float>()[5],
                  ok[0].tensor.values<float>()[5] + ok[1].tensor.values<float>()[5]);
}

TEST(OnnxModel, ZeroBatchIsRefusedAloneAndInABatch) {
  REQUIRE_MODEL(kMlp);
  auto m = open_mlp();
  ASSERT_TRUE(m);
  std::vector<NamedTensor> empty{{"input", Tensor::allocate(DType::kFloat32, Shape({0, 64})).value()}};
  auto r = m->infer_one(empty);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("input 'input': dimension 0 is 0"), std::string::npos)
      << r.status().message();
  std::vector<std::vector<NamedTensor>> reqs = {{{"input", random_f32(Shape({2, 64}), 1)}}, empty};
  auto b = m->infer_batch(reqs);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("request 1"), std::string::npos) << b.status().message();
  EXPECT_TRUE(m->infer_one(reqs[0]).ok());
}

TEST(OnnxModel, PaddleOcrModelsMatchRawOrt) {
  const fs::path dir = kModels / "paddleocr";
  if (!fs::exists(dir)) FAIL() << dir << " is missing: run `make setup`";
  struct Case {
    const char* file;
    Shape shape;
  };
  const Case cases[] = {{"ch_PP-OCRv4_det_infer.onnx", Shape({1, 3, 64, 96})},
                        {"ch_PP-OCRv4_rec_infer.onnx", Shape({1, 3, 48, 160})},
                        {"ch_ppocr_mobile_v2.0_cls_infer.onnx", Shape({1, 3, 48, 192})}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    auto m = OnnxModel::open(dir / c.file, one_thread());
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    Ort::Session raw(testing::raw_env(), (dir / c.file).c_str(), testing::raw_options(1));
    Tensor x = random_f32(c.shape, 5);
    std::vector<NamedTensor> in{{(*m)->metadata().inputs[0].name, x}};
    auto out = (*m)->infer_one(in);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    auto want = testing::raw_run(raw, {x});
    ASSERT_EQ(want.size(), out->size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(want[i].size(), (*out)[i].tensor.byte_size());
      EXPECT_EQ(0, std::memcmp(want[i].data(), (*out)[i].tensor.data(), want[i].size()));
    }
  }
}

}  // namespace
}  // namespace gantry::onnx

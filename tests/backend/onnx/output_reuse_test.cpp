// OnnxModel reuses output buffers (preallocated outputs) only when no caller holds them any more.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "backend/onnx/onnx_test_util.h"
#include "backend/onnx/raw_ort.h"
#include "gantry/backend/onnx/onnx_model.h"

namespace gantry::onnx {
namespace {

namespace fs = std::filesystem;
using backend::NamedTensor;

using namespace ::gantry::testing;

bool same_bytes(const Tensor& t, const std::vector<char>& want) {
  return t.byte_size() == want.size() && std::memcmp(t.data(), want.data(), want.size()) == 0;
}

TEST(OutputReuse, HeldOutputsAreNeverOverwritten) {
  if (!fs::exists(kMlp)) FAIL() << kMlp << " is missing: run `make setup`";
  auto m = OnnxModel::open(kMlp, one_thread());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  Ort::Session raw(testing::raw_env(), kMlp.c_str(), testing::raw_options(1));
  // Many results kept alive at once (more than the cache holds), with batch sizes alternating.
  std::vector<Tensor> inputs;
  std::vector<std::vector<char>> want;
  std::vector<Tensor> kept;
  for (int i = 0; i < 12; ++i) {
    inputs.push_back(random_f32(Shape({i % 3 == 0 ? 1 : 5, 64}), 100 + i));
    want.push_back(testing::raw_run(raw, {inputs.back()})[0]);
    std::vector<NamedTensor> in{{"input", inputs.back()}};
    auto out = (*m)->infer_one(in);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ((*out)[0].tensor.shape(), Shape({i % 3 == 0 ? 1 : 5, 10}));
    kept.push_back((*out)[0].tensor);
  }
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_TRUE(same_bytes(kept[i], want[i])) << i;
  // Dropped results make room; later runs still right, and a result taken now is not disturbed by
  // the runs after it.
  kept.clear();
  std::vector<NamedTensor> in0{{"input", inputs[0]}};
  auto first = (*m)->infer_one(in0);
  ASSERT_TRUE(first.ok());
  const Tensor keep = (*first)[0].tensor;
  const void* keep_data = keep.data();
  first = Status(Cancelled("dropped"));  // only `keep` holds it now
  for (int i = 1; i < 8; ++i) {
    std::vector<NamedTensor> in{{"input", inputs[i]}};
    auto out = (*m)->infer_one(in);
    ASSERT_TRUE(out.ok());
    EXPECT_TRUE(same_bytes((*out)[0].tensor, want[i])) << i;
    EXPECT_NE((*out)[0].tensor.data(), keep_data);
  }
  EXPECT_TRUE(same_bytes(keep, want[0]));
}

TEST(OutputReuse, DroppedBufferIsReused) {
  if (!fs::exists(kMlp)) FAIL() << kMlp << " is missing: run `make setup`";
  auto m = OnnxModel::open(kMlp, one_thread());
  ASSERT_TRUE(m.ok());
  std::vector<NamedTensor> in{{"input", random_f32(Shape({2, 64}), 1)}};
  const void* first = nullptr;
  {
    auto out = (*m)->infer_one(in);
    ASSERT_TRUE(out.ok());
    first = (*out)[0].tensor.data();
  }
  auto again = (*m)->infer_one(in);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[0].tensor.data(), first);  // the same buffer, handed to ORT as the output
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
}

TEST(OutputReuse, ConcurrentCallersGetTheirOwnResults) {
  if (!fs::exists(kMlp)) FAIL() << kMlp << " is missing: run `make setup`";
  auto m = OnnxModel::open(kMlp, one_thread());
  ASSERT_TRUE(m.ok());
  Ort::Session raw(testing::raw_env(), kMlp.c_str(), testing::raw_options(1));
  std::vector<Tensor> inputs;
  std::vector<std::vector<char>> want;
  for (int t = 0; t < 4; ++t) {
    inputs.push_back(random_f32(Shape({3, 64}), 7 + t));
    want.push_back(testing::raw_run(raw, {inputs.back()})[0]);
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::vector<NamedTensor> in{{"input", inputs[t]}};
      for (int i = 0; i < 200; ++i) {
        auto out = (*m)->infer_one(in);
        if (!out.ok() || !same_bytes((*out)[0].tensor, want[t])) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(OutputReuse, UnpredictableOutputsStillRight) {
  // det's output dims are named apart from its input's: ORT allocates them as before.
  if (!fs::exists(kDet)) FAIL() << kDet << " is missing: run `make setup`";
  auto m = OnnxModel::open(kDet, one_thread());
  ASSERT_TRUE(m.ok());
  Ort::Session raw(testing::raw_env(), kDet.c_str(), testing::raw_options(1));
  Tensor x = random_f32(Shape({1, 3, 64, 64}), 3);
  std::vector<NamedTensor> in{{"x", x}};
  for (int i = 0; i < 2; ++i) {
    auto out = (*m)->infer_one(in);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_TRUE(same_bytes((*out)[0].tensor, testing::raw_run(raw, {x})[0]));
  }
}

// y = Concat(x, x) on axis 0, so y has 2*batch rows, but the graph declares y as [batch, 4]: the
// prediction is wrong, ORT rejects the preallocated buffer, the model runs again the plain way and
// stops predicting.
TEST(OutputReuse, WrongPredictionFallsBackAndTurnsReuseOff) {
  ::onnx::ModelProto mp;
  mp.set_ir_version(8);
  auto* op = mp.add_opset_import();
  op->set_domain("");
  op->set_version(17);
  auto* g = mp.mutable_graph();
  g->set_name("lying");
  auto* n = g->add_node();
  n->set_op_type("Concat");
  n->add_input("x");
  n->add_input("x");
  n->add_output("y");
  auto* axis = n->add_attribute();
  axis->set_name("axis");
  axis->set_type(::onnx::AttributeProto::INT);
  axis->set_i(0);
  for (auto* v : {g->add_input(), g->add_output()}) {
    v->set_name(v == &g->input(0) ? "x" : "y");
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(::onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_param("batch");
    t->mutable_shape()->add_dim()->set_dim_value(4);
  }
  const fs::path file = fs::temp_directory_path() / ("gantry-lying-" + std::to_string(::getpid()) + ".onnx");
  {
    std::ofstream f(file, std::ios::binary);
    ASSERT_TRUE(mp.SerializeToOstream(&f));
  }
  auto m = OnnxModel::open(file, one_thread());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  Tensor x = random_f32(Shape({3, 4}), 5);
  std::vector<NamedTensor> in{{"x", x}};
  for (int i = 0; i < 3; ++i) {
    auto out = (*m)->infer_one(in);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Tensor& y = (*out)[0].tensor;
    ASSERT_EQ(y.shape(), Shape({6, 4}));
    EXPECT_EQ(0, std::memcmp(y.data(), x.data(), x.byte_size()));
    EXPECT_EQ(0, std::memcmp(static_cast<const char*>(y.data()) + x.byte_size(), x.data(), x.byte_size()));
  }
  m = Status(Cancelled("closed"));
  fs::remove(file);
}

}  // namespace
}  // namespace gantry::onnx

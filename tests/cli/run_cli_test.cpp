// `gantry run`: outputs written as .npy equal a direct OnnxModel run; bad inputs give clear errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "gantry/backend/onnx/onnx_model.h"
#include "gantry/core/npy.h"

namespace {

namespace fs = std::filesystem;
const fs::path kMlp = fs::path(GANTRY_DEPS_DIR) / "models" / "mlp_64_128_10.onnx";

std::string run_cli(const std::string& args, int* rc) {
  std::string cmd =
      std::string("GANTRY_LOG_LEVEL=off ") + GANTRY_BINARY_DIR + "/bin/gantry " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  *rc = WEXITSTATUS(pclose(p));
  return out;
}

class RunCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kMlp)) FAIL() << kMlp << " is missing: run `make setup`";
    dir_ = fs::temp_directory_path() / ("gantry-run-cli-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    auto x = gantry::Tensor::allocate(gantry::DType::kFloat32, gantry::Shape({3, 64})).value();
    for (size_t i = 0; i < 192; ++i) x.values<float>()[i] = static_cast<float>(i % 17) / 17.0f - 0.5f;
    x_ = x;
    ASSERT_TRUE(gantry::write_npy(dir_ / "x.npy", x).ok());
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  fs::path dir_;
  gantry::Tensor x_;
};

TEST_F(RunCli, WritesOutputsEqualToADirectRun) {
  int rc = 0;
  std::string out = run_cli("run " + kMlp.string() + " --threads 1 --provider cpu --input input=" +
                                (dir_ / "x.npy").string() + " --output-dir " + (dir_ / "out").string(),
                            &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("logits f32 [3,10]"), std::string::npos) << out;
  EXPECT_NE(out.find("on cpu"), std::string::npos) << out;
  auto written = gantry::read_npy(dir_ / "out" / "logits.npy");
  ASSERT_TRUE(written.ok()) << written.status().to_string();
  gantry::backend::Placement p;
  p.intra_op_threads = 1;
  auto m = gantry::onnx::OnnxModel::open(kMlp, p);
  ASSERT_TRUE(m.ok());
  std::vector<gantry::NamedTensor> in{{"input", x_}};
  auto direct = (*m)->infer_one(in);
  ASSERT_TRUE(direct.ok());
  ASSERT_EQ(written->shape(), (*direct)[0].tensor.shape());
  EXPECT_EQ(0, std::memcmp(written->data(), (*direct)[0].tensor.data(), written->byte_size()));
}

TEST_F(RunCli, BadInputsAreClearErrors) {
  int rc = 0;
  std::string out = run_cli("run " + kMlp.string() + " --input nope=" + (dir_ / "x.npy").string(), &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("no input 'nope'"), std::string::npos) << out;
  out = run_cli("run " + kMlp.string() + " --input input=" + (dir_ / "missing.npy").string(), &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("missing.npy"), std::string::npos) << out;
  out = run_cli("run " + (dir_ / "absent.onnx").string(), &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("absent.onnx"), std::string::npos) << out;
  out = run_cli("run " + kMlp.string() + " --provider tensorrt --input input=" + (dir_ / "x.npy").string(),
                &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("libnvinfer"), std::string::npos) << out;
  out = run_cli("run " + kMlp.string() + " --provider-policy bogus", &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("bogus"), std::string::npos) << out;
}

}  // namespace

// `gantry test-onnx` on the ONNX node suite: its verdicts must equal a raw ONNX Runtime run of the same
// tests (plain Ort::Session calls and an independent allclose), test by test.
#include <gtest/gtest.h>
#include <onnxruntime_cxx_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "gantry/backend/onnx/onnx_model.h"
#include "gantry/model/tensor_proto.h"

namespace {

namespace fs = std::filesystem;
const fs::path kNode = "/usr/share/libonnx-testdata/data/node";

std::string run_cli(const std::string& args, int* rc) {
  std::string cmd =
      std::string("GANTRY_LOG_LEVEL=off ") + GANTRY_BINARY_DIR + "/bin/gantry " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int status = pclose(p);
  *rc = WEXITSTATUS(status);
  return out;
}

float to_float(const gantry::ConstTensorView& t, size_t i) {
  if (t.dtype() == gantry::DType::kFloat64) return static_cast<float>(t.values<double>()[i]);
  if (t.dtype() == gantry::DType::kFloat32) return t.values<float>()[i];
  uint16_t h = t.values<uint16_t>()[i];  // f16
  const int e = (h >> 10) & 31, f = h & 1023;
  float v = e == 0    ? std::ldexp(static_cast<float>(f), -24)
            : e == 31 ? (f ? NAN : INFINITY)
                      : std::ldexp(static_cast<float>(f + 1024), e - 25);
  return (h >> 15) ? -v : v;
}

// The same mapping the backend uses (the raw side must build identical tensors).
ONNXTensorElementDataType ort_type(gantry::DType d) {
  return static_cast<ONNXTensorElementDataType>(gantry::onnx::ort_element_type(d));
}

std::vector<fs::path> files(const fs::path& set, const std::string& prefix) {
  std::vector<fs::path> out;
  for (int i = 0; fs::exists(set / (prefix + std::to_string(i) + ".pb")); ++i)
    out.push_back(set / (prefix + std::to_string(i) + ".pb"));
  return out;
}

// True when raw ONNX Runtime passes the test (rtol 1e-3, atol 1e-7; exact for non-floats).
bool raw_passes(Ort::Env& env, const fs::path& dir) {
  try {
    Ort::SessionOptions so;
    so.SetIntraOpNumThreads(1);
    so.SetInterOpNumThreads(1);
    Ort::Session session(env, (dir / "model.onnx").c_str(), so);
    Ort::AllocatorWithDefaultOptions alloc;
    std::vector<std::string> in_names, out_names;
    for (size_t i = 0; i < session.GetInputCount(); ++i)
      in_names.push_back(session.GetInputNameAllocated(i, alloc).get());
    for (size_t i = 0; i < session.GetOutputCount(); ++i)
      out_names.push_back(session.GetOutputNameAllocated(i, alloc).get());
    std::vector<fs::path> sets;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory()) sets.push_back(e.path());
    if (sets.empty()) return false;
    auto mem = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
    for (const auto& set : sets) {
      std::vector<gantry::Tensor> inputs;
      std::vector<Ort::Value> values;
      std::vector<const char*> in_c, out_c;
      for (const auto& f : files(set, "input_")) {
        auto t = gantry::model::read_tensor_proto(f);
        if (!t.ok()) return false;
        inputs.push_back(t->tensor);
      }
      for (size_t i = 0; i < inputs.size(); ++i) {
        const auto& t = inputs[i];
        const auto& d = t.shape().dims();
        if (t.dtype() == gantry::DType::kString) {
          Ort::Value v =
              Ort::Value::CreateTensor(alloc, d.data(), d.size(), ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING);
          std::vector<const char*> p;
          for (const auto& s : t.strings()) p.push_back(s.c_str());
          v.FillStringTensor(p.data(), p.size());
          values.push_back(std::move(v));
        } else {
          values.push_back(Ort::Value::CreateTensor(mem, const_cast<void*>(t.data()), t.byte_size(), d.data(),
                                                    d.size(), ort_type(t.dtype())));
        }
        in_c.push_back(in_names[i].c_str());
      }
      for (auto& n : out_names) out_c.push_back(n.c_str());
      auto outs = session.Run(Ort::RunOptions{nullptr}, in_c.data(), values.data(), values.size(),
                              out_c.data(), out_c.size());
      auto want_files = files(set, "output_");
      if (want_files.size() != outs.size()) return false;
      for (size_t o = 0; o < outs.size(); ++o) {
        auto want = gantry::model::read_tensor_proto(want_files[o]);
        if (!want.ok() || !outs[o].IsTensor()) return false;
        auto info = outs[o].GetTensorTypeAndShapeInfo();
        if (info.GetElementType() != ort_type(want->tensor.dtype())) return false;
        if (info.GetShape() != want->tensor.shape().dims()) return false;
        const size_t n = info.GetElementCount();
        const gantry::DType dt = want->tensor.dtype();
        if (dt == gantry::DType::kString) {
          for (size_t i = 0; i < n; ++i)
            if (outs[o].GetStringTensorElement(i) != want->tensor.strings()[i]) return false;
        } else if (dt == gantry::DType::kFloat32 || dt == gantry::DType::kFloat64 ||
                   dt == gantry::DType::kFloat16) {
          auto got = gantry::ConstTensorView::over(dt, want->tensor.shape(), outs[o].GetTensorRawData(),
                                                   want->tensor.byte_size());
          if (!got.ok()) return false;
          for (size_t i = 0; i < n; ++i) {
            const float a = to_float(*got, i), b = to_float(want->tensor, i);
            if (std::isnan(a) || std::isnan(b)) {
              if (!(std::isnan(a) && std::isnan(b))) return false;
            } else if (std::isinf(a) || std::isinf(b)) {
              if (a != b) return false;
            } else if (std::abs(static_cast<double>(a) - b) >
                       1e-7 + 1e-3 * std::abs(static_cast<double>(b))) {
              return false;
            }
          }
        } else if (want->tensor.byte_size() > 0 &&  // empty outputs may have null data
                   std::memcmp(outs[o].GetTensorRawData(), want->tensor.data(), want->tensor.byte_size()) !=
                       0) {
          return false;
        }
      }
    }
    return true;
  } catch (const Ort::Exception&) {
    return false;
  }
}

TEST(TestOnnxCli, NodeSuiteVerdictsEqualRawOnnxRuntime) {
  if (!fs::exists(kNode)) FAIL() << kNode << " is missing (install libonnx-testdata)";
  int rc = 0;
  const std::string out = run_cli("test-onnx " + kNode.string(), &rc);
  std::map<std::string, std::string> verdict;  // test -> PASS/FAIL/SKIP
  std::istringstream lines(out);
  std::string line, last;
  while (std::getline(lines, line)) {
    if (line.rfind("PASS ", 0) == 0 || line.rfind("FAIL ", 0) == 0 || line.rfind("SKIP ", 0) == 0) {
      std::string name =
          line.substr(5, line.find(':') == std::string::npos ? std::string::npos : line.find(':') - 5);
      verdict[name] = line.substr(0, 4);
    }
    if (!line.empty()) last = line;
  }
  int passed = -1, failed = -1, skipped = -1;
  ASSERT_EQ(std::sscanf(last.c_str(), "%d passed, %d failed, %d skipped", &passed, &failed, &skipped), 3)
      << last;
  EXPECT_EQ(static_cast<size_t>(passed + failed + skipped), verdict.size());
  EXPECT_EQ(rc, failed > 0 ? 1 : 0);

  Ort::Env env(ORT_LOGGING_LEVEL_FATAL, "raw");
  int raw_passed = 0;
  std::vector<std::string> disagree;
  for (const auto& e : fs::directory_iterator(kNode)) {
    const std::string name = e.path().filename().string();
    const bool raw = raw_passes(env, e.path());
    raw_passed += raw;
    if (raw != (verdict[name] == "PASS"))
      disagree.push_back(name + " (raw " + (raw ? "passes" : "fails") + ")");
  }
  std::cout << "gantry: " << last << "; raw ONNX Runtime passed " << raw_passed << "\n";
  EXPECT_EQ(passed, raw_passed);
  EXPECT_TRUE(disagree.empty()) << disagree.size() << " verdicts differ, first: " << disagree.front();
}

TEST(TestOnnxCli, OneTestFolderAndBadArguments) {
  if (!fs::exists(kNode / "test_abs")) FAIL() << kNode << " is missing (install libonnx-testdata)";
  int rc = 0;
  std::string out =
      run_cli("test-onnx " + (kNode / "test_abs").string() + " " + (kNode / "test_bernoulli").string(), &rc);
  EXPECT_NE(out.find("PASS test_abs"), std::string::npos) << out;
  EXPECT_NE(out.find("FAIL test_bernoulli:"), std::string::npos) << out;
  EXPECT_NE(out.find("1 passed, 1 failed, 0 skipped"), std::string::npos) << out;
  EXPECT_EQ(rc, 1);
  out = run_cli("test-onnx " + (kNode / "test_abs").string(), &rc);
  EXPECT_NE(out.find("1 passed, 0 failed, 0 skipped"), std::string::npos) << out;
  EXPECT_EQ(rc, 0);
  out = run_cli("test-onnx /nonexistent-dir", &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("/nonexistent-dir"), std::string::npos) << out;
  out = run_cli("test-onnx " + (kNode / "test_identity_sequence").string(), &rc);
  EXPECT_NE(out.find("SKIP test_identity_sequence: "), std::string::npos) << out;
  EXPECT_NE(out.find("0 passed, 0 failed, 1 skipped"), std::string::npos) << out;
}

}  // namespace

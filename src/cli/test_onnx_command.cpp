// gantry test-onnx DIR... [--provider P] [--threads N]: runs ONNX backend-test folders (model.onnx +
// test_data_set_N/{input,output}_K.pb) through Gantry's ONNX backend and compares with ONNX's own
// tolerances (onnx.backend.test: rtol 1e-3, atol 1e-7, NaN equals NaN, exact for integers and strings).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "gantry/core/file_io.h"
#include "gantry/core/half.h"
#include "gantry/core/log.h"
#include "gantry/model/tensor_proto.h"
#include "gantry/runtime/runtime.h"

namespace gantry::cli {

namespace {

namespace fs = std::filesystem;

constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-7;

enum class Verdict { kPass, kFail, kSkip };

struct Outcome {
  Verdict verdict;
  std::string reason;
};

// Element i of a float tensor as a double (0 for other types: compare() checks is_float first).
double element(const ConstTensorView& t, size_t i) {
  const auto* p = static_cast<const std::byte*>(t.data());
  return visit_dtype(t.dtype(), [&]<DType D>(DTypeTag<D>) -> double {
    if constexpr (is_float_dtype(D)) {
      dtype_storage_t<D> v;
      std::memcpy(&v, p + i * sizeof(v), sizeof(v));
      if constexpr (is_small_float_dtype(D))
        return decode_small_float(v, small_float_format<D>());
      else
        return v;
    } else {
      return 0;
    }
  });
}

bool is_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 || t == DType::kBFloat16;
}

// "" when `got` matches `want` within tolerance, else what differs.
std::string compare(const ConstTensorView& want, const ConstTensorView& got) {
  if (want.dtype() != got.dtype())
    return "dtype " + std::string(dtype_name(got.dtype())) + ", expected " +
           std::string(dtype_name(want.dtype()));
  if (!(want.shape() == got.shape()))
    return "shape " + got.shape().to_string() + ", expected " + want.shape().to_string();
  const size_t n = static_cast<size_t>(want.element_count());
  if (want.dtype() == DType::kString) {
    for (size_t i = 0; i < n; ++i)
      if (want.strings()[i] != got.strings()[i])
        return "element " + std::to_string(i) + " is \"" + got.strings()[i] + "\", expected \"" +
               want.strings()[i] + "\"";
    return "";
  }
  if (!is_float(want.dtype())) {
    const size_t elem = dtype_size(want.dtype());
    for (size_t i = 0; i < n; ++i)
      if (std::memcmp(static_cast<const std::byte*>(want.data()) + i * elem,
                      static_cast<const std::byte*>(got.data()) + i * elem, elem) != 0)
        return "element " + std::to_string(i) + " differs (exact match required for " +
               std::string(dtype_name(want.dtype())) + ")";
    return "";
  }
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; ++i) {
    const double a = element(got, i), b = element(want, i);
    bool ok;
    if (std::isnan(a) || std::isnan(b))
      ok = std::isnan(a) && std::isnan(b);
    else if (std::isinf(a) || std::isinf(b))
      ok = a == b;
    else
      ok = std::abs(a - b) <= kAtol + kRtol * std::abs(b);
    if (!ok && bad++ == 0) first = i;
  }
  if (bad == 0) return "";
  std::ostringstream s;
  s.precision(9);
  s << bad << " of " << n << " elements differ beyond rtol 1e-3/atol 1e-7 (first: element " << first
    << " got " << element(got, first) << ", expected " << element(want, first) << ")";
  return s.str();
}

// <prefix><N><ext> files in `dir`, ordered by N. N is parsed with a checked from_chars: a number that does
// not fit (input_99999999999999999999.pb) is an error naming the file, not an exception.
Result<std::vector<fs::path>> numbered(const fs::path& dir, const std::string& prefix,
                                       const std::string& ext) {
  std::vector<std::pair<uint32_t, fs::path>> found;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0 || !name.ends_with(ext) || name.size() <= prefix.size() + ext.size())
      continue;
    const std::string_view num(name.data() + prefix.size(), name.size() - prefix.size() - ext.size());
    if (!std::all_of(num.begin(), num.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    uint32_t n = 0;
    const auto [end, err] = std::from_chars(num.data(), num.data() + num.size(), n);
    if (err != std::errc() || end != num.data() + num.size() || n > 100000)
      return InvalidArgument(it->path().string() + ": the index " + std::string(num) +
                             " is out of range (at most 100000)");
    found.emplace_back(n, it->path());
  }
  if (ec) return IoError(dir.string() + ": cannot list: " + ec.message());
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [_, p] : found) out.push_back(p);
  return out;
}

Outcome run_test(runtime::Runtime& rt, const fs::path& dir, const runtime::LoadOptions& options) {
  runtime::LoadOptions o = options;
  o.name = dir.filename().string();
  auto model = rt.load((dir / "model.onnx").string(), o);
  if (!model.ok()) {
    // Skipped: what Gantry itself cannot feed (sequence/optional/map I/O). Everything ONNX Runtime
    // refuses (a missing kernel included) is a failure of the provider under test.
    const bool gantry_limit = model.status().code() == StatusCode::kUnsupported &&
                              model.status().message().find("Gantry") != std::string::npos;
    if (gantry_limit) return {Verdict::kSkip, model.status().message()};
    return {Verdict::kFail, model.status().to_string()};
  }
  const auto& meta = (*model)->metadata();
  std::vector<fs::path> sets;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->is_directory(ec) && it->path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(it->path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return {Verdict::kSkip, "no test_data_set_* folders"};
  for (const auto& set : sets) {
    const std::string where = set.filename().string();
    std::vector<backend::NamedTensor> inputs;
    auto listed_inputs = numbered(set, "input_", ".pb");
    if (!listed_inputs.ok()) return {Verdict::kFail, where + ": " + listed_inputs.status().message()};
    const auto& in_files = *listed_inputs;
    if (in_files.size() > meta.inputs.size())
      return {Verdict::kFail, where + ": " + std::to_string(in_files.size()) +
                                  " inputs given, the model takes " + std::to_string(meta.inputs.size())};
    for (size_t i = 0; i < in_files.size(); ++i) {
      auto t = model::read_tensor_proto(in_files[i]);
      // An unreadable or corrupt input is a broken test: it fails (a skip would let a broken set pass).
      if (!t.ok()) return {Verdict::kFail, where + ": " + t.status().message()};
      inputs.push_back({meta.inputs[i].name, std::move(t->tensor)});
    }
    auto out = (*model)->infer_one(inputs);
    if (!out.ok()) return {Verdict::kFail, where + ": " + out.status().to_string()};
    auto listed_outputs = numbered(set, "output_", ".pb");
    if (!listed_outputs.ok()) return {Verdict::kFail, where + ": " + listed_outputs.status().message()};
    const auto& out_files = *listed_outputs;
    if (out_files.size() != out->size())
      return {Verdict::kFail, where + ": model returned " + std::to_string(out->size()) +
                                  " outputs, expected " + std::to_string(out_files.size())};
    for (size_t o = 0; o < out_files.size(); ++o) {
      auto want = model::read_tensor_proto(out_files[o]);
      // A corrupt or empty expected output cannot be compared against: the test fails.
      if (!want.ok()) return {Verdict::kFail, where + ": expected output: " + want.status().message()};
      std::string diff = compare(want->tensor, (*out)[o].tensor);
      if (!diff.empty()) return {Verdict::kFail, where + ": output '" + (*out)[o].name + "': " + diff};
    }
  }
  return {Verdict::kPass, ""};
}

// Each argument is one test (holds model.onnx) or a folder of tests.
Result<std::vector<fs::path>> collect(const std::vector<std::string>& dirs) {
  std::vector<fs::path> tests;
  for (const auto& d : dirs) {
    const fs::path p(d);
    std::error_code ec;
    auto type = file_type_of(p);
    if (!type.ok()) return type.status().with_context("test folder");
    if (*type != fs::file_type::directory) return NotFound("test folder " + d + " is not a directory");
    if (fs::exists(p / "model.onnx", ec)) {
      tests.push_back(p);
      continue;
    }
    std::vector<fs::path> sub;
    for (auto it = fs::directory_iterator(p, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (it->is_directory(ec) && fs::exists(it->path() / "model.onnx", ec)) sub.push_back(it->path());
    if (sub.empty()) return NotFound(d + " holds neither model.onnx nor test folders with one");
    std::sort(sub.begin(), sub.end());
    tests.insert(tests.end(), sub.begin(), sub.end());
  }
  return tests;
}

}  // namespace

void register_test_onnx_command(CLI::App& app, int& exit_code) {
  auto* cmd =
      app.add_subcommand("test-onnx", "Run ONNX backend-test folders and compare with ONNX's tolerances");
  struct Args {
    std::vector<std::string> dirs;
    std::string provider = "cpu";
    int threads = 1;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("dirs", args->dirs, "A test folder (model.onnx + test_data_set_N/) or a folder of them")
      ->required();
  cmd->add_option("--provider", args->provider, "Execution provider (cpu, cuda, ...)");
  cmd->add_option("--threads", args->threads, "Intra-op threads per session (0 = ONNX Runtime's default)")
      ->check(CLI::Range(0, 4096));
  cmd->callback([args, &exit_code] {
    auto tests = collect(args->dirs);
    if (!tests.ok()) {
      std::cerr << "gantry test-onnx: " << tests.status().message() << "\n";
      exit_code = 2;
      return;
    }
    runtime::RuntimeOptions ro;
    ro.keep_alive_timer = false;
    ro.verdict_cache_dir = "none";
    auto rt = runtime::Runtime::create(std::move(ro));
    if (!rt.ok()) {
      std::cerr << "gantry test-onnx: " << rt.status().message() << "\n";
      exit_code = 1;
      return;
    }
    runtime::LoadOptions lo;
    lo.factory.provider = args->provider;
    lo.factory.intra_op_threads = args->threads;
    lo.verify_checksums = false;  // bare files: nothing to verify against
    int passed = 0, failed = 0, skipped = 0;
    for (const auto& t : *tests) {
      Outcome o = run_test(**rt, t, lo);
      (void)(*rt)->unload(t.filename().string());  // one test's model at a time
      const std::string name = t.filename().string();
      switch (o.verdict) {
        case Verdict::kPass:
          ++passed;
          std::cout << "PASS " << name << "\n";
          break;
        case Verdict::kFail:
          ++failed;
          std::cout << "FAIL " << name << ": " << o.reason << "\n";
          break;
        case Verdict::kSkip:
          ++skipped;
          std::cout << "SKIP " << name << ": " << o.reason << "\n";
          break;
      }
    }
    std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped" << std::endl;
    exit_code = failed > 0 ? 1 : 0;
  });
}

}  // namespace gantry::cli

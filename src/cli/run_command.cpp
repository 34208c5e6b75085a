// gantry run MODEL --input NAME=FILE ... [--output-dir DIR] [--provider P] [--threads N] [--memory-budget B]
//   Loads a model or package through the Runtime (provider chosen by the factory, or the one given; the
//   memory budget checked before loading), runs it once on inputs read from .npy or .pb files, writes one
//   .npy per output and prints a short summary.
// gantry run MODEL.gguf --prompt TEXT [sampling flags]: streams generated text (see run_gguf.h).
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include "cli/commands.h"
#include "cli/run_gguf.h"
#include "gantry/core/file_io.h"
#include "gantry/core/npy.h"
#include "gantry/model/tensor_proto.h"
#include "gantry/runtime/runtime.h"
#include "gantry/weights/fetch_model.h"

namespace gantry::cli {

namespace {

namespace fs = std::filesystem;

Result<Tensor> read_input(const fs::path& file) {
  const std::string ext = file.extension().string();
  if (ext == ".npy") return read_npy(file);
  if (ext == ".pb") {
    GANTRY_ASSIGN_OR_RETURN(auto named, model::read_tensor_proto(file));
    return named.tensor;
  }
  return InvalidArgument("input file " + file.string() + " is neither .npy nor .pb");
}

std::string preview(ConstTensorView t, size_t max_values = 6) {
  std::ostringstream s;
  s.precision(6);
  const size_t n = static_cast<size_t>(t.element_count());
  s << "[";
  for (size_t i = 0; i < std::min(n, max_values); ++i) {
    if (i) s << ", ";
    visit_dtype(t.dtype(), [&]<DType D>(DTypeTag<D>) {
      if constexpr (D == DType::kString)
        s << '"' << t.strings()[i] << '"';
      else if constexpr (D == DType::kBool)
        s << (t.values<uint8_t>()[i] ? "true" : "false");
      else if constexpr (D == DType::kFloat32 || D == DType::kFloat64 || D == DType::kInt64 ||
                         D == DType::kInt32)
        s << t.values<dtype_storage_t<D>>()[i];
      else if constexpr (D == DType::kInt8 || D == DType::kUInt8)
        s << int(t.values<dtype_storage_t<D>>()[i]);
      else
        s << "?";
    });
  }
  if (n > max_values) s << ", ...";
  s << "]";
  return s.str();
}

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::string output_dir;
  std::string provider;
  std::string policy;
  std::string memory_budget;
  int instances = 0;
  RunGgufOptions gguf;  // text-generation flags; --threads is shared with ONNX models
};

int run_tensors(runtime::ModelHandle& handle, const RunArgs& a, const std::string& backend_version) {
  auto fail = [](const Status& s) {
    std::cerr << "gantry run: " << s.message() << "\n";
    return 1;
  };
  const auto& meta = handle->metadata();
  std::vector<NamedTensor> inputs;
  for (const auto& arg : a.inputs) {
    const auto eq = arg.find('=');
    std::string name, file;
    if (eq == std::string::npos) {
      if (meta.inputs.size() != 1) {
        std::cerr << "gantry run: --input " << arg << ": write NAME=FILE (the model has "
                  << meta.inputs.size() << " inputs)\n";
        return 2;
      }
      name = meta.inputs[0].name;
      file = arg;
    } else {
      name = arg.substr(0, eq);
      file = arg.substr(eq + 1);
    }
    auto t = read_input(file);
    if (!t.ok()) return fail(t.status().with_context("input '" + name + "'"));
    inputs.push_back({name, std::move(t).value()});
  }
  if (Status st = backend::check_admission(meta, inputs); !st.ok()) {
    std::cerr << "gantry run: error: " << st.message() << "\n";
    return 1;
  }
  auto outputs = handle->infer_one(inputs);
  if (!outputs.ok()) return fail(outputs.status());

  if (!a.output_dir.empty()) {
    std::error_code ec;
    fs::create_directories(a.output_dir, ec);
    if (ec) return fail(IoError("cannot create output directory " + a.output_dir + ": " + ec.message()));
  }
  std::cout << "model " << meta.name << " on " << meta.provider << " (" << backend_version << ")\n";
  std::set<std::string> used;  // two outputs whose names map to one file get NAME_2.npy, ...
  for (const auto& o : *outputs) {
    std::cout << o.name << " " << dtype_name(o.tensor.dtype()) << " " << o.tensor.shape().to_string() << " "
              << preview(o.tensor) << "\n";
    if (!a.output_dir.empty()) {
      const std::string stem = safe_file_name(o.name);
      std::string name = stem;
      for (int k = 2; !used.insert(name).second; ++k) name = stem + "_" + std::to_string(k);
      const fs::path file = fs::path(a.output_dir) / (name + ".npy");
      if (Status s = write_npy(file, o.tensor); !s.ok()) return fail(s);
    }
  }
  return 0;
}

// Every format goes through the Runtime: the factory picks the backend and provider, the budget checks
// that the model fits, then text-generation models generate and the others run on tensors.
int run_model(RunArgs& a) {
  auto policy = backend::resolve_provider_policy(a.policy);
  if (!policy.ok()) {
    std::cerr << "gantry run: " << policy.status().message() << "\n";
    return 2;
  }
  if (Status st = validate_run_gguf_flags(a.gguf); !st.ok()) {
    std::cerr << "gantry run: error: " << st.message() << "\n";
    return 2;
  }
  runtime::RuntimeOptions ro;
  ro.memory_budget = a.memory_budget;
  ro.keep_alive_timer = false;
  // A model at an http(s) URL is fetched into memory, never to disk.
  ro.fetch_url = [](const std::string& url, uint64_t max_bytes) {
    return weights::fetch_model_source(url, max_bytes);
  };
  auto rt = runtime::Runtime::create(std::move(ro));
  if (!rt.ok()) {
    std::cerr << "gantry run: " << rt.status().message() << "\n";
    return rt.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  runtime::LoadOptions lo;
  lo.factory.policy = *policy;
  lo.factory.provider = a.provider;
  lo.factory.intra_op_threads = a.gguf.llama.threads;
  lo.instances = a.instances;
  lo.factory.llama_defaults.n_ctx = 2048;
  if (Status st = apply(a.gguf.llama, lo.factory.llama, kRunLlamaFlags); !st.ok()) {
    std::cerr << "gantry run: error: " << st.message() << "\n";
    return 2;
  }
  auto handle = (*rt)->load(a.model, lo);
  if (!handle.ok()) {
    std::cerr << "gantry run: error: " << handle.status().message() << "\n";
    return 1;
  }
  backend::Backend* be = (*rt)->backends().find((*handle)->metadata().backend);
  if (be != nullptr && be->capabilities().text_generation)
    return run_generation(handle->model(), a.gguf, std::cout);
  const std::string version =
      be ? std::string(be->name()) + " " + be->version() : (*handle)->metadata().backend;
  return run_tensors(*handle, a, version);
}

}  // namespace

void register_run_command(CLI::App& app, int& exit_code) {
  auto* cmd =
      app.add_subcommand("run", "Run an ONNX model on .npy/.pb inputs, or generate text from a GGUF model");
  auto args = std::make_shared<RunArgs>();
  cmd->add_option("model", args->model,
                  "Model file (.onnx or .gguf), package (directory or .tar), or http(s) URL of a .onnx/.gguf "
                  "model (fetched into memory)")
      ->required();
  cmd->add_option("--input,-i", args->inputs, "NAME=FILE (.npy or .pb); repeat per input");
  cmd->add_option(
      "--output-dir,-o", args->output_dir,
      "Write one NAME.npy per output here (NAME: the output's name with every character other than "
      "A-Z a-z 0-9 - _ . and a leading '.' replaced by '_'; _2, _3... when two names collide)");
  cmd->add_option("--provider", args->provider, "Use only this execution provider (cpu, cuda, ...)");
  cmd->add_option("--provider-policy", args->policy,
                  "fastest|manifest|measured (default: $GANTRY_PROVIDER_POLICY or fastest)");
  cmd->add_option(
      "--memory-budget", args->memory_budget,
      "Memory the model may use per device, e.g. cpu=4GiB,cuda:0=70GiB or 80% (default: 90% of free)");
  cmd->add_option("--instances", args->instances,
                  "Copies of the model to load (default: the package's runtime.peak_concurrency, else 1): "
                  "checks that they fit the memory budget together")
      ->check(CLI::Range(1, 256));
  add_run_gguf_flags(*cmd, args->gguf);
  cmd->callback([args, &exit_code] { exit_code = run_model(*args); });
}

}  // namespace gantry::cli

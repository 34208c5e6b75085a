// gantry inspect MODEL|PKG [--json]: what a model or package holds — manifest, inputs and outputs with dtypes
// and shapes, opsets, producer, size. GGUF files are described by inspect_gguf (cli/inspect_gguf.h).
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "cli/inspect_gguf.h"
#include "gantry/core/file_io.h"
#include "gantry/model/onnx_info.h"
#include "gantry/model/package.h"

namespace gantry::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

struct InspectArgs {
  std::string path;
  bool json = false;
  bool no_verify = false;
};

// A GGUF file by its magic bytes, or by its extension (then the GGUF reader says what is wrong).
bool looks_like_gguf(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return false;
  const auto format = model::detect_model_format(p);
  return (format.ok() && *format == model::ModelFormat::kGguf) || p.extension() == ".gguf";
}

int run_gguf(const fs::path& path, bool json, std::ostream& out) { return inspect_gguf(path, json, out); }

std::string human_size(uint64_t bytes) {
  std::ostringstream s;
  if (bytes < 1024) {
    s << bytes << " B";
  } else {
    double v = static_cast<double>(bytes);
    const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
    int u = -1;
    while (v >= 1024 && u < 3) {
      v /= 1024;
      ++u;
    }
    s << std::fixed << std::setprecision(1) << v << " " << units[u];
  }
  return s.str();
}

Json value_json(const model::OnnxValueInfo& v) {
  Json o;
  o["name"] = v.name;
  o["kind"] = v.kind;
  if (v.dtype) o["dtype"] = dtype_name(*v.dtype);
  if (!v.elem_type_name.empty()) o["onnx_type"] = v.elem_type_name;
  if (v.shape) {
    Json dims = Json::array();
    for (size_t i = 0; i < v.shape->rank(); ++i) {
      if ((*v.shape)[i] >= 0)
        dims.push_back((*v.shape)[i]);
      else if (i < v.dim_names.size() && !v.dim_names[i].empty())
        dims.push_back(v.dim_names[i]);
      else
        dims.push_back(nullptr);
    }
    o["shape"] = std::move(dims);
  } else {
    o["shape"] = nullptr;
  }
  return o;
}

Json onnx_json(const model::OnnxModelInfo& info) {
  Json o;
  o["format"] = "onnx";
  o["file_size"] = info.file_size;
  o["ir_version"] = info.ir_version;
  o["producer_name"] = info.producer_name;
  o["producer_version"] = info.producer_version;
  o["domain"] = info.domain;
  o["model_version"] = info.model_version;
  o["graph_name"] = info.graph_name;
  Json ops = Json::array();
  for (const auto& op : info.opsets) ops.push_back({{"domain", op.domain}, {"version", op.version}});
  o["opset_imports"] = std::move(ops);
  o["node_count"] = info.node_count;
  o["initializer_count"] = info.initializer_count;
  o["external_data"] = info.uses_external_data;
  Json in = Json::array(), out = Json::array();
  for (const auto& v : info.inputs) in.push_back(value_json(v));
  for (const auto& v : info.outputs) out.push_back(value_json(v));
  o["inputs"] = std::move(in);
  o["outputs"] = std::move(out);
  return o;
}

void print_values(std::ostream& out, const char* title, const std::vector<model::OnnxValueInfo>& values) {
  out << title << " (" << values.size() << "):\n";
  size_t width = 4;
  for (const auto& v : values) width = std::max(width, v.name.size());
  for (const auto& v : values) {
    std::string type = v.kind != "tensor" ? v.kind
                       : v.dtype          ? std::string(dtype_name(*v.dtype))
                                          : v.elem_type_name;
    out << "  " << std::left << std::setw(static_cast<int>(width)) << v.name << "  " << std::setw(6) << type
        << " " << v.shape_text() << "\n";
  }
}

void print_package(std::ostream& out, const model::Package& pkg) {
  const auto& m = pkg.manifest();
  out << "Model:      " << m.name << " " << m.version << " (" << model::model_format_name(m.format) << ")\n";
  out << "Source:     " << pkg.source().string() << " (" << model::package_kind_name(pkg.kind())
      << (pkg.synthesized_manifest() ? ", manifest synthesised" : ", manifest verified") << ")\n";
  if (!m.task.empty()) out << "Task:       " << m.task << "\n";
  out << "Model file: " << m.model_file << "  sha256 " << pkg.model_sha256() << "\n";
  if (m.sha256.size() > 1)
    out << "Files:      " << m.sha256.size() << " (all checksums listed in gantry.json)\n";
  const auto& h = m.hardware_requirements;
  if (h.preferred_provider || !h.fallback_providers.empty()) {
    out << "Providers:  " << h.preferred_provider.value_or("(none preferred)");
    for (const auto& f : h.fallback_providers) out << " -> " << f;
    out << "\n";
  }
  if (h.min_memory_mb) out << "Min RAM:    " << *h.min_memory_mb << " MB\n";
  if (h.min_vram_mb) out << "Min VRAM:   " << *h.min_vram_mb << " MB\n";
  if (h.min_cuda_version) out << "Min CUDA:   " << h.min_cuda_version->to_string() << "\n";
  if (h.strategy) out << "Strategy:   " << model::strategy_name(*h.strategy) << "\n";
}

void print_onnx(std::ostream& out, const model::OnnxModelInfo& info) {
  out << "Size:       " << human_size(info.file_size) << " (" << info.file_size << " bytes)\n";
  out << "Producer:   " << (info.producer_name.empty() ? "(unknown)" : info.producer_name)
      << (info.producer_version.empty() ? "" : " " + info.producer_version) << "\n";
  out << "IR version: " << info.ir_version << "\n";
  out << "Opsets:    ";
  for (const auto& op : info.opsets)
    out << " " << (op.domain.empty() ? "ai.onnx" : op.domain) << "=" << op.version;
  out << "\n";
  out << "Graph:      " << (info.graph_name.empty() ? "(unnamed)" : info.graph_name) << ", "
      << info.node_count << " nodes, " << info.initializer_count << " initializers"
      << (info.uses_external_data ? ", external data" : "") << "\n";
  print_values(out, "Inputs", info.inputs);
  print_values(out, "Outputs", info.outputs);
}

int inspect(const InspectArgs& args) {
  if (is_weights_input(args.path)) return inspect_weights(args.path, args.json);
  const fs::path path = args.path;
  if (auto type = file_type_of(path); !type.ok()) {  // missing, a symlink loop, no permission: named
    std::cerr << "gantry inspect: " << type.status().message() << "\n";
    return 1;
  }
  if (looks_like_gguf(path)) return run_gguf(path, args.json, std::cout);

  model::LoadOptions options;
  options.verify_checksums = !args.no_verify;
  auto pkg = model::load_package(path, options);
  if (!pkg.ok()) {
    std::cerr << "gantry inspect: " << pkg.status().to_string() << "\n";
    return 1;
  }
  const auto& m = pkg->manifest();
  Json model_json;
  std::ostringstream model_text;
  if (m.format == model::ModelFormat::kGguf) {
    std::ostringstream gguf_out;
    const int rc = run_gguf(pkg->model_path(), args.json, gguf_out);
    if (rc != 0) {
      std::cout << gguf_out.str();
      return rc;
    }
    if (args.json) {
      model_json = Json::parse(gguf_out.str(), nullptr, false);
      if (model_json.is_discarded()) model_json = gguf_out.str();
    } else {
      model_text << gguf_out.str();
    }
  } else {
    auto info = model::read_onnx_info(pkg->model_path());
    if (!info.ok()) {
      std::cerr << "gantry inspect: " << info.status().to_string() << "\n";
      return 1;
    }
    if (args.json)
      model_json = onnx_json(*info);
    else
      print_onnx(model_text, *info);
  }
  if (args.json) {
    Json out;
    out["source"] = path.string();
    out["kind"] = model::package_kind_name(pkg->kind());
    out["manifest_synthesized"] = pkg->synthesized_manifest();
    out["checksums_verified"] = !pkg->synthesized_manifest() && !args.no_verify;
    out["manifest"] = Json::parse(model::manifest_to_json(m));
    out["model"] = std::move(model_json);
    std::cout << out.dump(2) << "\n";
  } else {
    print_package(std::cout, *pkg);
    std::cout << model_text.str();
  }
  return 0;
}

}  // namespace

void register_inspect_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<InspectArgs>();
  auto* cmd =
      app.add_subcommand("inspect", "Describe a model or package: manifest, inputs/outputs, opsets, size");
  cmd->add_option("path", args->path,
                  "A .onnx or .gguf file, a package directory or .tar, or weights: .safetensors, an index "
                  ".json, a checkpoint directory, an http(s) URL, .npz/.npy")
      ->required();
  cmd->add_flag("--json", args->json, "Print JSON instead of text");
  cmd->add_flag("--no-verify", args->no_verify, "Skip the sha256 verification of package files");
  cmd->callback([args, &exit_code] { exit_code = inspect(*args); });
}

}  // namespace gantry::cli

// gantry pack SRC -o PKG: builds a model package (gantry.json with the sha256 of every file) as a directory
// or, when PKG ends in .tar, a tar archive.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "gantry/model/package.h"

namespace gantry::cli {
namespace {

struct PackArgs {
  std::string source;
  std::string output;
  std::string name;
  std::string version;
  std::string task;
  std::string provider;
  std::vector<std::string> fallbacks;
  std::string model_file;
  bool force = false;
};

}  // namespace

void register_pack_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<PackArgs>();
  auto* cmd =
      app.add_subcommand("pack", "Package a model: write gantry.json with checksums (directory or .tar)");
  cmd->add_option("source", args->source, "A .onnx/.gguf model file, or a directory holding one")->required();
  cmd->add_option("-o,--output", args->output, "Package to write: a directory, or a .tar archive")
      ->required();
  cmd->add_option("--name", args->name, "Model name (default: the model file's stem)");
  cmd->add_option("--version", args->version, "Model version, e.g. 1.0.0 (default: 0.0.0)");
  cmd->add_option("--task", args->task, "What the model does, e.g. classification");
  cmd->add_option("--provider", args->provider, "Preferred provider (cpu, cuda, tensorrt, ...)");
  cmd->add_option("--fallback", args->fallbacks, "Fallback provider, in order (repeatable)");
  cmd->add_option("--model-file", args->model_file, "Which file in a source directory is the model");
  cmd->add_flag("-f,--force", args->force, "Replace an existing package");
  cmd->callback([args, &exit_code] {
    model::PackOptions options;
    options.name = args->name;
    options.version = args->version;
    options.task = args->task;
    if (!args->provider.empty()) options.preferred_provider = args->provider;
    options.fallback_providers = args->fallbacks;
    options.model_file = args->model_file;
    options.overwrite = args->force;
    auto manifest = model::pack_package(args->source, args->output, options);
    if (!manifest.ok()) {
      std::cerr << "gantry pack: " << manifest.status().to_string() << "\n";
      exit_code = 1;
      return;
    }
    std::cout << "packed " << manifest->name << " " << manifest->version << " ("
              << model::model_format_name(manifest->format) << ", " << manifest->sha256.size()
              << (manifest->sha256.size() == 1 ? " file" : " files") << ") into " << args->output << "\n"
              << "model " << manifest->model_file << " sha256 " << manifest->sha256.at(manifest->model_file)
              << "\n";
    exit_code = 0;
  });
}

}  // namespace gantry::cli

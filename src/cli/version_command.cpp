// gantry version: Gantry's, ONNX Runtime's and llama.cpp's versions and the devices ggml sees —
// proof that the whole native chain loads on this machine.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli/commands.h"
#include "gantry/backend/llama/llama_info.h"
#include "gantry/backend/onnx/ort_info.h"
#include "gantry/build_info.h"

namespace gantry::cli {

namespace {

// A bundle (scripts/dist.sh) has a one-line BUNDLE file beside bin/ saying what it is; empty elsewhere.
std::string bundle_line() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  std::ifstream in(exe.parent_path().parent_path() / "BUNDLE");
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

void register_version_command(CLI::App& app, int& exit_code) {
  auto* cmd =
      app.add_subcommand("version", "Print Gantry, ONNX Runtime and llama.cpp versions and ggml devices");
  cmd->callback([&exit_code] {
    fmt::print("gantry {}\n", GANTRY_VERSION_STRING);
    if (const std::string b = bundle_line(); !b.empty()) fmt::print("bundle: {}\n", b);
    fmt::print("onnxruntime {} (providers: {})\n", onnx::ort_version(),
               fmt::join(onnx::ort_builtin_providers(), ", "));
    fmt::print("llama.cpp {}\n", llama::llama_version());
    for (const auto& d : llama::ggml_devices()) {
      fmt::print("  ggml device {} [{}]: {}", d.name, d.type, d.description);
      if (d.memory_total > 0)
        fmt::print(" ({} MiB total, {} MiB free)", d.memory_total >> 20, d.memory_free >> 20);
      fmt::print("\n");
    }
    exit_code = 0;
  });
}

}  // namespace gantry::cli

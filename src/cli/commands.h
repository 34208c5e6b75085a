// Each gantry subcommand lives in its own <name>_command.cpp and registers itself on the app.
// A command's callback stores the process exit code in `exit_code`: 0 success, 1 runtime
// failure (clear message on stderr), 2 bad usage.
#pragma once

#include <CLI/CLI.hpp>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>

namespace gantry::cli {

void register_version_command(CLI::App& app, int& exit_code);
void register_detect_command(CLI::App& app, int& exit_code);
void register_inspect_command(CLI::App& app, int& exit_code);
void register_pack_command(CLI::App& app, int& exit_code);
void register_plan_command(CLI::App& app, int& exit_code);
void register_run_command(CLI::App& app, int& exit_code);
void register_test_onnx_command(CLI::App& app, int& exit_code);
void register_bench_command(CLI::App& app, int& exit_code);
void register_serve_command(CLI::App& app, int& exit_code);
void register_kernel_command(CLI::App& app, int& exit_code);
void register_weights_command(CLI::App& app, int& exit_code);
void register_rpc_server_command(CLI::App& app, int& exit_code);
// gantry inspect on weights (weights_command.cpp): safetensors files and indexes, checkpoint
// directories, URLs, .npz/.npy.
bool is_weights_input(const std::string& spec);
int inspect_weights(const std::string& spec, bool json);

// Parses argv and runs the chosen command's callback. Returns its exit code; CLI11 prints help or usage
// (help exits 0, bad usage 2); an unexpected exception becomes a one-line error and exit code 1.
inline int parse_and_run(CLI::App& app, int argc, char** argv, const int& exit_code) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const std::filesystem::filesystem_error& e) {  // a safety net: readers return Status instead
    std::cerr << "gantry: error: " << e.path1().string() << ": " << e.code().message() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "gantry: error: " << e.what() << "\n";
    return 1;
  }
  return exit_code;
}

}  // namespace gantry::cli

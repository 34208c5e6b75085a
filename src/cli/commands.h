// Each gantry subcommand lives in its own <name>_command.cpp and registers itself on the app.
// A command's callback stores the process exit code in `exit_code`: 0 success, 1 runtime
// failure (clear message on stderr), 2 bad usage.
#pragma once

#include <CLI/CLI.hpp>

namespace gantry::cli {

void register_version_command(CLI::App& app, int& exit_code);
void register_detect_command(CLI::App& app, int& exit_code);
void register_inspect_command(CLI::App& app, int& exit_code);
void register_pack_command(CLI::App& app, int& exit_code);
void register_plan_command(CLI::App& app, int& exit_code);
void register_run_command(CLI::App& app, int& exit_code);
void register_test_onnx_command(CLI::App& app, int& exit_code);
void register_bench_command(CLI::App& app, int& exit_code);

}  // namespace gantry::cli

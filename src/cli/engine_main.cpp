// The engine half of the CLI: every command, with ONNX Runtime and llama.cpp linked. It is a shared
// module that the `gantry` front end (main.cpp) loads only for commands that need it, so that
// `gantry detect` starts without loading the inference runtimes.

#include <langinfo.h>

#include <clocale>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/llama_flags.h"
#include "cli/llama_server_args.h"
#include "gantry/build_info.h"
#include "gantry/core/cleanup_registry.h"

namespace {

// File names are UTF-8 bytes; libarchive converts them through the C library's character type, which in
// the default "C" locale cannot represent "模型.onnx". Only LC_CTYPE is set (numbers keep the "C" format):
// the user's locale when it is UTF-8, else C.UTF-8.
void use_utf8_character_type() {
  const char* set = std::setlocale(LC_CTYPE, "");
  const char* codeset = set ? nl_langinfo(CODESET) : nullptr;
  if (codeset == nullptr || std::strcmp(codeset, "UTF-8") != 0) {
    if (std::setlocale(LC_CTYPE, "C.UTF-8") == nullptr) std::setlocale(LC_CTYPE, "C");
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int gantry_engine_main(int argc, char** argv) {
  use_utf8_character_type();
  CLI::App app{"Gantry " GANTRY_VERSION_STRING
               " - finds the best hardware on this machine, proves a model fits, and runs it",
               "gantry"};
  app.require_subcommand(1);
  app.set_version_flag("--version", GANTRY_VERSION_STRING);

  // Temporary files and extraction directories go away on Ctrl-C/SIGTERM too (serve replaces the handler
  // with its drain, where the owners' destructors clean up).
  gantry::install_cleanup_signal_handlers();

  int exit_code = 0;
  gantry::cli::register_version_command(app, exit_code);
  gantry::cli::register_detect_command(app, exit_code);
  gantry::cli::register_inspect_command(app, exit_code);
  gantry::cli::register_pack_command(app, exit_code);
  gantry::cli::register_plan_command(app, exit_code);
  gantry::cli::register_run_command(app, exit_code);
  gantry::cli::register_test_onnx_command(app, exit_code);
  gantry::cli::register_bench_command(app, exit_code);
  gantry::cli::register_serve_command(app, exit_code);
  gantry::cli::register_kernel_command(app, exit_code);
  gantry::cli::register_weights_command(app, exit_code);
  gantry::cli::register_rpc_server_command(app, exit_code);

  // `gantry serve` takes llama-server's command line too: respelled first (cli/llama_server_args.h).
  std::vector<std::string> respelled;
  if (argc >= 2 && std::strcmp(argv[1], "serve") == 0) {
    auto r = gantry::cli::respell_llama_server_args(std::vector<std::string>(argv + 2, argv + argc));
    if (!r.ok()) {
      std::fprintf(stderr, "gantry serve: %s\n", r.status().message().c_str());
      return 2;
    }
    respelled = {argv[0], argv[1]};
    respelled.insert(respelled.end(), r->begin(), r->end());
  }
  std::vector<char*> args(argv, argv + argc);
  if (!respelled.empty()) {
    args.clear();
    for (auto& a : respelled) args.push_back(a.data());
    argc = static_cast<int>(args.size());
  }
  for (auto& a : args) a = const_cast<char*>(gantry::cli::llama_cpp_alias(a));
  return gantry::cli::parse_and_run(app, argc, args.data(), exit_code);
}

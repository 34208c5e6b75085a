// gantry: discover the hardware, plan how a model fits, run it on the best backend.
//
// This front end links only hardware discovery. `gantry detect` runs here, in milliseconds, and
// works even where ONNX Runtime or llama.cpp cannot load. Every other command (and --help) is
// handed to the engine module, lib/libgantry_engine.so beside bin/, which links the runtimes.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string_view>

#include "cli/commands.h"
#include "gantry/build_info.h"

namespace {

int run_detect(int argc, char** argv) {
  CLI::App app{"Gantry " GANTRY_VERSION_STRING " hardware discovery", "gantry"};
  app.require_subcommand(1);
  int exit_code = 0;
  gantry::cli::register_detect_command(app, exit_code);
  return gantry::cli::parse_and_run(app, argc, argv, exit_code);
}

// GANTRY_ENGINE_LIB overrides; otherwise <dir of this executable>/../lib/libgantry_engine.so.
std::filesystem::path engine_library_path() {
  if (const char* env = std::getenv("GANTRY_ENGINE_LIB"); env && *env) return env;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "libgantry_engine.so";  // let the dynamic loader search
  return exe.parent_path().parent_path() / "lib" / "libgantry_engine.so";
}

int run_engine(int argc, char** argv) {
  const auto lib = engine_library_path();
  void* handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::cerr << "gantry: error: cannot load the engine module " << lib << ": " << dlerror()
              << "\n  (run 'make build'; 'gantry detect' works without it)\n";
    return 1;
  }
  using EngineMain = int (*)(int, char**);
  auto engine_main = reinterpret_cast<EngineMain>(dlsym(handle, "gantry_engine_main"));
  if (!engine_main) {
    std::cerr << "gantry: error: " << lib << " has no gantry_engine_main: rebuild with 'make build'\n";
    return 1;
  }
  const int code = engine_main(argc, argv);
  std::cout.flush();
  // Skip static destructors of the runtimes' own thread pools: exit as soon as the command is done.
  std::_Exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string_view(argv[1]) == "detect") return run_detect(argc, argv);
  return run_engine(argc, argv);
}

// Placeholder until this command lands; it says so instead of pretending to work.
#include <iostream>

#include "cli/commands.h"

namespace gantry::cli {

void register_run_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("run", "(not yet available)");
  cmd->allow_extras();
  cmd->callback([&exit_code] {
    std::cerr << "gantry: 'run' is not available in this build yet\n";
    exit_code = 2;
  });
}

}  // namespace gantry::cli

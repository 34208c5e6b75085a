// `gantry inspect MODEL.gguf [--json]`: what a GGUF file holds, read with Gantry's own reader.
#pragma once

#include <filesystem>
#include <ostream>

namespace gantry::cli {

// Prints the summary (text or JSON) to `out`; errors go to stderr. Returns the exit code (0 ok, 1 failure).
int inspect_gguf(const std::filesystem::path& path, bool json, std::ostream& out);

}  // namespace gantry::cli

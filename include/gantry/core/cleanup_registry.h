// The registry of temporary paths to remove if the process is stopped by a signal.
//
// Temporary files (AtomicFile) and extraction directories (a .tar package) are removed by their owners'
// destructors; a SIGINT/SIGTERM/SIGHUP skips destructors, so each owner also registers its path here and
// the handler installed by install_cleanup_signal_handlers() removes every registered path (recursively
// for directories) with async-signal-safe calls only, then re-raises the signal with its default action.
// The registry is a fixed table (kCleanupSlots paths); when it is full, registration returns -1 and the
// path is simply not cleaned up on a signal.
#pragma once

#include <cstddef>
#include <filesystem>

namespace gantry {

inline constexpr size_t kCleanupSlots = 64;

// Registers `path` (absolute or relative to the current directory at signal time); returns a slot id for
// unregister_cleanup_path(), or -1 when the table is full or the path is too long. Thread-safe.
int register_cleanup_path(const std::filesystem::path& path);

// Forgets a slot (the owner removed the path itself, or kept it on purpose). -1 is ignored.
void unregister_cleanup_path(int slot);

// Installs the SIGINT/SIGTERM/SIGHUP handler once. A command that handles these signals itself (serve's
// drain) installs its own handler afterwards and relies on the owners' destructors instead.
void install_cleanup_signal_handlers();

// The number of paths registered now (for tests).
size_t registered_cleanup_paths();

// What the handler does, callable directly (for tests): removes every registered path. Async-signal-safe.
void run_cleanup_now();

}  // namespace gantry

// Thread counts asked of a backend (a flag, a manifest's intra_op_threads): more threads than the machine
// has hardware threads only oversubscribe the cores (`-t 999` once started 999 spinning threads), so every
// backend caps them here, once, with a warning that says so.
#pragma once

#include <string_view>

namespace gantry::backend {

// The machine's hardware threads (at least 1).
int hardware_threads();

// `requested` when it is 0 (the backend's default) or at most hardware_threads(); otherwise
// hardware_threads(), logging a warning that names `what` (e.g. "intra_op_threads") and both numbers.
int cap_threads(int requested, std::string_view what);

}  // namespace gantry::backend

// One-time process set-up for llama.cpp: log bridge, backend init, dynamic ggml backends.
#pragma once

namespace gantry::llama {

void ensure_llama_runtime();

}  // namespace gantry::llama

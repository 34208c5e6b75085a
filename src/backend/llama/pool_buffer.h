// A ggml buffer type whose buffers are host memory from a memory::BlockPool: how llama.cpp's CPU weights are
// drawn from the runtime's CPU pool (and so charged to the model's ledger in the CPU budget) through
// llama_model_params::tensor_buft_overrides. The buffers behave as ggml's own CPU buffers (host memory, the
// CPU backend computes on them); only where their bytes come from differs.
#pragma once

#include <ggml-backend.h>

#include "gantry/memory/block_pool.h"

namespace gantry::llama {

// The buffer type over `pool` (one per pool, created on first use; the pool must outlive every buffer).
// Allocations are attributed to memory::OwnerScope::current().
ggml_backend_buffer_type_t pool_buffer_type(memory::BlockPool& pool);

}  // namespace gantry::llama

// How fast this machine's CPU generates tokens with a given GGUF model, for `plan --speed`: timed on the
// model's own matrices instead of derived from a memory triad and an ISA peak. A decoding step multiplies
// every weight matrix by one vector; ggml's speed at that depends on the tensor type, on the row length
// (short rows pay a per-row cost), on whether llama.cpp repacks the type for this CPU (CPU_REPACK:
// q4_0/q4_K/iq4_nl interleaved), and on whether the bytes read per token stay in the last-level cache.
// A triad knows none of these: on a 2-core EPYC it predicted 240 t/s for a q8_0 model that runs at 283,
// 321 for a q4_0 one at 444, and 2,610 for a 4 MiB one that runs at 6,300.
//
// What is timed: the first layer's weight matrices (their real types and shapes; of a mixture of experts,
// `n_expert_used` experts) copied n_layer times, and the output projection, each multiplied by an f32
// vector in one ggml graph on the CPU backend with `threads` threads, every matrix in the buffer type
// llama.cpp would give it (the CPU's extra buffer types first, as llama.cpp's weight placement tries them).
// The data are zeros, which every type's kernels process like any other values. A model larger than
// `max_bytes` is timed on fewer layer copies (and, when the output projection alone exceeds half of it, on a
// slice of its rows): it is then read from DRAM either way, so the rate carries over. Then a chain of small
// element-wise nodes (n_embd wide) times what each node of a decoding graph costs beyond its arithmetic:
// the barrier across the threads.
#pragma once

#include <cstdint>
#include <string>

#include "gantry/core/status.h"
#include "gantry/plan/model_profile.h"
#include "gantry/plan/speed.h"

namespace gantry::llama {

struct CpuModelSpeedOptions {
  int threads = 1;
  uint64_t max_bytes = 512ull << 20;  // weights timed at most (see above)
  int budget_ms = 200;                // time spent timing the matrices (the node chain takes a tenth more)
};

// The result: memory_bandwidth is the model's weight bytes over the measured time of their products
// (efficiency 1: the rate already includes ggml's arithmetic, so overlap is true); flops is the ISA
// estimate (plan::cpu_speed), which only limits batched and prompt steps; seconds_per_node the measured
// node cost; seconds_per_step plan::kCpuHostSecondsPerStep. `cpu` supplies the ISA, the clock and the cache.
// Errors: `gguf_path` unreadable or not GGUF, no weight matrices in its first layer, or no memory for
// the timed copies.
Result<plan::DeviceSpeed> measure_cpu_model_speed(const std::string& gguf_path,
                                                  const plan::ModelProfile& model, const hw::CpuInfo& cpu,
                                                  double ghz, const CpuModelSpeedOptions& options);

}  // namespace gantry::llama

// Predicted speed of a planned GGUF model: prompt tokens/s (compute-bound: FLOPs per token against each
// device's throughput), generation tokens/s (memory-bound: bytes read per token against each device's
// memory bandwidth) and load time (file bytes against storage bandwidth). A roofline model: every figure
// rests on the assumptions returned with it, and the efficiency factors below are those assumptions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/hw/registry.h"
#include "gantry/plan/model_profile.h"
#include "gantry/plan/planner.h"

namespace gantry::plan {

// Fractions of a device's figures llama.cpp reaches. Not fitted to one machine: round numbers from the
// usual observation that token generation reaches 60-80% of a GPU's datasheet bandwidth and most of a
// STREAM-style measured bandwidth on CPUs, and quantised matrix multiplication about half of peak FLOPs.
// `make bench` (BENCH predicted-tg-error) reports how far they are off on the machine it runs on.
inline constexpr double kPeakBandwidthEfficiency = 0.7;       // of a datasheet (catalogue) bandwidth
inline constexpr double kMeasuredBandwidthEfficiency = 0.85;  // of a measured (triad) bandwidth
inline constexpr double kComputeEfficiency = 0.5;             // of a datasheet or ISA-derived peak FLOP/s
// llama.cpp's decoding graph: about this many nodes per transformer layer (norms, Q/K/V and output
// projections, RoPE, attention, FFN gate/up/down, residual adds) and for the output head.
inline constexpr double kGraphNodesPerLayer = 30;
inline constexpr double kGraphNodesOutput = 6;
// A step's fixed cost on the host, assumed: llama_decode's own work around the graph (the batch split, the
// KV slot, the inputs, the logits copied out; the graph itself is reused between steps).
// - kHostSecondsPerStep: for a GPU (its launch and synchronisation besides; not measured on a GPU yet) and
//   for a CPU known only by a triad, fitted on that roofline (the tiny test model ran 257 us a token beyond
//   it: 2,604 t/s measured, 7,848 predicted, in an earlier session).
// - kCpuHostSecondsPerStep: for a CPU timed on the model (gantry/backend/llama/cpu_model_speed.h), whose
//   matrices and graph nodes are measured: what those left unexplained for a 4 MiB model on a 2-core EPYC
//   (158 us a token measured, 105 us timed).
inline constexpr double kHostSecondsPerStep = 250e-6;
inline constexpr double kCpuHostSecondsPerStep = 50e-6;
// A barrier timed slower than this did not measure the threads' synchronisation but the scheduler keeping
// one of them off a core; then this much is assumed instead.
inline constexpr double kMaxPlausibleBarrierSeconds = 50e-6;
inline constexpr double kAssumedBarrierSeconds = 1e-6;
// A GPU kernel launch within a CUDA graph (llama.cpp replays the decode graph).
inline constexpr double kGpuSecondsPerNode = 2e-6;

// One device's throughput. `source` says where the figures come from: "catalogue" (vendor datasheet),
// "measured" (timed on this machine), "estimated" (derived from cores, ISA and clock).
struct DeviceSpeed {
  double flops = 0;                 // peak FLOP/s; 0: unknown
  double memory_bandwidth = 0;      // peak bytes/s; 0: unknown
  double bandwidth_efficiency = 0;  // fraction of memory_bandwidth reached while generating
  double compute_efficiency = kComputeEfficiency;
  // Whether memory reads and arithmetic overlap (a step takes the larger of the two) or follow each other
  // (the sum). GPUs hide memory latency behind thousands of threads: overlap. A CPU decoding on a few threads
  // issues the loads from the same cores that compute: no overlap (cpu_speed sets false).
  bool overlap = true;
  // The last-level cache (bytes; 0: unknown). A device whose bytes per token fit in half of it is limited by
  // per-token overhead (graph, thread synchronisation): said in the assumptions.
  uint64_t cache_bytes = 0;
  // Per-token overhead of a decoding step, which the roofline alone misses (it dominates small models):
  // every graph node of the device's layers costs `seconds_per_node` (a CPU: one barrier across the decoding
  // threads, measured on this machine; a GPU: a kernel launch, assumed), and each step once costs
  // `seconds_per_step` (graph build, scheduling, sampling). 0: not counted.
  double seconds_per_node = 0;
  double seconds_per_step = 0;
  std::string overhead_source;   // "measured" (barrier timed here), "assumed"
  std::string flops_source;      // "catalogue", "estimated"
  std::string bandwidth_source;  // "catalogue", "measured"
  std::string description;       // e.g. "2 threads x 2.0 GHz x 64 FLOP/cycle (AVX-512 FMA)"
};

struct DeviceSpeedPrediction {
  std::string id;
  uint64_t bytes_per_token = 0;  // weights of its layers (+ output layer) + KV cache read at the full context
  double flops_per_token = 0;    // 2 x weights (parameters) + attention over the full context
  double generation_seconds_per_step = 0;  // including overhead_seconds_per_step
  double overhead_seconds_per_step = 0;
  double prompt_seconds_per_token = 0;
  // A remote device (another host, through RPC): what crosses the network per step to run its layers.
  uint64_t network_bytes_per_step = 0;  // activations in (and the KQ mask), activations or logits out
  double network_seconds_per_step = 0;  // one round trip + those bytes at the measured bandwidths
};

struct SpeedPrediction {
  bool known = false;  // false when a device with layers has no bandwidth/FLOP figure
  double prompt_tokens_per_s = 0;
  double generation_tokens_per_s = 0;   // all n_parallel sequences together
  double network_seconds_per_step = 0;  // of a generation step, the time spent crossing to remote devices
  double load_seconds = 0;              // 0 when the storage bandwidth is unknown
  std::vector<DeviceSpeedPrediction> devices;
  std::vector<std::string> assumptions;
};

// Remote devices (hw::DeviceKind::kRemote, another host through ggml's RPC protocol) add the network to a
// step, measured per link (hw::RemoteLink: round trip, upload and download bandwidth): ggml runs a remote
// device's layers by sending the activations (n_embd f32 per sequence) and the step's small inputs (the
// KQ mask: kv_cells f16 per sequence), then the graph, and reading the result back with one request that
// waits for the computation: one round trip, the bytes in at the upload bandwidth, the bytes out (the
// activations, or the logits n_vocab f32 per sequence when it holds the output layer) at the download
// bandwidth. A remote device without a measured link counts only its round trip, if known (said in the
// assumptions). Prompt processing counts the same per ubatch.
//
// `speeds` matches plan.devices one to one. `storage_bytes_per_s` 0: load time unknown.
// Generation: per decoding step every device reads its bytes once for all n_parallel sequences (plus each
// sequence's KV); its time is the larger (DeviceSpeed::overlap) or the sum of bytes / (bandwidth x
// efficiency) and FLOPs / (FLOP/s x efficiency); devices run their layers one after another, so their times
// add. Prompt: FLOPs per token / (FLOP/s x efficiency), at least the weights read once per ubatch. Fails when
// sizes disagree.
Result<SpeedPrediction> predict_speed(const ModelProfile& model, const Plan& plan,
                                      const std::vector<DeviceSpeed>& speeds, double storage_bytes_per_s);

// FLOP/cycle per core for fp32 FMA from the ISA list: 64 with avx512f, 32 with avx2+fma, 16 with neon/asimd
// (2 units x 4 lanes x 2), else 8.
int flops_per_cycle(const std::vector<std::string>& isa);
// This machine's CPU: `threads` x `ghz` x flops_per_cycle ("estimated"), bandwidth from
// `measured_bandwidth` bytes/s ("measured"; 0: unknown), per-node overhead from `barrier_seconds` (one
// barrier across the threads, measure_thread_barrier; 0: not counted) plus kHostSecondsPerStep per step.
DeviceSpeed cpu_speed(const hw::CpuInfo& cpu, int threads, double ghz, double measured_bandwidth,
                      double barrier_seconds = 0);
// A catalogue GPU: datasheet bandwidth (GB/s) and FP16 dense TFLOPS ("catalogue").
DeviceSpeed gpu_speed(double bandwidth_gb_s, double fp16_tflops, const std::string& name);

// The CPU clock in GHz from /proc/cpuinfo ("cpu MHz" of the first processor) under `sysroot`; nullopt when
// absent.
std::optional<double> cpu_ghz(const std::string& sysroot = "/");

// Assumed sequential read bandwidth of the block device holding a model, for the load time: a class figure
// (NVMe 1 GB/s, as data/catalogue.json assumes per local drive; another SSD 0.5 GB/s; a rotational disk
// 0.15 GB/s), never above an NVMe drive's PCIe link. 0 when sysfs does not say what the device is.
struct StorageBandwidth {
  double bytes_per_s = 0;
  std::string description;  // "nvme0n1 (NVMe, Samsung SSD 990 PRO 1TB): assumed 1.00 GB/s sequential read"
};
inline constexpr double kNvmeReadBytesPerS = 1.0e9;
inline constexpr double kSsdReadBytesPerS = 0.5e9;
inline constexpr double kRotationalReadBytesPerS = 0.15e9;
StorageBandwidth storage_read_bandwidth(const hw::BlockDevice& device);

// A STREAM-style triad (a[i] = b[i] + s*c[i], 3 x 128 MiB of doubles, larger than typical L3) on `threads`
// threads, repeated for about `budget_ms`; returns the best pass in bytes/s (counting 3 arrays moved).
double measure_memory_bandwidth(int threads, int budget_ms = 150);

// The time of one barrier across `threads` spinning threads (what ggml's CPU backend does after every graph
// node): the best of batches timed over about `budget_ms`; 0 for one thread (no barrier).
double measure_thread_barrier(int threads, int budget_ms = 20);

}  // namespace gantry::plan

#include "gantry/plan/speed.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "gantry/hw/bandwidth.h"
#include "gantry/plan/plan_json.h"

namespace gantry::plan {
namespace {

bool has(const std::vector<std::string>& isa, std::string_view f) {
  return std::find(isa.begin(), isa.end(), f) != isa.end();
}

// Attention FLOPs per token for one layer at `cells` KV cells: QK^T and softmax(..)V, 2 FLOPs per MAC.
double attention_flops(const LayerProfile& l, uint64_t cells) {
  return 2.0 * static_cast<double>(cells) * l.n_head * (l.n_embd_head_k + l.n_embd_head_v);
}

}  // namespace

Result<SpeedPrediction> predict_speed(const ModelProfile& m, const Plan& plan,
                                      const std::vector<DeviceSpeed>& speeds, double storage_bytes_per_s) {
  if (speeds.size() != plan.devices.size()) {
    return InvalidArgument(fmt::format("speed prediction: {} device speeds for a plan over {} devices",
                                       speeds.size(), plan.devices.size()));
  }
  if (plan.estimate) return InvalidArgument("speed prediction needs a GGUF plan, not a generic estimate");
  SpeedPrediction out;
  out.known = true;
  const double n_seq = std::max(1u, plan.options.n_parallel);
  const double total_w = static_cast<double>(m.total_weight_bytes());
  // Parameters per weight byte: spreads n_params over the devices by the bytes their layers hold.
  const double params_per_byte = total_w > 0 ? static_cast<double>(m.n_params) / total_w : 0;
  double gen_step = 0, prompt_token = 0;
  for (size_t i = 0; i < plan.devices.size(); ++i) {
    const DevicePlan& d = plan.devices[i];
    const DeviceSpeed& s = speeds[i];
    DeviceSpeedPrediction p;
    p.id = hw::memory_device_id(d.device);
    uint64_t weights = 0;
    double attn = 0;
    for (uint32_t il : d.layers) {
      weights += m.layers[il].weight_bytes;
      const uint32_t cells = m.layers[il].sliding_window ? plan.kv_cells_swa : plan.kv_cells;
      attn += attention_flops(m.layers[il], cells);
    }
    if (d.has_output_layer) weights += m.output_weight_bytes;
    // Token embeddings are a row lookup (get_rows), not a read of the whole matrix.
    p.bytes_per_token = weights + d.predicted.kv_cache;
    p.flops_per_token = 2.0 * params_per_byte * static_cast<double>(weights) + attn;
    if (p.bytes_per_token > 0) {
      if (s.memory_bandwidth <= 0 || s.bandwidth_efficiency <= 0 || s.flops <= 0) {
        out.known = false;
        out.assumptions.push_back(fmt::format("{}: no bandwidth or FLOP/s figure, so no speed", p.id));
      } else {
        // KV is per sequence (already all streams in predicted.kv_cache); weights are read once per step.
        const double mem =
            static_cast<double>(p.bytes_per_token) / (s.memory_bandwidth * s.bandwidth_efficiency);
        const double comp = n_seq * p.flops_per_token / (s.flops * s.compute_efficiency);
        p.generation_seconds_per_step = s.overlap ? std::max(mem, comp) : mem + comp;
        // Per-token overhead: every node of this device's part of the graph, and the step's fixed cost once
        // (on the first device with layers).
        const double nodes = kGraphNodesPerLayer * static_cast<double>(d.layers.size()) +
                             (d.has_output_layer ? kGraphNodesOutput : 0);
        p.overhead_seconds_per_step = nodes * s.seconds_per_node + (gen_step == 0 ? s.seconds_per_step : 0);
        p.generation_seconds_per_step += p.overhead_seconds_per_step;
        const double ubatch = std::max(1u, plan.n_ubatch);
        p.prompt_seconds_per_token =
            std::max(p.flops_per_token / (s.flops * s.compute_efficiency),
                     static_cast<double>(weights) / ubatch / (s.memory_bandwidth * s.bandwidth_efficiency));
      }
    }
    // Half the cache: the rest holds activations, the KV cache and other tenants of a shared cache.
    if (p.bytes_per_token > 0 && p.bytes_per_token <= s.cache_bytes / 2) {
      const bool counted = s.seconds_per_node > 0 || s.seconds_per_step > 0;
      out.assumptions.push_back(fmt::format(
          "{}: the {} read per token fit in half its {} cache, so per-token overhead (graph, thread "
          "synchronisation) limits generation{}",
          p.id, human_bytes(p.bytes_per_token), human_bytes(s.cache_bytes),
          counted ? " (counted below)" : ", and it is not counted here: the figure is an upper bound"));
    }
    if (d.device.remote && (!d.layers.empty() || d.has_output_layer)) {
      const hw::RemoteLink& link = *d.device.remote;
      const double seqs = n_seq;
      const double mask = static_cast<double>(plan.kv_cells) * (plan.options.flash_attn ? 2 : 4);
      const double in = seqs * (4.0 * m.n_embd + mask);
      const double out_bytes = seqs * 4.0 * (d.has_output_layer ? m.n_vocab : m.n_embd);
      p.network_bytes_per_step = static_cast<uint64_t>(in + out_bytes);
      double t = link.round_trip_s.value_or(0);
      if (link.upload_bytes_per_s && *link.upload_bytes_per_s > 0)
        t += in / static_cast<double>(*link.upload_bytes_per_s);
      if (link.download_bytes_per_s && *link.download_bytes_per_s > 0)
        t += out_bytes / static_cast<double>(*link.download_bytes_per_s);
      if (!link.round_trip_s || !link.upload_bytes_per_s || !link.download_bytes_per_s) {
        out.assumptions.push_back(
            fmt::format("{}: the link to {} was not measured, so its network time is "
                        "{}",
                        p.id, link.endpoint, link.round_trip_s ? "its round trip only" : "left out"));
      }
      p.network_seconds_per_step = t;
      out.network_seconds_per_step += t;
      const double ubatch = std::max(1u, plan.n_ubatch);
      p.prompt_seconds_per_token += t / ubatch;  // the same crossing once per ubatch of prompt tokens
    }
    gen_step += p.generation_seconds_per_step + p.network_seconds_per_step;
    prompt_token += p.prompt_seconds_per_token;
    out.devices.push_back(std::move(p));
  }
  if (out.known && gen_step > 0) {
    out.generation_tokens_per_s = n_seq / gen_step;
    out.prompt_tokens_per_s = 1.0 / prompt_token;
  } else {
    out.known = false;
  }
  if (storage_bytes_per_s > 0) out.load_seconds = static_cast<double>(m.file_bytes) / storage_bytes_per_s;

  auto& a = out.assumptions;
  a.push_back(fmt::format(
      "generation: each step reads every layer's weights once (memory-bound) plus the KV cache of "
      "a full context ({} cells per sequence, {} sequences); tokens/s = sequences / step time",
      plan.kv_cells, plan.n_stream));
  a.push_back(
      "a GPU overlaps memory reads and arithmetic (step time = the larger); a CPU known by a triad and its "
      "ISA "
      "does not (step time = the sum: its few threads issue the loads and do the arithmetic); a CPU timed on "
      "the model's own products has both in its one measured rate");
  a.push_back(fmt::format(
      "efficiency: {:.0f}% of datasheet bandwidth, {:.0f}% of measured bandwidth, {:.0f}% of peak FLOP/s "
      "(round figures, not fitted; BENCH predicted-tg-error checks them)",
      100 * kPeakBandwidthEfficiency, 100 * kMeasuredBandwidthEfficiency, 100 * kComputeEfficiency));
  a.push_back(
      "prompt processing is compute-bound: 2 FLOPs per parameter per token plus attention over the full "
      "context, at least the weights read once per ubatch");
  const bool any_remote = std::any_of(plan.devices.begin(), plan.devices.end(),
                                      [](const DevicePlan& d) { return d.device.remote.has_value(); });
  a.push_back(
      any_remote ? fmt::format(
                       "layers split over devices run one after another (pipeline): device times add; each "
                       "remote device adds a round trip and its activations (or logits) at the measured link "
                       "bandwidth per step ({:.2f} ms in all); local interconnect transfers are ignored",
                       out.network_seconds_per_step * 1e3)
                 : "layers split over devices run one after another (pipeline, one sequence): device times "
                   "add; interconnect transfers of activations are ignored");
  a.push_back(
      fmt::format("per-token overhead: {:.0f} graph nodes per layer (+{:.0f} for the output head), each "
                  "costing a barrier "
                  "of the decoding threads on a CPU or a kernel launch on a GPU, plus a fixed cost per step",
                  kGraphNodesPerLayer, kGraphNodesOutput));
  a.push_back(storage_bytes_per_s > 0
                  ? fmt::format("load time: the file read once at {:.2f} GB/s storage bandwidth",
                                storage_bytes_per_s / 1e9)
                  : "load time unknown: no storage bandwidth figure");
  for (size_t i = 0; i < speeds.size(); ++i) {
    const DeviceSpeed& s = speeds[i];
    if (s.seconds_per_node > 0 || s.seconds_per_step > 0)
      a.push_back(fmt::format("{}: {:.2f} us per graph node, {:.0f} us per step ({})",
                              hw::memory_device_id(plan.devices[i].device), s.seconds_per_node * 1e6,
                              s.seconds_per_step * 1e6,
                              s.overhead_source.empty() ? "assumed" : s.overhead_source));
    if (s.description.empty() && s.flops <= 0) continue;
    a.push_back(fmt::format("{}: {:.1f} GB/s ({}), {:.2f} TFLOP/s ({}){}",
                            hw::memory_device_id(plan.devices[i].device), s.memory_bandwidth / 1e9,
                            s.bandwidth_source.empty() ? "unknown" : s.bandwidth_source, s.flops / 1e12,
                            s.flops_source.empty() ? "unknown" : s.flops_source,
                            s.description.empty() ? "" : ": " + s.description));
  }
  return out;
}

int flops_per_cycle(const std::vector<std::string>& isa) {
  if (has(isa, "avx512f")) return 64;                    // 2 FMA units x 16 fp32 lanes x 2
  if (has(isa, "avx2") && has(isa, "fma")) return 32;    // 2 x 8 x 2
  if (has(isa, "asimd") || has(isa, "neon")) return 16;  // 2 x 4 x 2
  return 8;
}

DeviceSpeed cpu_speed(const hw::CpuInfo& cpu, int threads, double ghz, double measured_bandwidth,
                      double barrier_seconds) {
  DeviceSpeed s;
  if (barrier_seconds > 0) {
    s.seconds_per_step = kHostSecondsPerStep;
    if (barrier_seconds <= kMaxPlausibleBarrierSeconds) {
      s.seconds_per_node = barrier_seconds;
      s.overhead_source = "barrier measured on this machine, step cost assumed";
    } else {
      // The threads never ran at the same time while it was timed (a busy machine): not a barrier's cost.
      s.seconds_per_node = kAssumedBarrierSeconds;
      s.overhead_source = fmt::format(
          "a barrier timed at {:.0f} us: the threads did not run at once (a busy machine), so {:.1f} us "
          "assumed; "
          "step cost assumed",
          barrier_seconds * 1e6, kAssumedBarrierSeconds * 1e6);
    }
  }
  const int fpc = flops_per_cycle(cpu.isa);
  s.flops = static_cast<double>(threads) * ghz * 1e9 * fpc;
  s.flops_source = "estimated";
  s.memory_bandwidth = measured_bandwidth;
  s.bandwidth_efficiency = kMeasuredBandwidthEfficiency;
  s.bandwidth_source = measured_bandwidth > 0 ? "measured" : "";
  s.overlap = false;
  s.cache_bytes = cpu.cache.l3_bytes.value_or(cpu.cache.l2_bytes.value_or(0));
  s.description =
      fmt::format("{} threads x {:.2f} GHz x {} fp32 FLOP/cycle from the ISA (an estimate){}", threads, ghz,
                  fpc, measured_bandwidth > 0 ? "; bandwidth from a triad on this machine" : "");
  return s;
}

DeviceSpeed gpu_speed(double bandwidth_gb_s, double fp16_tflops, const std::string& name) {
  DeviceSpeed s;
  s.flops = fp16_tflops * 1e12;
  s.memory_bandwidth = bandwidth_gb_s * 1e9;
  s.bandwidth_efficiency = kPeakBandwidthEfficiency;
  s.flops_source = "catalogue";
  s.bandwidth_source = "catalogue";
  s.description = name + " datasheet (FP16 dense)";
  s.seconds_per_node = kGpuSecondsPerNode;
  s.seconds_per_step = kHostSecondsPerStep;
  s.overhead_source = "assumed";
  return s;
}

std::optional<double> cpu_ghz(const std::string& sysroot) {
  std::ifstream in(std::filesystem::path(sysroot) / "proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    try {
      const double mhz = std::stod(line.substr(colon + 1));
      if (mhz > 0) return mhz / 1000.0;
    } catch (...) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

StorageBandwidth storage_read_bandwidth(const hw::BlockDevice& b) {
  StorageBandwidth out;
  std::string kind;
  if (b.nvme) {
    kind = "NVMe";
    out.bytes_per_s = kNvmeReadBytesPerS;
    if (b.link_bytes_per_s)
      out.bytes_per_s = std::min(out.bytes_per_s, static_cast<double>(*b.link_bytes_per_s));
  } else if (b.rotational) {
    kind = *b.rotational ? "rotational, as sysfs reports it" : "SSD";
    out.bytes_per_s = *b.rotational ? kRotationalReadBytesPerS : kSsdReadBytesPerS;
  } else {
    out.description = b.name + ": sysfs does not say whether it is rotational or NVMe";
    return out;
  }
  out.description =
      fmt::format("{} ({}{}): assumed {:.2f} GB/s sequential read (a class figure, not measured)", b.name,
                  kind, b.model ? ", " + *b.model : "", out.bytes_per_s / 1e9);
  return out;
}

double measure_memory_bandwidth(int threads, int budget_ms) {
  // One triad for the whole program: hw's (gantry detect --measure-bandwidth runs the same one), here on 4
  // KiB pages like the mmap'd weights whose reads it predicts.
  return static_cast<double>(
      hw::measure_triad_bandwidth(threads, 64ull << 20, budget_ms, /*huge_pages=*/false));
}

double measure_thread_barrier(int threads, int budget_ms) {
  if (threads <= 1) return 0;
  // ggml's barrier: an arrival counter and a phase flag, every thread spinning on the flag.
  struct alignas(64) Shared {
    std::atomic<int> arrived{0};
    std::atomic<int> phase{0};
    std::atomic<bool> stop{false};
  } sh;
  auto barrier = [&] {
    const int phase = sh.phase.load(std::memory_order_relaxed);
    if (sh.arrived.fetch_add(1, std::memory_order_acq_rel) == threads - 1) {
      sh.arrived.store(0, std::memory_order_relaxed);
      sh.phase.fetch_add(1, std::memory_order_release);
      return;
    }
    while (sh.phase.load(std::memory_order_acquire) == phase) {
      if (sh.stop.load(std::memory_order_relaxed)) return;  // the measurement is over
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
  };
  constexpr int kRounds = 16;  // barriers per sample: short, so that some sample has both threads on a core
  std::vector<std::thread> helpers;
  for (int t = 1; t < threads; ++t)
    helpers.emplace_back([&] {
      while (true) {
        barrier();
        if (sh.stop.load(std::memory_order_acquire)) return;
      }
    });
  std::vector<double> samples;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(budget_ms);
  do {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kRounds; ++i) barrier();
    samples.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kRounds);
  } while (std::chrono::steady_clock::now() < end && samples.size() < 4000);
  sh.stop.store(true, std::memory_order_release);  // a helper waiting in a barrier, or about to, leaves
  for (auto& h : helpers) h.join();
  // The best batch: what the threads cost each other when both run, not how long another process kept one
  // of them off its core.
  return *std::min_element(samples.begin(), samples.end());
}

}  // namespace gantry::plan

#include "gantry/backend/llama/cpu_model_speed.h"

#include <fmt/format.h>
#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpu.h>
#include <ggml.h>
#include <gguf.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/llama/cpu_backend.h"

namespace gantry::llama {
namespace {

using Clock = std::chrono::steady_clock;
using ContextPtr = std::unique_ptr<ggml_context, decltype(&ggml_free)>;
using BufferPtr = std::unique_ptr<ggml_backend_buffer, decltype(&ggml_backend_buffer_free)>;

ContextPtr new_context(size_t n_tensors, size_t graph_nodes = 0) {
  ggml_init_params ip{
      ggml_tensor_overhead() * n_tensors + (graph_nodes ? ggml_graph_overhead_custom(graph_nodes, false) : 0),
      nullptr, /*no_alloc=*/true};
  return ContextPtr(ggml_init(ip), ggml_free);
}

// A matrix the timed graph multiplies: a layer-0 weight (of a mixture of experts, one expert's slice) or the
// output projection (`rows` may be a slice of its rows).
struct Matrix {
  std::string name;
  ggml_type type;
  int64_t k = 0, rows = 0;
  int copies = 1;                             // experts used per token
  bool plain = false;                         // kept in a plain CPU buffer whatever the extra ones take
  ggml_backend_buffer_type_t buft = nullptr;  // where llama.cpp would place it (weight_buffer_type)
};

// At most this many products in the timed graph, whatever the file says its layers hold.
constexpr size_t kMaxMatrices = 4096;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The median of `run()`'s wall time over about `budget_ms` (at least 5 runs, after `warmups`).
template <typename Run>
double median_seconds(Run run, int budget_ms, int warmups) {
  for (int i = 0; i < warmups; ++i) run();
  std::vector<double> t;
  const auto end = Clock::now() + std::chrono::milliseconds(budget_ms);
  while (t.size() < 5 || (Clock::now() < end && t.size() < 200)) {
    const auto t0 = Clock::now();
    run();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
  return t[t.size() / 2];
}

// The buffer type llama.cpp's weight placement would give `m` on the CPU: the first extra buffer type
// (CPU_REPACK, ...) whose device takes a product with it there, else the plain CPU buffer; nullptr when the
// CPU cannot multiply it at all (then it is not timed).
ggml_backend_buffer_type_t weight_buffer_type(ggml_backend_dev_t dev,
                                              const std::vector<ggml_backend_buffer_type_t>& extras,
                                              const Matrix& m) {
  // The CPU backend says it supports a product of any type, and crashes on one without a dot product (an
  // integer "weight" in a hostile file): only types with one, in whole blocks, are timed.
  const ggml_type_traits_cpu* traits = ggml_get_type_traits_cpu(m.type);
  const int64_t block = ggml_blck_size(m.type);
  if (!traits || !traits->vec_dot || block <= 0 || m.k % block != 0 || m.rows <= 0) return nullptr;
  ContextPtr scratch = new_context(4);
  ggml_tensor* w = ggml_new_tensor_2d(scratch.get(), m.type, m.k, m.rows);
  ggml_tensor* x = ggml_new_tensor_1d(scratch.get(), GGML_TYPE_F32, m.k);
  ggml_tensor* op = ggml_mul_mat(scratch.get(), w, x);
  for (ggml_backend_buffer_type_t buft : extras) {
    if (m.plain) break;
    BufferPtr probe(ggml_backend_buft_alloc_buffer(buft, 0), ggml_backend_buffer_free);
    w->buffer = probe.get();
    const bool ok = ggml_backend_dev_supports_op(dev, op);
    w->buffer = nullptr;
    if (ok) return buft;
  }
  return ggml_backend_dev_supports_op(dev, op) ? ggml_backend_dev_buffer_type(dev) : nullptr;
}

// Anonymous memory on 4 KiB pages for the tensors of `ctx`, unmapped when it goes.
struct MappedPages {
  void* data = nullptr;
  size_t size = 0;
  MappedPages(void* d, size_t s) : data(d), size(s) {}
  MappedPages(MappedPages&& o) noexcept : data(std::exchange(o.data, nullptr)), size(o.size) {}
  MappedPages& operator=(MappedPages&& o) noexcept {
    std::swap(data, o.data);
    std::swap(size, o.size);
    return *this;
  }
  ~MappedPages() {
    if (data) munmap(data, size);
  }
};

Result<MappedPages> map_small_pages(ggml_context* ctx) {
  constexpr size_t kAlign = 64;  // ggml's CPU tensor alignment
  size_t size = kAlign;
  for (ggml_tensor* t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t))
    size += (ggml_nbytes(t) + kAlign - 1) / kAlign * kAlign;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return ResourceExhausted(fmt::format("no room for the {} MiB a speed measurement times", size >> 20));
  }
  madvise(p, size, MADV_NOHUGEPAGE);
  return MappedPages(p, size);
}

}  // namespace

Result<plan::DeviceSpeed> measure_cpu_model_speed(const std::string& gguf_path,
                                                  const plan::ModelProfile& model, const hw::CpuInfo& cpu,
                                                  double ghz, const CpuModelSpeedOptions& options) {
  // The model's tensors: names, types and shapes only (no_alloc: nothing is read but the header).
  ggml_context* meta_raw = nullptr;
  std::unique_ptr<gguf_context, decltype(&gguf_free)> gguf(
      gguf_init_from_file(gguf_path.c_str(), gguf_init_params{/*no_alloc=*/true, &meta_raw}), gguf_free);
  if (!gguf || !meta_raw) return InvalidArgument(gguf_path + ": not a readable GGUF file");
  ContextPtr meta(meta_raw, ggml_free);

  std::vector<Matrix> layer, output;
  ggml_tensor* embeddings = nullptr;
  for (ggml_tensor* t = ggml_get_first_tensor(meta.get()); t; t = ggml_get_next_tensor(meta.get(), t)) {
    const std::string_view name = ggml_get_name(t);
    if (name == "token_embd.weight") embeddings = t;
    if (ggml_n_dims(t) < 2 || ggml_n_dims(t) > 3 || !ends_with(name, ".weight")) continue;
    if (name.rfind("blk.0.", 0) == 0) {
      const bool experts = ggml_n_dims(t) == 3;  // [k, rows, n_expert]: n_expert_used of them per token
      const int64_t used = std::clamp<int64_t>(model.n_expert_used, 1, t->ne[2]);
      layer.push_back({std::string(name), t->type, t->ne[0], t->ne[1], experts ? static_cast<int>(used) : 1});
    } else if (name == "output.weight") {
      output.push_back({std::string(name), t->type, t->ne[0], t->ne[1], 1});
    }
  }
  // Tied embeddings: the output projection is the token embedding matrix, which llama.cpp places for its
  // row lookup (a plain buffer: the repacked layouts have no get_rows).
  if (output.empty() && embeddings) {
    output.push_back({"token_embd.weight", embeddings->type, embeddings->ne[0], embeddings->ne[1], 1, true});
  }

  GANTRY_ASSIGN_OR_RETURN(CpuBackend cpu_backend, start_cpu_backend(options.threads));
  ggml_backend_dev_t dev = cpu_backend.device;
  ggml_backend_t backend = cpu_backend.backend.get();
  ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
  std::vector<ggml_backend_buffer_type_t> extras;
  using GetExtras = ggml_backend_buffer_type_t* (*)(ggml_backend_dev_t);
  if (auto get = reinterpret_cast<GetExtras>(
          ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts"))) {
    for (ggml_backend_buffer_type_t* b = get(dev); b && *b; ++b) extras.push_back(*b);
  }
  auto place = [&](std::vector<Matrix>& ms) {
    for (Matrix& m : ms) m.buft = weight_buffer_type(dev, extras, m);
    std::erase_if(ms, [](const Matrix& m) { return m.buft == nullptr; });
  };
  place(layer);
  place(output);
  if (layer.empty()) return InvalidArgument(gguf_path + ": no weight matrices in its first layer to time");

  // How many layer copies and output rows fit in max_bytes.
  auto bytes_of = [](const Matrix& m) {
    return ggml_row_size(m.type, m.k) * static_cast<uint64_t>(m.rows) * m.copies;
  };
  uint64_t layer_bytes = 0;
  for (const Matrix& m : layer) layer_bytes += bytes_of(m);
  uint64_t output_bytes = 0;
  for (Matrix& m : output) {
    const uint64_t full = bytes_of(m);
    if (full > options.max_bytes / 2) {
      const int64_t rows = static_cast<int64_t>(static_cast<double>(m.rows) * (options.max_bytes / 2) / full);
      m.rows = std::max<int64_t>(64, rows / 64 * 64);  // a multiple of every repacked interleave
    }
    output_bytes += bytes_of(m);
  }
  const uint64_t room = options.max_bytes > output_bytes ? options.max_bytes - output_bytes : 0;
  const int n_layer = static_cast<int>(std::max<size_t>(1, model.layers.size()));
  size_t per_layer = 0;
  for (const Matrix& m : layer) per_layer += static_cast<size_t>(m.copies);
  const uint64_t most_copies = std::max<uint64_t>(1, (kMaxMatrices - output.size()) / per_layer);
  const int copies = static_cast<int>(std::clamp<uint64_t>(room / std::max<uint64_t>(1, layer_bytes), 1,
                                                           std::min<uint64_t>(n_layer, most_copies)));
  const size_t n_weights = output.size() + per_layer * static_cast<size_t>(copies);
  // The graph: per weight one input vector and one product.
  ContextPtr graph_ctx = new_context(2 * n_weights + 8, 2 * n_weights + 8);
  std::map<ggml_backend_buffer_type_t, ContextPtr> weight_ctx;
  ggml_cgraph* graph = ggml_new_graph_custom(graph_ctx.get(), 2 * n_weights + 8, false);
  uint64_t timed_bytes = 0;
  std::map<std::string, int> repacked;  // buffer type name -> matrices placed there (the description)
  auto add = [&](const Matrix& m) {
    // Each weight is created in the context of its buffer type.
    auto [it, fresh] = weight_ctx.try_emplace(m.buft, ContextPtr(nullptr, ggml_free));
    if (fresh) it->second = new_context(n_weights + 1);
    if (m.buft != ggml_backend_dev_buffer_type(dev)) ++repacked[ggml_backend_buft_name(m.buft)];
    ggml_tensor* w = ggml_new_tensor_2d(it->second.get(), m.type, m.k, m.rows);
    ggml_tensor* x = ggml_new_tensor_1d(graph_ctx.get(), GGML_TYPE_F32, m.k);
    ggml_build_forward_expand(graph, ggml_mul_mat(graph_ctx.get(), w, x));
    timed_bytes += ggml_nbytes(w);
  };
  for (int c = 0; c < copies; ++c)
    for (const Matrix& m : layer)
      for (int e = 0; e < m.copies; ++e) add(m);
  for (const Matrix& m : output) add(m);

  std::optional<MappedPages> mapped;  // outlives the buffer over it
  std::vector<BufferPtr> buffers;
  for (auto& [buft, ctx] : weight_ctx) {
    BufferPtr b(nullptr, ggml_backend_buffer_free);
    if (buft == ggml_backend_dev_buffer_type(dev)) {
      // llama.cpp maps these from the file (use_mmap, the default): 4 KiB page-cache pages, whose TLB misses
      // cost a DRAM-bound product several percent against the huge pages a large malloc gets.
      GANTRY_ASSIGN_OR_RETURN(mapped, map_small_pages(ctx.get()));
      b.reset(ggml_backend_dev_buffer_from_host_ptr(dev, mapped->data, mapped->size, mapped->size));
      if (b) {
        ggml_tallocr talloc = ggml_tallocr_new(b.get());
        for (ggml_tensor* t = ggml_get_first_tensor(ctx.get()); t; t = ggml_get_next_tensor(ctx.get(), t)) {
          if (ggml_tallocr_alloc(&talloc, t) != GGML_STATUS_SUCCESS)
            return Internal("speed measurement: allocation failed");
        }
      }
    } else {
      b.reset(ggml_backend_alloc_ctx_tensors_from_buft(ctx.get(), buft));
    }
    if (!b) {
      return ResourceExhausted(fmt::format("no room for the {} MiB of {}'s weights a speed measurement times",
                                           timed_bytes >> 20, gguf_path));
    }
    ggml_backend_buffer_clear(b.get(), 0);
    buffers.push_back(std::move(b));
  }
  BufferPtr io(ggml_backend_alloc_ctx_tensors(graph_ctx.get(), backend), ggml_backend_buffer_free);
  if (!io) return ResourceExhausted("no room for a speed measurement's vectors");
  ggml_backend_buffer_clear(io.get(), 0);

  bool failed = false;
  auto compute = [&] { failed |= ggml_backend_graph_compute(backend, graph) != GGML_STATUS_SUCCESS; };
  const double matrices_s = median_seconds(compute, options.budget_ms, 2);
  if (failed) return Internal("the CPU speed measurement's graph failed");

  // A decoding graph's other nodes: norms, element-wise products, additions on n_embd floats, each ending
  // in a barrier across the threads (llama.cpp reuses the graph between steps, so building it is not timed).
  constexpr int kChain = 192;
  const int64_t width = model.n_embd > 0 ? model.n_embd : 4096;
  ContextPtr chain_ctx = new_context(kChain + 4, kChain + 4);
  ggml_tensor* a = ggml_new_tensor_1d(chain_ctx.get(), GGML_TYPE_F32, width);
  ggml_tensor* cur = a;
  for (int i = 0; i < kChain; ++i) {
    cur = i % 3 == 0   ? ggml_rms_norm(chain_ctx.get(), cur, 1e-5f)
          : i % 3 == 1 ? ggml_mul(chain_ctx.get(), cur, a)
                       : ggml_add(chain_ctx.get(), cur, a);
  }
  ggml_cgraph* chain = ggml_new_graph_custom(chain_ctx.get(), kChain + 4, false);
  ggml_build_forward_expand(chain, cur);
  BufferPtr chain_buf(ggml_backend_alloc_ctx_tensors(chain_ctx.get(), backend), ggml_backend_buffer_free);
  if (!chain_buf) return ResourceExhausted("no room for a speed measurement's vectors");
  ggml_backend_buffer_clear(chain_buf.get(), 0);
  auto compute_chain = [&] { failed |= ggml_backend_graph_compute(backend, chain) != GGML_STATUS_SUCCESS; };
  const double chain_s = median_seconds(compute_chain, std::max(10, options.budget_ms / 10), 3);
  if (failed) return Internal("the CPU speed measurement's node chain failed");

  plan::DeviceSpeed s = plan::cpu_speed(cpu, options.threads, ghz, 0);
  s.memory_bandwidth = static_cast<double>(timed_bytes) / matrices_s;
  s.bandwidth_efficiency = 1.0;
  s.bandwidth_source = "measured";
  s.overlap = true;
  s.seconds_per_node = chain_s / kChain;
  s.seconds_per_step = plan::kCpuHostSecondsPerStep;
  s.overhead_source = "node cost timed on this machine, step cost assumed";
  std::string placed;
  for (const auto& [name, n] : repacked) placed += fmt::format(", {} of them in {}", n, name);
  s.description = fmt::format(
      "{}; generation timed on this model's matrices: {} copies of layer 0{} ({} matrices{}, {:.1f} MiB) x a "
      "vector in {:.3f} ms with {} thread(s); a graph node {:.2f} us",
      s.description.substr(0, s.description.find(';')), copies,
      output.empty() ? "" : " and the output projection", n_weights, placed,
      static_cast<double>(timed_bytes) / (1 << 20), matrices_s * 1e3, options.threads,
      s.seconds_per_node * 1e6);
  return s;
}

}  // namespace gantry::llama

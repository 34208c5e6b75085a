#include "gantry/backend/llama/remote_speed.h"

#include <fmt/format.h>
#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <memory>

#include "backend/llama/cpu_backend.h"
#include "gantry/backend/llama/remote_devices.h"

namespace gantry::llama {
namespace {

ggml_type type_named(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
    const char* n = ggml_type_name(static_cast<ggml_type>(t));
    if (n && name == n && ggml_blck_size(static_cast<ggml_type>(t)) > 0) return static_cast<ggml_type>(t);
  }
  return GGML_TYPE_Q8_0;
}

// Times `graph`'s product on `backend` (its tensors already allocated and zeroed): the best of three after a
// warm-up, each read back (for RPC: one round trip, subtracted). `what` names the device in errors.
Result<double> time_product(ggml_backend_t backend, ggml_cgraph* graph, ggml_tensor* y, double round_trip_s,
                            const std::string& what) {
  float out = 0;
  double best = 1e30;
  for (int i = 0; i < 4; ++i) {  // the first one warms up (and, through RPC, sends the graph)
    const auto t0 = std::chrono::steady_clock::now();
    if (ggml_backend_graph_compute(backend, graph) != GGML_STATUS_SUCCESS) {
      return Internal(what + ": the speed measurement's graph failed");
    }
    ggml_backend_tensor_get(y, &out, 0, sizeof out);  // waits for the computation
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0) best = std::min(best, t);
  }
  return std::max(best - round_trip_s, 1e-6);
}

// The matrix x vector product on `backend`: ~64 MiB of weights of `type`.
Result<plan::DeviceSpeed> measure_product(ggml_backend_t backend, ggml_type type, double round_trip_s,
                                          const std::string& what, const std::string& how) {
  const int64_t k = 8192;  // a multiple of every block size (32, 256)
  const int64_t rows = std::max<int64_t>(256, (64ll << 20) / static_cast<int64_t>(ggml_row_size(type, k)));
  ggml_init_params ip{ggml_tensor_overhead() * 8 + ggml_graph_overhead(), nullptr, /*no_alloc=*/true};
  std::unique_ptr<ggml_context, decltype(&ggml_free)> ctx(ggml_init(ip), ggml_free);
  ggml_tensor* w = ggml_new_tensor_2d(ctx.get(), type, k, rows);
  ggml_tensor* x = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, k);
  ggml_tensor* y = ggml_mul_mat(ctx.get(), w, x);
  ggml_cgraph* graph = ggml_new_graph(ctx.get());
  ggml_build_forward_expand(graph, y);
  std::unique_ptr<ggml_backend_buffer, decltype(&ggml_backend_buffer_free)> buffer(
      ggml_backend_alloc_ctx_tensors(ctx.get(), backend), ggml_backend_buffer_free);
  if (!buffer) {
    return ResourceExhausted(
        fmt::format("{}: no room for the {} MiB a speed measurement needs", what, ggml_nbytes(w) >> 20));
  }
  ggml_backend_buffer_clear(buffer.get(), 0);  // zeros: valid blocks of any type, nothing sent over the wire
  GANTRY_ASSIGN_OR_RETURN(double compute, time_product(backend, graph, y, round_trip_s, what));
  plan::DeviceSpeed s;
  s.memory_bandwidth = static_cast<double>(ggml_nbytes(w)) / compute;
  s.bandwidth_efficiency = 1.0;
  s.flops = 2.0 * static_cast<double>(k) * static_cast<double>(rows) / compute;
  s.compute_efficiency = 1.0;
  s.overlap = true;
  s.bandwidth_source = "measured";
  s.flops_source = "measured";
  s.description = fmt::format("timed {}: a {} MiB {} matrix x vector product in {:.2f} ms", how,
                              ggml_nbytes(w) >> 20, ggml_type_name(type), compute * 1e3);
  return s;
}

}  // namespace

Result<plan::DeviceSpeed> measure_remote_speed(const hw::RpcEndpoint& server, int device_index,
                                               const std::string& weight_type, double round_trip_s) {
  GANTRY_ASSIGN_OR_RETURN(RemoteDevices remote, resolve_remote_devices({server}));
  if (device_index < 0 || static_cast<size_t>(device_index) >= remote.devices.size()) {
    return NotFound(fmt::format("RPC server {} has no device {}", server.text(), device_index));
  }
  ggml_backend_dev_t dev = remote.devices[static_cast<size_t>(device_index)];
  std::unique_ptr<ggml_backend, decltype(&ggml_backend_free)> backend(ggml_backend_dev_init(dev, nullptr),
                                                                      ggml_backend_free);
  if (!backend) return Unavailable(fmt::format("RPC server {}: cannot start its device", server.text()));
  auto s = measure_product(backend.get(), type_named(weight_type), round_trip_s,
                           "RPC server " + server.text(), "through RPC");
  GANTRY_RETURN_IF_ERROR(remote.check());
  return s;
}

Result<plan::DeviceSpeed> measure_cpu_speed(int threads, const std::string& weight_type) {
  GANTRY_ASSIGN_OR_RETURN(CpuBackend cpu, start_cpu_backend(threads));
  return measure_product(cpu.backend.get(), type_named(weight_type), 0, "this CPU",
                         fmt::format("on this CPU with {} thread(s), as the remote devices are", threads));
}

}  // namespace gantry::llama

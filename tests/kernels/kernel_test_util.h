// Shared by the kernel executor's tests: the test kernels in tests/kernels/data, a compile cache shared by
// the test processes (so each kernel is compiled once per build tree, not once per test), references.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gantry/core/file_io.h"
#include "gantry/kernels/executor.h"

namespace gantry::kernels::test {

inline std::filesystem::path data_dir() {
  return std::filesystem::path(GANTRY_SOURCE_DIR) / "tests/kernels/data";
}

inline std::string kernel_source(const std::string& file) {
  auto text = read_file(data_dir() / file);
  EXPECT_TRUE(text.ok()) << text.status().to_string();
  return text.ok() ? *text : std::string();
}

// Tests that do not test the cache itself share this one; entries are written atomically, so test
// processes running side by side may share it.
inline std::filesystem::path shared_cache_dir() {
  return std::filesystem::path(GANTRY_BINARY_DIR) / "test-kernel-cache";
}

inline std::vector<float> random_values(size_t n, unsigned seed, float lo = -2.f, float hi = 2.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline std::vector<float> softmax_reference(const std::vector<float>& x, int rows, int cols) {
  std::vector<float> y(x.size());
  for (int r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int c = 0; c < cols; ++c) m = std::max<double>(m, x[r * cols + c]);
    for (int c = 0; c < cols; ++c) s += std::exp(x[r * cols + c] - m);
    for (int c = 0; c < cols; ++c) y[r * cols + c] = static_cast<float>(std::exp(x[r * cols + c] - m) / s);
  }
  return y;
}

inline std::vector<float> matmul_reference(const std::vector<float>& a, const std::vector<float>& b, int m,
                                           int n, int k) {
  std::vector<float> c(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int t = 0; t < k; ++t) acc += double(a[i * k + t]) * b[t * n + j];
      c[i * n + j] = static_cast<float>(acc);
    }
  return c;
}

inline void expect_near_all(std::span<const float> got, const std::vector<float>& want, float tol,
                            const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tol * (1.f + std::fabs(want[i])))) {
      if (bad++ < 5) ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", want " << want[i];
    }
  EXPECT_EQ(bad, 0u) << what;
}

// Runs the four test kernels on `device` (tensors made with the executor's allocate) and checks them
// against the references above.
inline void run_reference_suite(KernelExecutor& ex, const std::string& device, const std::string& ext) {
  KernelOptions opts;
  auto to_dev = [&](const std::vector<float>& v, Shape shape) {
    auto host = Tensor::from_values(DType::kFloat32, shape, v);
    EXPECT_TRUE(host.ok());
    auto dev = ex.allocate(device, DType::kFloat32, shape);
    EXPECT_TRUE(dev.ok()) << dev.status().to_string();
    EXPECT_TRUE(ex.copy_to_device(*host, *dev).ok());
    return *dev;
  };
  auto back = [&](ConstTensorView t) {
    EXPECT_TRUE(ex.synchronize(device).ok());
    auto h = ex.copy_to_host(t);
    EXPECT_TRUE(h.ok()) << h.status().to_string();
    return std::vector<float>(h->values<float>().begin(), h->values<float>().end());
  };
  auto load = [&](const std::string& name, const std::string& entry) {
    opts.source_name = name + ext;
    auto h = ex.load(kernel_source(name + ext), entry, device, opts);
    EXPECT_TRUE(h.ok()) << h.status().to_string();
    return h.ok() ? *h : KernelHandle{};
  };

  {  // vector add, n not a multiple of the block
    const int n = 1000;
    auto a = random_values(n, 1), b = random_values(n, 2);
    std::vector<float> want(n);
    for (int i = 0; i < n; ++i) want[i] = a[i] + b[i];
    TensorView ta = to_dev(a, {n}), tb = to_dev(b, {n}), tc = to_dev(std::vector<float>(n, -1.f), {n});
    const KernelArg args[] = {KernelArg::tensor(ta), KernelArg::tensor(tb), KernelArg::tensor(tc),
                              KernelArg::i32(n)};
    ASSERT_TRUE(ex.launch(load("vector_add", "vector_add"), args, {(n + 127) / 128}, {128}).ok());
    expect_near_all(back(tc), want, 0, "vector_add on " + device);
  }
  {  // SAXPY with a 64-bit n
    const int n = 4099;
    auto x = random_values(n, 3), y = random_values(n, 4);
    std::vector<float> want(n);
    for (int i = 0; i < n; ++i) want[i] = 1.5f * x[i] + y[i];
    TensorView tx = to_dev(x, {n}), ty = to_dev(y, {n});
    const KernelArg args[] = {KernelArg::f32(1.5f), KernelArg::tensor(tx), KernelArg::tensor(ty),
                              KernelArg::i64(n)};
    ASSERT_TRUE(ex.launch(load("saxpy", "saxpy"), args, {(n + 255) / 256}, {256}).ok());
    expect_near_all(back(ty), want, 1e-6f, "saxpy on " + device);
  }
  {  // row softmax: one block per row, the reduction in local memory
    const int rows = 37, cols = 300;
    auto x = random_values(rows * cols, 5, -8.f, 8.f);
    TensorView tx = to_dev(x, {rows, cols}), ty = to_dev(std::vector<float>(rows * cols), {rows, cols});
    const uint32_t threads = 64;
    const KernelArg args[] = {KernelArg::tensor(tx), KernelArg::tensor(ty), KernelArg::i32(rows),
                              KernelArg::i32(cols), KernelArg::local_memory(threads * sizeof(float))};
    ASSERT_TRUE(ex.launch(load("softmax", "softmax_rows"), args, {rows}, {threads}).ok());
    expect_near_all(back(ty), softmax_reference(x, rows, cols), 1e-5f, "softmax on " + device);
  }
  {  // tiled matmul with sizes that are not multiples of the tile
    const int m = 45, n = 70, k = 33;
    auto a = random_values(m * k, 6), b = random_values(k * n, 7);
    TensorView ta = to_dev(a, {m, k}), tb = to_dev(b, {k, n}), tc = to_dev(std::vector<float>(m * n), {m, n});
    const KernelArg args[] = {KernelArg::tensor(ta), KernelArg::tensor(tb), KernelArg::tensor(tc),
                              KernelArg::i32(m),     KernelArg::i32(n),     KernelArg::i32(k)};
    ASSERT_TRUE(
        ex.launch(load("matmul", "matmul_tiled"), args, {(n + 15) / 16, (m + 15) / 16}, {16, 16}).ok());
    expect_near_all(back(tc), matmul_reference(a, b, m, n, k), 1e-4f, "matmul on " + device);
  }
}

}  // namespace gantry::kernels::test

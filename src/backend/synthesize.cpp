#include "gantry/backend/synthesize.h"

#include <algorithm>
#include <chrono>

namespace gantry::backend {

Result<std::vector<NamedTensor>> synthesize_inputs(const ModelMetadata& metadata,
                                                   const model::SessionBucket* bucket) {
  std::vector<NamedTensor> out;
  for (const auto& in : metadata.inputs) {
    std::vector<int64_t> dims = in.shape.dims();
    if (bucket)
      if (auto it = bucket->find(in.name); it != bucket->end()) dims = it->second.dims();
    for (auto& d : dims)
      if (d == Shape::kDynamic) d = 1;
    Shape shape(dims);
    NamedTensor t;
    t.name = in.name;
    if (in.dtype == DType::kString) {
      GANTRY_ASSIGN_OR_RETURN(
          t.tensor, Tensor::from_strings(shape, std::vector<std::string>(shape.element_count().value_or(0))));
    } else {
      auto a = Tensor::allocate(in.dtype, shape);
      if (!a.ok()) return a.status().with_context("synthesising input '" + in.name + "'");
      t.tensor = std::move(a).value();
    }
    out.push_back(std::move(t));
  }
  return out;
}

Result<double> time_inferences(Model& model, std::span<const NamedTensor> inputs, double budget_ms,
                               int warmup, int min_runs, int max_runs) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < warmup; ++i) {
    auto r = model.infer_one(inputs);
    if (!r.ok()) return r.status().with_context("warm-up inference");
  }
  std::vector<double> us;
  const auto start = clock::now();
  while (static_cast<int>(us.size()) < max_runs) {
    const auto t0 = clock::now();
    auto r = model.infer_one(inputs);
    const auto t1 = clock::now();
    if (!r.ok()) return r.status().with_context("timed inference");
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    const double spent_ms = std::chrono::duration<double, std::milli>(t1 - start).count();
    if (static_cast<int>(us.size()) >= min_runs && spent_ms >= budget_ms) break;
  }
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return us[us.size() / 2];
}

}  // namespace gantry::backend

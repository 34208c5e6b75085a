#include "gantry/runtime/onnx_measure.h"

#include <fmt/format.h>
#include <malloc.h>
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GANTRY_ASAN_ALLOCATOR 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(GANTRY_ASAN_ALLOCATOR)
// The sanitizer runtime's allocator statistics (sanitizer/allocator_interface.h, which GCC does not ship).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

#include <algorithm>
#include <charconv>

#include "gantry/backend/factory.h"
#include "gantry/backend/onnx/onnx_backend.h"
#include "gantry/backend/synthesize.h"
#include "gantry/core/log.h"
#include "gantry/model/onnx_info.h"
#include "gantry/runtime/runtime.h"

namespace gantry::runtime {

namespace {

// The symbolic name of the batch: the first input's leading dim's name ("" when unnamed or static).
std::string batch_symbol(const std::vector<backend::TensorInfo>& inputs) {
  if (inputs.empty() || inputs[0].shape.rank() == 0 || inputs[0].shape[0] != Shape::kDynamic) return {};
  return inputs[0].dim_names.empty() ? std::string() : inputs[0].dim_names[0];
}

bool is_batch_dim(const backend::TensorInfo& in, size_t d, const std::string& symbol, bool batch_dynamic) {
  if (!batch_dynamic || in.shape[d] != Shape::kDynamic) return false;
  const std::string name = d < in.dim_names.size() ? in.dim_names[d] : std::string();
  if (!symbol.empty()) return name == symbol;
  return d == 0 && name.empty();
}

std::string join_dims(const std::vector<std::string>& dims) {
  std::string s;
  for (const auto& d : dims) s += (s.empty() ? "" : ",") + d;
  return s;
}

}  // namespace

Status parse_input_shape(std::string_view text, InputShapes& shapes) {
  const auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size())
    return InvalidArgument("--shape '" + std::string(text) + "' is not NAME=D0,D1,... (e.g. x=1,3,640,640)");
  const std::string name(text.substr(0, eq));
  std::vector<int64_t> dims;
  std::string_view rest = text.substr(eq + 1);
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || ptr != item.data() + item.size() || v < 1 || v > (int64_t{1} << 31))
      return InvalidArgument("--shape " + name + ": '" + std::string(item) +
                             "' is not a dimension (a whole number from 1 to 2^31)");
    dims.push_back(v);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (dims.size() > 16) return InvalidArgument("--shape " + name + " has more than 16 dimensions");
  if (shapes.count(name)) return InvalidArgument("--shape " + name + " is given twice");
  shapes[name] = std::move(dims);
  return Status::Ok();
}

Result<InputLayout> input_layout(const std::vector<backend::TensorInfo>& inputs, const InputShapes& shapes) {
  for (const auto& entry : shapes) {
    // Not a structured binding: clang 14 (the fuzz preset) refuses a lambda capture of one.
    const std::string& name = entry.first;
    const bool known =
        std::any_of(inputs.begin(), inputs.end(), [&](const auto& i) { return i.name == name; });
    if (!known) {
      std::string have;
      for (const auto& i : inputs) have += (have.empty() ? "" : ", ") + i.name;
      return InvalidArgument("--shape names input '" + name + "', which the model does not have (" + have +
                             ")");
    }
  }
  InputLayout layout;
  const std::string symbol = batch_symbol(inputs);
  layout.batch_dynamic =
      !inputs.empty() && inputs[0].shape.rank() > 0 && inputs[0].shape[0] == Shape::kDynamic;
  if (!inputs.empty() && inputs[0].shape.rank() > 0 && !layout.batch_dynamic)
    layout.fixed_batch = inputs[0].shape[0];
  for (const auto& in : inputs) {
    const auto given = shapes.find(in.name);
    if (given != shapes.end() && given->second.size() != in.shape.rank())
      return InvalidArgument(fmt::format("--shape {} has {} dimensions; the model's input is {} ({})",
                                         in.name, given->second.size(), in.shape.to_string(),
                                         in.shape.rank()));
    std::vector<std::string> dims;
    for (size_t d = 0; d < in.shape.rank(); ++d) {
      if (is_batch_dim(in, d, symbol, layout.batch_dynamic)) {
        dims.push_back("N");
        continue;
      }
      int64_t v = in.shape[d];
      if (given != shapes.end()) {
        if (v != Shape::kDynamic && given->second[d] != v)
          return InvalidArgument(fmt::format("--shape {}: dimension {} is {} in the model, not {}", in.name,
                                             d, v, given->second[d]));
        v = given->second[d];
      } else if (v == Shape::kDynamic) {
        v = 1;
        layout.defaulted.push_back(fmt::format("{}[{}]", in.name, d));
      }
      dims.push_back(std::to_string(v));
    }
    layout.signature += (layout.signature.empty() ? "" : ";") + in.name + "=" + join_dims(dims);
  }
  return layout;
}

Result<model::SessionBucket> inputs_at_batch(const std::vector<backend::TensorInfo>& inputs,
                                             const InputShapes& shapes, int64_t batch) {
  GANTRY_ASSIGN_OR_RETURN(InputLayout layout, input_layout(inputs, shapes));
  if (!layout.batch_dynamic && batch != layout.fixed_batch)
    return InvalidArgument(fmt::format("the model's batch is fixed at {}; it cannot run at batch {}",
                                       layout.fixed_batch, batch));
  const std::string symbol = batch_symbol(inputs);
  model::SessionBucket bucket;
  for (const auto& in : inputs) {
    const auto given = shapes.find(in.name);
    std::vector<int64_t> dims;
    for (size_t d = 0; d < in.shape.rank(); ++d) {
      if (is_batch_dim(in, d, symbol, layout.batch_dynamic))
        dims.push_back(batch);
      else if (given != shapes.end())
        dims.push_back(given->second[d]);
      else
        dims.push_back(in.shape[d] == Shape::kDynamic ? 1 : in.shape[d]);
    }
    bucket[in.name] = Shape(std::move(dims));
  }
  return bucket;
}

namespace {

std::vector<backend::TensorInfo> declared_inputs(const model::OnnxModelInfo& info) {
  std::vector<backend::TensorInfo> out;
  for (const auto& v : info.inputs) {
    backend::TensorInfo t;
    t.name = v.name;
    t.dtype = v.dtype.value_or(DType::kFloat32);
    t.shape = v.shape.value_or(Shape());
    t.dim_names = v.dim_names;
    out.push_back(std::move(t));
  }
  return out;
}

// Bytes malloc has handed out and not taken back, every arena (glibc's counters; under AddressSanitizer,
// whose allocator replaces glibc's and leaves mallinfo2 empty, the sanitizer's own count).
uint64_t heap_in_use() {
#if defined(__SANITIZE_ADDRESS__) || defined(GANTRY_ASAN_ALLOCATOR)
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
#endif
}

void add_note(std::vector<std::string>& notes, std::string note) {
  if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(std::move(note));
}

// One point: a Runtime of its own (fresh pools), load, run once at `batch`, read every pool. `device` is
// where the provider runs the model ("cpu", "cuda:0").
Result<plan::OnnxMemoryPoint> measure_point(const std::string& source, const OnnxMeasureOptions& options,
                                            const hw::Registry& machine, int64_t batch,
                                            const std::string& device, std::vector<std::string>& notes) {
  RuntimeOptions ro;
  ro.hardware = machine;
  ro.memory_budget = options.memory_budget;
  ro.verdict_cache_dir = "none";  // reserve by the rule of thumb: this is what makes the profile
  ro.keep_alive_timer = false;
  GANTRY_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::create(std::move(ro)));
  // The CPU's pool and each accelerator's (CUDA devices get one, made on first use).
  std::vector<std::pair<std::string, memory::BlockPool*>> pools;
  for (const auto& b : rt->budgets())
    if (memory::BlockPool* p = rt->pool(b.device)) pools.emplace_back(b.device, p);
  if (pools.empty() || pools.front().first != "cpu")
    return Internal("the runtime has no CPU memory pool to measure with");
  LoadOptions lo;
  lo.factory = options.factory;
  const uint64_t heap_before = heap_in_use();
  GANTRY_ASSIGN_OR_RETURN(ModelHandle h, rt->load(source, lo));
  std::vector<memory::PoolStats> loaded, ran;
  for (const auto& [id, pool] : pools) loaded.push_back(pool->stats());
  const uint64_t heap_after = heap_in_use();
  GANTRY_ASSIGN_OR_RETURN(model::SessionBucket shapes,
                          inputs_at_batch(h->metadata().inputs, options.shapes, batch));
  GANTRY_ASSIGN_OR_RETURN(std::vector<backend::NamedTensor> inputs,
                          backend::synthesize_inputs(h->metadata(), &shapes));
  for (const auto& [id, pool] : pools) pool->reset_peaks();
  {
    auto out = h->infer_one(inputs);
    if (!out.ok())
      return out.status().with_context(fmt::format("running {} once at batch {}", source, batch));
    for (const auto& [id, pool] : pools)
      ran.push_back(pool->stats());  // the outputs are still held: they count
  }
  plan::OnnxMemoryPoint point;
  point.batch = batch;
  for (size_t i = 0; i < pools.size(); ++i) {
    const std::string& id = pools[i].first;
    const memory::PoolStats& l = loaded[i];
    const memory::PoolStats& r = ran[i];
    if (id != "cpu" && id != device && l.peak_reserved == 0 && r.peak_reserved == 0) continue;  // unused
    plan::OnnxMemoryBytes b;
    b.weights = l.bytes_in_use;
    b.load_peak = l.peak_in_use;
    b.activations = r.peak_in_use > l.bytes_in_use ? r.peak_in_use - l.bytes_in_use : 0;
    const uint64_t reserved = std::max(l.peak_reserved, r.peak_reserved);
    const uint64_t in_use = std::max(l.peak_in_use, r.peak_in_use);
    b.arena = reserved > in_use ? reserved - in_use : 0;
    if (id == "cpu") b.outside_pool = heap_after > heap_before ? heap_after - heap_before : 0;
    point.devices[id] = b;
  }
  if (device != "cpu" && !point.devices.count(device))
    add_note(notes, device + " has no Gantry memory pool here: only host (cpu) memory was measured");
  else if (device.rfind("cuda:", 0) == 0)
    add_note(notes,
             device +
                 ": the CUDA context and the EP's cuBLAS/cuDNN workspaces are outside the pool and not "
                 "measured; the runtime adds its allowance for them to the reservation");
  return point;
}

}  // namespace

Result<OnnxMeasureReport> measure_onnx_memory(const std::string& source, const OnnxMeasureOptions& options,
                                              bool measure) {
  const hw::Registry machine = options.hardware ? *options.hardware : backend::local_machine();
  GANTRY_ASSIGN_OR_RETURN(model::Package package, model::load_package(source));
  if (package.manifest().format != model::ModelFormat::kOnnx)
    return InvalidArgument(source + " is not an ONNX model: only ONNX models are measured this way");
  // The provider as Runtime::load would choose it: the profile's key.
  RuntimeOptions ro;
  ro.hardware = machine;
  ro.memory_pool = false;
  ro.verdict_cache_dir = "none";
  ro.keep_alive_timer = false;
  GANTRY_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::create(std::move(ro)));
  GANTRY_ASSIGN_OR_RETURN(backend::Backend * be, rt->backend_for(model::ModelFormat::kOnnx));
  const backend::ProviderChoice choice = backend::choose_provider(*be, package, machine, options.factory);
  const backend::CandidateVerdict* chosen = choice.chosen_verdict();
  if (!chosen) return Unavailable("no provider can run " + source + ":\n" + choice.explain());

  OnnxMeasureReport report;
  report.backend = std::string(be->name()) + " " + be->version();
  report.device = backend::device_label(machine, chosen->family, chosen->device_ids);
  const std::string model_device =
      hw::memory_device_id(chosen->family, chosen->device_ids.empty() ? 0 : chosen->device_ids.front());
  const std::string key =
      plan::onnx_profile_key(package.model_sha256(), report.device, chosen->provider, be->version());
  GANTRY_ASSIGN_OR_RETURN(model::OnnxModelInfo info, model::read_onnx_info(package.model_path()));
  GANTRY_ASSIGN_OR_RETURN(InputLayout layout, input_layout(declared_inputs(info), options.shapes));
  if (!layout.defaulted.empty()) {
    std::string dims;
    for (const auto& d : layout.defaulted) dims += (dims.empty() ? "" : ", ") + d;
    report.notes.push_back("dynamic dims " + dims +
                           " were set to 1: give --shape NAME=D0,D1,... for real sizes");
  }

  std::optional<plan::OnnxProfileCache> cache;
  if (options.cache_dir != "none")
    cache.emplace(options.cache_dir.empty() ? backend::VerdictCache::default_dir() : options.cache_dir);
  plan::OnnxMemoryProfile profile;
  if (cache) {
    report.cache_file = cache->path_for(key);
    if (auto cached = cache->get(key); cached && cached->shapes == layout.signature)
      profile = std::move(*cached);
    else if (cached)
      report.notes.push_back("the cached profile was measured at " + cached->shapes + ", not " +
                             layout.signature + (measure ? ": measured again" : ""));
  }
  profile.key = key;
  profile.model = package.model_path().filename().string();
  profile.provider = chosen->provider;
  profile.shapes = layout.signature;
  profile.batch_dynamic = layout.batch_dynamic;
  if (!measure) {
    report.profile = std::move(profile);
    return report;
  }

  std::vector<int64_t> wanted = plan::base_batches(layout.batch_dynamic, layout.fixed_batch);
  for (int64_t b : options.batches) {
    if (!layout.batch_dynamic && b != layout.fixed_batch)
      return InvalidArgument(fmt::format("{} has a fixed batch of {}; --batch {} cannot run", profile.model,
                                         layout.fixed_batch, b));
    if (std::find(wanted.begin(), wanted.end(), b) == wanted.end()) wanted.push_back(b);
  }
  bool warm = false;
  for (int64_t b : wanted) {
    if (profile.at(b)) {
      report.cached.push_back(b);
      continue;
    }
    if (!warm) {
      // ONNX Runtime sets itself up on its first session (kernel registries, ...): once per process, not per
      // model. A throwaway load keeps that out of the first point's heap figure.
      LoadOptions lo;
      lo.factory = options.factory;
      GANTRY_ASSIGN_OR_RETURN(ModelHandle h, rt->load(source, lo));
      const std::string name = h.name();
      h = ModelHandle();
      (void)rt->unload(name);
      warm = true;
    }
    GANTRY_LOG_DEBUG("measuring {} at batch {}", source, b);
    GANTRY_ASSIGN_OR_RETURN(plan::OnnxMemoryPoint point,
                            measure_point(source, options, machine, b, model_device, report.notes));
    profile.put(std::move(point));
    report.measured.push_back(b);
  }
  if (cache && !report.measured.empty()) {
    if (Status s = cache->put(profile); !s.ok()) {
      report.notes.push_back("the profile was not cached: " + s.message());
      report.cache_file.clear();
    }
  }
  report.profile = std::move(profile);
  return report;
}

std::optional<backend::MemoryEstimate> profile_reservation(const std::string& cache_dir,
                                                           const hw::Registry& machine,
                                                           const model::Package& package,
                                                           const backend::Placement& placement,
                                                           const backend::Backend& backend) {
  if (package.manifest().format != model::ModelFormat::kOnnx || cache_dir.empty()) return std::nullopt;
  const std::string device =
      backend::device_label(machine, backend.provider_family(placement.provider), placement.device_ids);
  const std::string key =
      plan::onnx_profile_key(package.model_sha256(), device, placement.provider, backend.version());
  const plan::OnnxProfileCache cache(cache_dir);
  const auto profile = cache.get(key);
  if (!profile || profile->points.empty()) return std::nullopt;
  int64_t batch = profile->points.front().batch;  // a fixed batch's only point
  if (profile->batch_dynamic) {
    const auto& db = package.manifest().dynamic_batching;
    batch = db && db->max_batch_size ? *db->max_batch_size : 1;
  }
  auto p = plan::predict(*profile, batch);
  if (!p.ok()) {
    GANTRY_LOG_DEBUG("memory profile {} not used: {}", cache.path_for(key), p.status().message());
    return std::nullopt;
  }
  backend::MemoryEstimate e;
  for (const auto& [id, b] : p->devices) e.bytes[id] = b.reservation();
  std::string extra;
  const std::string_view family = backend.provider_family(placement.provider);
  if (family == hw::kFamilyCuda) {
    // What the CUDA EP allocates outside the pool, as OnnxBackend::estimate_memory allows for it.
    e.bytes[hw::memory_device_id(family, placement.primary_device())] += onnx::kCudaEpUnpooledBytes;
    extra = "; + 64 MiB for the CUDA EP's workspaces outside the pool";
  }
  e.exact = p->measured;
  e.basis = fmt::format("memory profile {} at batch {}, {} ({}){}", profile->model, batch, p->basis,
                        cache.path_for(key), extra);
  return e;
}

}  // namespace gantry::runtime

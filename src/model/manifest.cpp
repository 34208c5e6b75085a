#include "gantry/model/manifest.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "gantry/core/enum_names.h"
#include "gantry/core/file_io.h"
#include "gantry/core/json.h"
#include "gantry/core/json_reader.h"

namespace gantry::model {
namespace {

// Reading uses nlohmann::json (a std::map per object: logarithmic inserts); ordered_json's linear-search
// inserts made a manifest with 160k keys take 22 s. Writing keeps ordered_json for a stable field order.
using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

constexpr auto kFormats =
    enum_names<ModelFormat>("model format", {{ModelFormat::kOnnx, "onnx"}, {ModelFormat::kGguf, "gguf"}});

constexpr auto kStrategies =
    enum_names<Strategy>("strategy", {
                                         {Strategy::kPool, "pool"},
                                         {Strategy::kRoundRobin, "round-robin"},
                                         {Strategy::kDataParallel, "data-parallel"},
                                         {Strategy::kPipeline, "pipeline"},
                                         {Strategy::kTensorParallel, "tensor-parallel"},
                                         {Strategy::kAuto, "auto"},
                                         // kapsl's spelling of the same strategy (written back as "pipeline")
                                         {Strategy::kPipeline, "pipeline-parallel"},
                                     });

constexpr auto kPrecisions = enum_names<Precision>("precision", {
                                                                    {Precision::kFp32, "fp32"},
                                                                    {Precision::kFp16, "fp16"},
                                                                    {Precision::kBf16, "bf16"},
                                                                    {Precision::kFp64, "fp64"},
                                                                    {Precision::kInt8, "int8"},
                                                                    {Precision::kInt4, "int4"},
                                                                    {Precision::kFp32, "f32"},
                                                                    {Precision::kFp32, "float32"},
                                                                    {Precision::kFp16, "f16"},
                                                                    {Precision::kFp16, "float16"},
                                                                    {Precision::kBf16, "bfloat16"},
                                                                    {Precision::kFp64, "f64"},
                                                                    {Precision::kFp64, "float64"},
                                                                    {Precision::kInt8, "i8"},
                                                                    {Precision::kInt4, "i4"},
                                                                });

// Walks the JSON and returns the first error; every error names the field by its dotted path. Members and
// values are read by the one strict reader (gantry/core/json_reader.h): an absent or null member is "not
// given", a value of the wrong type or out of range is refused in its words ("must be an integer in 0..4096,
// got -2").
class Reader {
 public:
  explicit Reader(std::string_view origin) : origin_(origin) {}

  Status fail(const std::string& field, const std::string& what) const {
    return InvalidArgument(origin_ + ": " + (field.empty() ? std::string() : field + ": ") + what);
  }
  Status check(const JsonFieldCheck& c) const { return c ? fail(c->field, c->problem) : Status::Ok(); }

  static std::string join(const std::string& parent, const std::string& key) {
    return parent.empty() ? key : parent + "." + key;
  }
  // The json_reader path of `parent`'s members: "" at the root, "parent." below it.
  static std::string under(const std::string& parent) { return parent.empty() ? parent : parent + "."; }

  static std::string type_of(const Json& j) { return j.type_name(); }

  Status check_object(const Json& j, const std::string& field,
                      std::initializer_list<std::string_view> allowed) const {
    if (!j.is_object()) return fail(field, "must be an object, got " + type_of(j));
    for (const auto& [key, value] : j.items()) {
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string list;
        for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        return fail(join(field, key), "unknown field (allowed here: " + list + ")");
      }
    }
    return Status::Ok();
  }

  // Values (an array's elements, members under keys the reader iterates).
  Result<std::string> string(const Json& j, const std::string& field, bool non_empty = true) const {
    std::string s;
    GANTRY_RETURN_IF_ERROR(check(read_json_string_value(j, field, s)));
    if (non_empty && s.empty()) return fail(field, "must not be empty");
    return s;
  }

  Result<int64_t> integer(const Json& j, const std::string& field, int64_t lo, int64_t hi) const {
    std::optional<int64_t> v;
    GANTRY_RETURN_IF_ERROR(check(read_json_int_value(j, field, lo, hi, v)));
    return *v;
  }

  // Members of `obj` (the object at `parent`): absent or null leaves `out` unset.
  template <typename T>
  Status int_member(const Json& obj, std::string_view key, const std::string& parent, int64_t lo, int64_t hi,
                    std::optional<T>& out) const {
    std::optional<int64_t> v;
    GANTRY_RETURN_IF_ERROR(check(read_json_int(obj, key, under(parent), lo, hi, v)));
    if (v) out = static_cast<T>(*v);
    return Status::Ok();
  }

  Status bool_member(const Json& obj, std::string_view key, const std::string& parent,
                     std::optional<bool>& out) const {
    bool b = false;
    if (!json_field(obj, key)) return Status::Ok();
    GANTRY_RETURN_IF_ERROR(check(read_json_bool(obj, key, under(parent), b)));
    out = b;
    return Status::Ok();
  }

  Result<std::string> provider(const Json& j, const std::string& field) const {
    auto s = string(j, field);
    if (!s.ok()) return s.status();
    if (!is_known_provider(*s)) {
      std::string list;
      for (auto p : known_providers()) list += (list.empty() ? "" : ", ") + std::string(p);
      return fail(field, "'" + *s + "' is not a known provider (one of: " + list + ")");
    }
    return s;
  }

  // A dimension: a non-negative integer, or dynamic as -1, null or a name.
  Status dim(const Json& j, const std::string& field, std::vector<int64_t>& dims,
             std::vector<std::string>& names) const {
    if (j.is_null()) {
      dims.push_back(Shape::kDynamic);
      names.emplace_back();
    } else if (j.is_string()) {
      if (j.get<std::string>().empty()) return fail(field, "a named dimension must have a non-empty name");
      dims.push_back(Shape::kDynamic);
      names.push_back(j.get<std::string>());
    } else {
      auto v = integer(j, field, -1, INT64_MAX);
      if (!v.ok())
        return fail(field, "must be a non-negative integer, or -1, null or a name for a dynamic dimension");
      dims.push_back(*v < 0 ? Shape::kDynamic : *v);
      names.emplace_back();
    }
    return Status::Ok();
  }

  Result<TensorSpec> tensor_spec(const Json& j, const std::string& field) const {
    GANTRY_RETURN_IF_ERROR(check_object(j, field, {"name", "dtype", "shape", "bucket_dims"}));
    TensorSpec spec;
    if (!json_field(j, "name")) return fail(join(field, "name"), "is required");
    GANTRY_ASSIGN_OR_RETURN(spec.name, string(j["name"], join(field, "name")));
    if (const Json* dtype = json_field(j, "dtype")) {
      GANTRY_ASSIGN_OR_RETURN(auto text, string(*dtype, join(field, "dtype")));
      spec.dtype = parse_dtype(text);
      if (!spec.dtype)
        return fail(join(field, "dtype"), "'" + text + "' is not a dtype (f32, f16, i64, ...)");
    }
    if (const Json* shape = json_field(j, "shape")) {
      const auto& s = *shape;
      const std::string sf = join(field, "shape");
      if (!s.is_array()) return fail(sf, "must be an array of dimensions, got " + type_of(s));
      std::vector<int64_t> dims;
      std::vector<std::string> names;
      for (size_t i = 0; i < s.size(); ++i)
        GANTRY_RETURN_IF_ERROR(dim(s[i], sf + "[" + std::to_string(i) + "]", dims, names));
      spec.shape = Shape(std::move(dims));
      if (std::any_of(names.begin(), names.end(), [](const auto& n) { return !n.empty(); }))
        spec.dim_names = std::move(names);
    }
    if (const Json* bucket_dims = json_field(j, "bucket_dims")) {
      const auto& a = *bucket_dims;
      const std::string af = join(field, "bucket_dims");
      if (!a.is_array() || a.empty())
        return fail(af, "must be a non-empty array of dimension names, got " + type_of(a));
      for (size_t i = 0; i < a.size(); ++i) {
        const std::string ef = af + "[" + std::to_string(i) + "]";
        GANTRY_ASSIGN_OR_RETURN(auto name, string(a[i], ef));
        if (name.empty()) return fail(ef, "is an empty dimension name");
        if (std::find(spec.bucket_dims.begin(), spec.bucket_dims.end(), name) != spec.bucket_dims.end())
          return fail(ef, "'" + name + "' is listed twice");
        spec.bucket_dims.push_back(std::move(name));
      }
    }
    return spec;
  }

  Result<std::vector<TensorSpec>> tensor_specs(const Json& j, const std::string& field) const {
    if (!j.is_array()) return fail(field, "must be an array, got " + type_of(j));
    std::vector<TensorSpec> out;
    std::set<std::string> seen;
    for (size_t i = 0; i < j.size(); ++i) {
      const std::string f = field + "[" + std::to_string(i) + "]";
      GANTRY_ASSIGN_OR_RETURN(auto spec, tensor_spec(j[i], f));
      if (!seen.insert(spec.name).second) return fail(f + ".name", "'" + spec.name + "' appears twice");
      out.push_back(std::move(spec));
    }
    return out;
  }

  Result<HardwareRequirements> hardware(const Json& j, OnnxOptions& onnx) const {
    const std::string f = "hardware_requirements";
    GANTRY_RETURN_IF_ERROR(check_object(
        j, f,
        {"preferred_provider", "fallback_providers", "min_memory_mb", "min_vram_mb", "min_cuda_version",
         "required_precision", "device_id", "gpu_device_ids", "strategy", "graph_optimization_level"}));
    HardwareRequirements h;
    if (const Json* p = json_field(j, "preferred_provider")) {
      GANTRY_ASSIGN_OR_RETURN(h.preferred_provider, provider(*p, join(f, "preferred_provider")));
    }
    if (const Json* fallbacks = json_field(j, "fallback_providers")) {
      const auto& a = *fallbacks;
      const std::string af = join(f, "fallback_providers");
      if (!a.is_array()) return fail(af, "must be an array of provider names, got " + type_of(a));
      for (size_t i = 0; i < a.size(); ++i) {
        GANTRY_ASSIGN_OR_RETURN(auto p, provider(a[i], af + "[" + std::to_string(i) + "]"));
        if (std::find(h.fallback_providers.begin(), h.fallback_providers.end(), p) !=
            h.fallback_providers.end())
          return fail(af + "[" + std::to_string(i) + "]", "'" + p + "' is listed twice");
        h.fallback_providers.push_back(std::move(p));
      }
    }
    GANTRY_RETURN_IF_ERROR(int_member(j, "min_memory_mb", f, 0, INT64_MAX, h.min_memory_mb));
    GANTRY_RETURN_IF_ERROR(int_member(j, "min_vram_mb", f, 0, INT64_MAX, h.min_vram_mb));
    if (const Json* version = json_field(j, "min_cuda_version")) {
      const std::string vf = join(f, "min_cuda_version");
      const auto& v = *version;
      std::string text;
      if (v.is_number()) return fail(vf, "must be a string such as \"12.0\", got number");
      GANTRY_ASSIGN_OR_RETURN(text, string(v, vf));
      auto parsed = Version::parse(text);
      if (!parsed.ok()) return fail(vf, "'" + text + "' is not a version (expected e.g. \"12.4\")");
      h.min_cuda_version = *parsed;
    }
    if (const Json* precision = json_field(j, "required_precision")) {
      const std::string pf = join(f, "required_precision");
      GANTRY_ASSIGN_OR_RETURN(auto text, string(*precision, pf));
      h.required_precision = parse_precision(text);
      if (!h.required_precision) return fail(pf, "'" + text + "' is not one of " + kPrecisions.names());
    }
    GANTRY_RETURN_IF_ERROR(int_member(j, "device_id", f, 0, 1 << 20, h.device_id));
    if (const Json* ids = json_field(j, "gpu_device_ids")) {
      const auto& a = *ids;
      const std::string af = join(f, "gpu_device_ids");
      if (!a.is_array()) return fail(af, "must be an array of device ids, got " + type_of(a));
      for (size_t i = 0; i < a.size(); ++i) {
        const std::string ef = af + "[" + std::to_string(i) + "]";
        GANTRY_ASSIGN_OR_RETURN(auto id, integer(a[i], ef, 0, 1 << 20));
        if (std::find(h.gpu_device_ids.begin(), h.gpu_device_ids.end(), id) != h.gpu_device_ids.end())
          return fail(ef, "device " + std::to_string(id) + " is listed twice");
        h.gpu_device_ids.push_back(static_cast<int>(id));
      }
    }
    if (const Json* strategy = json_field(j, "strategy")) {
      const std::string sf = join(f, "strategy");
      GANTRY_ASSIGN_OR_RETURN(auto text, string(*strategy, sf));
      h.strategy = parse_strategy(text);
      if (!h.strategy) return fail(sf, "'" + text + "' is not one of " + kStrategies.names());
    }
    if (const Json* level = json_field(j, "graph_optimization_level")) {
      const std::string gf = join(f, "graph_optimization_level");
      const auto& v = *level;
      std::string text;
      if (v.is_number_integer()) {
        text = v.dump();
      } else if (v.is_string()) {
        text = v.get<std::string>();
      } else {
        return fail(gf, "must be a string or an integer, got " + type_of(v));
      }
      onnx.graph_optimization = parse_graph_optimization_level(text);
      if (!onnx.graph_optimization)
        return fail(gf, "'" + text + "' is not one of " + graph_optimization_level_names());
    }
    return h;
  }

  // `bucketed`: the dimension names io's tensors list in bucket_dims (a kapsl-style number expands to them).
  Result<RuntimeOptions> runtime(const Json& j, OnnxOptions& onnx,
                                 const std::vector<std::string>& bucketed) const {
    const std::string f = "runtime";
    GANTRY_RETURN_IF_ERROR(
        check_object(j, f,
                     {"intra_op_threads", "inter_op_threads", "memory_pattern", "cpu_arena",
                      "session_buckets", "peak_concurrency", "bucket_max_dims", "bucket_dim_granularity"}));
    RuntimeOptions r;
    GANTRY_RETURN_IF_ERROR(int_member(j, "intra_op_threads", f, 0, 4096, r.intra_op_threads));
    GANTRY_RETURN_IF_ERROR(int_member(j, "inter_op_threads", f, 0, 4096, r.inter_op_threads));
    GANTRY_RETURN_IF_ERROR(bool_member(j, "memory_pattern", f, onnx.memory_pattern));
    GANTRY_RETURN_IF_ERROR(bool_member(j, "cpu_arena", f, onnx.cpu_arena));
    GANTRY_RETURN_IF_ERROR(int_member(j, "peak_concurrency", f, 1, 1 << 20, r.peak_concurrency));
    GANTRY_RETURN_IF_ERROR(
        int_member(j, "bucket_dim_granularity", f, 1, 1 << 20, onnx.bucket_dim_granularity));
    if (const Json* max_dims = json_field(j, "bucket_max_dims")) {
      const auto& o = *max_dims;
      const std::string of = join(f, "bucket_max_dims");
      if (o.is_number()) {
        // kapsl's spelling: one cap for every bucketed dimension. Gantry caps dimensions by name; the names
        // are the ones io's bucket_dims list, so the number means the same cap on each of them.
        GANTRY_ASSIGN_OR_RETURN(int64_t size, integer(o, of, 1, int64_t{1} << 40));
        if (bucketed.empty())
          return fail(of,
                      "a number (kapsl's spelling: one cap for every bucketed dimension) needs io inputs or "
                      "outputs that name their bucket_dims; none does, so there is nothing to cap");
        for (const auto& name : bucketed) onnx.bucket_max_dims[name] = size;
      } else if (!o.is_object() || o.empty()) {
        return fail(of,
                    "must be a non-empty object mapping dimension names to sizes (or one size for every "
                    "bucketed dimension), got " +
                        type_of(o));
      } else {
        for (const auto& [name, v] : o.items()) {
          if (name.empty()) return fail(of, "names an empty dimension");
          GANTRY_ASSIGN_OR_RETURN(int64_t size, integer(v, of + "." + name, 1, int64_t{1} << 40));
          onnx.bucket_max_dims[name] = size;
        }
      }
    }
    if (const Json* buckets = json_field(j, "session_buckets")) {
      const auto& a = *buckets;
      const std::string af = join(f, "session_buckets");
      if (a.is_number())
        return fail(af,
                    "a count (kapsl's spelling: how many shape-bucketed sessions to create) is not enough "
                    "here: Gantry needs each bucket's shape, e.g. [{\"input\": [1, 512]}]; to pad dynamic "
                    "dimensions to buckets instead, list them in io's bucket_dims with "
                    "runtime.bucket_dim_granularity, and for more identical sessions set "
                    "runtime.peak_concurrency");
      if (!a.is_array())
        return fail(af, "must be an array of {input name: shape} objects, got " + type_of(a));
      for (size_t i = 0; i < a.size(); ++i) {
        const std::string bf = af + "[" + std::to_string(i) + "]";
        const auto& b = a[i];
        if (!b.is_object() || b.empty())
          return fail(bf, "must be a non-empty object mapping input names to shapes, got " + type_of(b));
        SessionBucket bucket;
        for (const auto& [name, shape] : b.items()) {
          const std::string sf = bf + "." + name;
          if (!shape.is_array()) return fail(sf, "must be an array of dimensions, got " + type_of(shape));
          std::vector<int64_t> dims;
          for (size_t d = 0; d < shape.size(); ++d) {
            auto v = integer(shape[d], sf + "[" + std::to_string(d) + "]", 0, INT64_MAX);
            if (!v.ok())
              return fail(sf + "[" + std::to_string(d) + "]",
                          "must be a non-negative integer (buckets are concrete shapes)");
            dims.push_back(*v);
          }
          bucket.emplace(name, Shape(std::move(dims)));
        }
        onnx.session_buckets.push_back(std::move(bucket));
      }
    }
    return r;
  }

  Result<DynamicBatching> dynamic_batching(const Json& j) const {
    const std::string f = "dynamic_batching";
    GANTRY_RETURN_IF_ERROR(
        check_object(j, f, {"max_batch_size", "preferred_batch_size", "max_queue_delay_microseconds"}));
    DynamicBatching d;
    GANTRY_RETURN_IF_ERROR(int_member(j, "max_batch_size", f, 1, 65536, d.max_batch_size));
    GANTRY_RETURN_IF_ERROR(
        int_member(j, "max_queue_delay_microseconds", f, 0, 60'000'000, d.max_queue_delay_microseconds));
    if (const Json* preferred = json_field(j, "preferred_batch_size")) {
      const auto& a = *preferred;
      const std::string af = join(f, "preferred_batch_size");
      if (!a.is_array()) return fail(af, "must be an array of batch sizes, got " + type_of(a));
      for (size_t i = 0; i < a.size(); ++i) {
        GANTRY_ASSIGN_OR_RETURN(auto v, integer(a[i], af + "[" + std::to_string(i) + "]", 1, 65536));
        if (d.max_batch_size && v > *d.max_batch_size) {
          return fail(af + "[" + std::to_string(i) + "]", std::to_string(v) +
                                                              " is larger than max_batch_size (" +
                                                              std::to_string(*d.max_batch_size) + ")");
        }
        d.preferred_batch_size.push_back(v);
      }
    }
    return d;
  }

  // The "llama" object: each value is checked for its JSON type here, then for its range or spelling by
  // set_llama_option (the one definition of the options).
  Result<LlamaOptions> llama(const Json& j) const {
    const std::string f = "llama";
    if (!j.is_object()) return fail(f, "must be an object, got " + type_of(j));
    LlamaOptions o;
    for (const auto& [key, value] : j.items()) {
      if (value.is_null()) continue;  // not given
      const std::string kf = join(f, key);
      std::string text;
      if (key == "kv_type" || key == "chat_template_file" || key == "reasoning_format" ||
          key == "draft_model" || key == "spec_type") {
        GANTRY_ASSIGN_OR_RETURN(text, string(value, kf));
      } else if (key == "draft_p_min") {
        std::optional<double> p;
        GANTRY_RETURN_IF_ERROR(check(read_json_number_value(value, kf, -HUGE_VAL, HUGE_VAL, p)));
        text = value.dump();
      } else if (key == "flash_attn") {
        if (value.is_boolean()) {
          text = value.get<bool>() ? "on" : "off";
        } else {
          GANTRY_ASSIGN_OR_RETURN(text, string(value, kf));
        }
      } else if (key == "mmap" || key == "kv_unified" || key == "cache_prompt") {
        bool b = false;
        GANTRY_RETURN_IF_ERROR(check(read_json_bool_value(value, kf, b)));
        text = b ? "on" : "off";
      } else if (key == "tensor_split") {
        if (!value.is_array() || value.empty())
          return fail(kf, "must be a non-empty array of non-negative numbers, got " + type_of(value));
        for (size_t i = 0; i < value.size(); ++i) {
          std::optional<double> share;
          GANTRY_RETURN_IF_ERROR(check(
              read_json_number_value(value[i], kf + "[" + std::to_string(i) + "]", 0, HUGE_VAL, share)));
          text += (i ? "," : "") + value[i].dump();
        }
      } else if (key == "rpc") {
        // An array of "host:port" strings (or one string, comma-separated as on the command line).
        if (value.is_string()) {
          text = value.get<std::string>();
        } else if (value.is_array() && !value.empty()) {
          for (size_t i = 0; i < value.size(); ++i) {
            GANTRY_ASSIGN_OR_RETURN(auto server, string(value[i], kf + "[" + std::to_string(i) + "]", false));
            text += (i ? "," : "") + server;
          }
        } else {
          return fail(kf, "must be a non-empty array of \"host:port\" strings, got " + type_of(value));
        }
      } else if (const auto keys = llama_option_keys();
                 std::find(keys.begin(), keys.end(), key) != keys.end()) {
        GANTRY_ASSIGN_OR_RETURN(int64_t v, integer(value, kf, INT64_MIN, INT64_MAX));
        text = std::to_string(v);
      }
      Status s = set_llama_option(o, key, text);
      if (!s.ok()) return fail(kf, s.message());
    }
    Status s = validate_llama_options(o);
    if (!s.ok()) return fail(f, s.message());
    return o;
  }

  Result<Manifest> manifest(const Json& j) const {
    GANTRY_RETURN_IF_ERROR(check_object(j, "",
                                        {"name", "version", "format", "task", "model_file", "sha256", "io",
                                         "hardware_requirements", "runtime", "dynamic_batching", "llama"}));
    for (const char* key : {"name", "version", "format", "model_file", "sha256"})
      if (!json_field(j, key)) return fail(key, "is required");
    Manifest m;
    GANTRY_ASSIGN_OR_RETURN(m.name, string(j["name"], "name"));
    if (j["version"].is_number()) return fail("version", "must be a string such as \"1.0.0\", got number");
    GANTRY_ASSIGN_OR_RETURN(m.version, string(j["version"], "version"));
    if (!Version::parse(m.version).ok())
      return fail("version", "'" + m.version + "' is not a version (expected e.g. \"1.2.0\")");
    GANTRY_ASSIGN_OR_RETURN(auto format, string(j["format"], "format"));
    const auto f = parse_model_format(format);
    if (!f) return fail("format", "'" + format + "' is not one of " + kFormats.names());
    m.format = *f;
    GANTRY_RETURN_IF_ERROR(check(read_json_string(j, "task", "", m.task)));
    GANTRY_ASSIGN_OR_RETURN(m.model_file, string(j["model_file"], "model_file"));
    GANTRY_RETURN_IF_ERROR(check_relative_package_path(m.model_file, origin_ + ": model_file"));
    const auto& sums = j["sha256"];
    if (!sums.is_object())
      return fail("sha256", "must be an object mapping file names to hex digests, got " + type_of(sums));
    for (const auto& [file, digest] : sums.items()) {
      const std::string sf = "sha256." + file;
      GANTRY_RETURN_IF_ERROR(check_relative_package_path(file, origin_ + ": sha256"));
      GANTRY_ASSIGN_OR_RETURN(auto hex, string(digest, sf));
      if (hex.size() != 64 || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
        return fail(sf, "'" + hex + "' is not a SHA-256 digest (64 hex digits)");
      std::transform(hex.begin(), hex.end(), hex.begin(), [](unsigned char c) { return std::tolower(c); });
      m.sha256.emplace(file, std::move(hex));
    }
    if (!m.sha256.count(m.model_file))
      return fail("sha256",
                  "has no entry for the model file '" + m.model_file + "' (run 'gantry pack' to compute it)");
    if (const Json* io_json = json_field(j, "io")) {
      const auto& io = *io_json;
      GANTRY_RETURN_IF_ERROR(check_object(io, "io", {"inputs", "outputs"}));
      IoSpec spec;
      if (const Json* inputs = json_field(io, "inputs")) {
        GANTRY_ASSIGN_OR_RETURN(spec.inputs, tensor_specs(*inputs, "io.inputs"));
      }
      if (const Json* outputs = json_field(io, "outputs")) {
        GANTRY_ASSIGN_OR_RETURN(spec.outputs, tensor_specs(*outputs, "io.outputs"));
      }
      m.io = std::move(spec);
    }
    if (const Json* v = json_field(j, "hardware_requirements")) {
      GANTRY_ASSIGN_OR_RETURN(m.hardware_requirements, hardware(*v, m.onnx));
    }
    if (const Json* v = json_field(j, "dynamic_batching")) {
      GANTRY_ASSIGN_OR_RETURN(m.dynamic_batching, dynamic_batching(*v));
    }
    if (const Json* v = json_field(j, "runtime")) {
      std::vector<std::string> bucketed;
      if (m.io)
        for (const auto* list : {&m.io->inputs, &m.io->outputs})
          for (const auto& t : *list)
            for (const auto& d : t.bucket_dims)
              if (std::find(bucketed.begin(), bucketed.end(), d) == bucketed.end()) bucketed.push_back(d);
      GANTRY_ASSIGN_OR_RETURN(m.runtime, runtime(*v, m.onnx, bucketed));
    }
    if (const Json* v = json_field(j, "llama")) {
      GANTRY_ASSIGN_OR_RETURN(m.llama, llama(*v));
    }
    // Each backend's options belong to its format only: a setting the backend would never read is a
    // mistake the author should hear about.
    if (m.format != ModelFormat::kOnnx && !m.onnx.empty())
      return fail("runtime",
                  "memory_pattern, cpu_arena, session_buckets, bucket_max_dims, bucket_dim_granularity and "
                  "hardware_requirements."
                  "graph_optimization_level are ONNX Runtime options; this model's format is " +
                      std::string(model_format_name(m.format)));
    if (m.format != ModelFormat::kOnnx && m.io)
      for (const auto* list : {&m.io->inputs, &m.io->outputs})
        for (const auto& t : *list)
          if (!t.bucket_dims.empty())
            return fail("io", "bucket_dims pads ONNX Runtime sessions' inputs; this model's format is " +
                                  std::string(model_format_name(m.format)));
    if (m.format != ModelFormat::kGguf && !m.llama.empty())
      return fail("llama", "llama.cpp options apply to format gguf; this model's format is " +
                               std::string(model_format_name(m.format)));
    return m;
  }

 private:
  std::string origin_;
};

OrderedJson dims_json(const Shape& shape, const std::vector<std::string>& names) {
  OrderedJson a = OrderedJson::array();
  for (size_t i = 0; i < shape.rank(); ++i) {
    if (shape[i] >= 0)
      a.push_back(shape[i]);
    else if (i < names.size() && !names[i].empty())
      a.push_back(names[i]);
    else
      a.push_back(-1);
  }
  return a;
}

OrderedJson specs_json(const std::vector<TensorSpec>& specs) {
  OrderedJson a = OrderedJson::array();
  for (const auto& s : specs) {
    OrderedJson o;
    o["name"] = s.name;
    if (s.dtype) o["dtype"] = dtype_name(*s.dtype);
    if (s.shape) o["shape"] = dims_json(*s.shape, s.dim_names);
    if (!s.bucket_dims.empty()) o["bucket_dims"] = s.bucket_dims;
    a.push_back(std::move(o));
  }
  return a;
}

}  // namespace

std::string_view model_format_name(ModelFormat f) { return kFormats.name_of(f); }
std::optional<ModelFormat> parse_model_format(std::string_view text) { return kFormats.find(text); }

std::string_view strategy_name(Strategy s) { return kStrategies.name_of(s); }
std::optional<Strategy> parse_strategy(std::string_view text) { return kStrategies.find(text); }

std::string_view precision_name(Precision p) { return kPrecisions.name_of(p); }
std::optional<Precision> parse_precision(std::string_view text) { return kPrecisions.find(text); }

const std::vector<std::string_view>& known_providers() {
  static const std::vector<std::string_view> kProviders = {"cpu",      "cuda",     "tensorrt", "rocm",
                                                           "migraphx", "openvino", "coreml",   "directml",
                                                           "vulkan",   "metal",    "sycl"};
  return kProviders;
}

bool is_known_provider(std::string_view name) {
  const auto& p = known_providers();
  return std::find(p.begin(), p.end(), name) != p.end();
}

Status check_relative_package_path(std::string_view relative, std::string_view field) {
  const std::string quoted = "'" + std::string(relative) + "'";
  auto fail = [&](const std::string& why) {
    return InvalidArgument(std::string(field) + ": " + quoted + " " + why);
  };
  if (relative.empty()) return InvalidArgument(std::string(field) + ": an empty file path");
  if (relative.find('\0') != std::string_view::npos) return fail("contains a NUL character");
  if (relative.find('\\') != std::string_view::npos)
    return fail("contains a backslash; use '/' between folders");
  if (relative.front() == '/')
    return fail("is an absolute path; files must lie inside the package directory");
  size_t start = 0;
  while (start <= relative.size()) {
    size_t end = relative.find('/', start);
    if (end == std::string_view::npos) end = relative.size();
    const auto part = relative.substr(start, end - start);
    if (part == "..") return fail("escapes the package directory ('..')");
    if (part.empty() || part == ".") return fail("is not a plain relative path (empty or '.' component)");
    start = end + 1;
  }
  return Status::Ok();
}

Result<Manifest> parse_manifest(std::string_view json_text, std::string_view origin) {
  GANTRY_ASSIGN_OR_RETURN(Json j, parse_json_unique_keys<Json>(json_text, origin));
  try {
    return Reader(origin).manifest(j);
  } catch (const Json::exception& e) {  // defensive: the reader checks types before every access
    return InvalidArgument(std::string(origin) + ": " + e.what());
  }
}

Result<Manifest> read_manifest(const std::filesystem::path& path) {
  auto text = read_file(path, 16 << 20);
  if (!text.ok()) return text.status();
  return parse_manifest(*text, path.string());
}

std::string manifest_to_json(const Manifest& m, int indent) {
  OrderedJson j;
  j["name"] = m.name;
  j["version"] = m.version;
  j["format"] = model_format_name(m.format);
  if (!m.task.empty()) j["task"] = m.task;
  j["model_file"] = m.model_file;
  j["sha256"] = OrderedJson::object();
  for (const auto& [file, hex] : m.sha256) j["sha256"][file] = hex;
  if (m.io) {
    j["io"]["inputs"] = specs_json(m.io->inputs);
    j["io"]["outputs"] = specs_json(m.io->outputs);
  }
  const auto& h = m.hardware_requirements;
  OrderedJson hw = OrderedJson::object();
  if (h.preferred_provider) hw["preferred_provider"] = *h.preferred_provider;
  if (!h.fallback_providers.empty()) hw["fallback_providers"] = h.fallback_providers;
  if (h.min_memory_mb) hw["min_memory_mb"] = *h.min_memory_mb;
  if (h.min_vram_mb) hw["min_vram_mb"] = *h.min_vram_mb;
  if (h.min_cuda_version) hw["min_cuda_version"] = h.min_cuda_version->to_string();
  if (h.required_precision) hw["required_precision"] = precision_name(*h.required_precision);
  if (h.device_id) hw["device_id"] = *h.device_id;
  if (!h.gpu_device_ids.empty()) hw["gpu_device_ids"] = h.gpu_device_ids;
  if (h.strategy) hw["strategy"] = strategy_name(*h.strategy);
  if (m.onnx.graph_optimization)
    hw["graph_optimization_level"] = graph_optimization_level_name(*m.onnx.graph_optimization);
  if (!hw.empty()) j["hardware_requirements"] = std::move(hw);
  const auto& r = m.runtime;
  OrderedJson rt = OrderedJson::object();
  if (r.intra_op_threads) rt["intra_op_threads"] = *r.intra_op_threads;
  if (r.inter_op_threads) rt["inter_op_threads"] = *r.inter_op_threads;
  if (m.onnx.memory_pattern) rt["memory_pattern"] = *m.onnx.memory_pattern;
  if (m.onnx.cpu_arena) rt["cpu_arena"] = *m.onnx.cpu_arena;
  if (!m.onnx.session_buckets.empty()) {
    OrderedJson a = OrderedJson::array();
    for (const auto& bucket : m.onnx.session_buckets) {
      OrderedJson b = OrderedJson::object();
      for (const auto& [name, shape] : bucket) b[name] = shape.dims();
      a.push_back(std::move(b));
    }
    rt["session_buckets"] = std::move(a);
  }
  if (!m.onnx.bucket_max_dims.empty()) rt["bucket_max_dims"] = m.onnx.bucket_max_dims;
  if (m.onnx.bucket_dim_granularity) rt["bucket_dim_granularity"] = *m.onnx.bucket_dim_granularity;
  if (r.peak_concurrency) rt["peak_concurrency"] = *r.peak_concurrency;
  if (!rt.empty()) j["runtime"] = std::move(rt);
  if (const auto& d = m.dynamic_batching) {
    OrderedJson db = OrderedJson::object();
    if (d->max_batch_size) db["max_batch_size"] = *d->max_batch_size;
    if (!d->preferred_batch_size.empty()) db["preferred_batch_size"] = d->preferred_batch_size;
    if (d->max_queue_delay_microseconds)
      db["max_queue_delay_microseconds"] = *d->max_queue_delay_microseconds;
    j["dynamic_batching"] = std::move(db);
  }
  if (const auto& l = m.llama; !l.empty()) {
    OrderedJson lj = OrderedJson::object();
    for (const auto& [key, text] : llama_option_texts(l)) {
      if (key == "kv_type" || key == "chat_template_file" || key == "reasoning_format" ||
          key == "draft_model" || key == "spec_type")
        lj[key] = text;
      else if (key == "draft_p_min")
        lj[key] = *l.draft_p_min;
      else if (key == "flash_attn" || key == "mmap" || key == "kv_unified" || key == "cache_prompt")
        lj[key] = text == "on";
      else if (key == "tensor_split")
        lj[key] = l.tensor_split;
      else
        lj[key] = std::stoi(text);
    }
    j["llama"] = std::move(lj);
  }
  return j.dump(indent) + "\n";
}

Status validate_manifest(const Manifest& manifest) {
  // One set of rules: the serialised form must pass the strict parser.
  return parse_manifest(manifest_to_json(manifest), "manifest '" + manifest.name + "'").status();
}

Status write_manifest(const std::filesystem::path& path, const Manifest& manifest) {
  GANTRY_RETURN_IF_ERROR(validate_manifest(manifest));
  return write_file(path, manifest_to_json(manifest));
}

}  // namespace gantry::model

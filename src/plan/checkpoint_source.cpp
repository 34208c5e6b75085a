#include "gantry/plan/checkpoint_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "gantry/weights/source.h"

namespace gantry::plan {
namespace {

namespace fs = std::filesystem;

bool is_url(const std::string& s) { return s.rfind("http://", 0) == 0 || s.rfind("https://", 0) == 0; }

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "https://huggingface.co/ORG/NAME[/]" -> ".../ORG/NAME/resolve/main/"; other URLs unchanged.
std::string hub_url(std::string url) {
  constexpr std::string_view kHub = "https://huggingface.co/";
  if (url.rfind(kHub, 0) != 0) return url;
  std::string rest = url.substr(kHub.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (std::count(rest.begin(), rest.end(), '/') != 1) return url;
  return std::string(kHub) + rest + "/resolve/main/";
}

// The whole of a small remote or local file (config.json), read through a WeightSource so it is counted.
Result<std::string> read_small(const std::string& spec) {
  constexpr uint64_t kMax = 16ull << 20;
  GANTRY_ASSIGN_OR_RETURN(
      auto src, is_url(spec) ? weights::WeightSource::url(spec) : weights::WeightSource::file(spec));
  if (src.size() > kMax) return InvalidArgument(spec + ": larger than 16 MiB; not a config.json");
  GANTRY_ASSIGN_OR_RETURN(auto bytes, src.read(0, src.size()));
  return std::string(reinterpret_cast<const char*>(bytes.data.data()), bytes.data.size());
}

}  // namespace

bool is_checkpoint_spec(const std::string& spec) {
  if (is_url(spec)) return true;
  if (ends_with(spec, ".json") || ends_with(spec, ".safetensors")) return true;
  std::error_code ec;
  return fs::is_directory(spec, ec);
}

std::vector<CheckpointTensor> checkpoint_tensors(const weights::WeightMetadata& meta) {
  std::vector<CheckpointTensor> out;
  out.reserve(meta.tensors.size());
  for (const auto& t : meta.tensors) {
    CheckpointTensor ct;
    ct.name = t.name;
    if (const auto* d = std::get_if<DType>(&t.type)) ct.dtype = *d;
    for (int64_t d : t.shape.dims()) ct.shape.push_back(static_cast<uint64_t>(d));
    ct.bytes = t.bytes;
    out.push_back(std::move(ct));
  }
  return out;
}

Result<CheckpointRead> read_checkpoint(const std::string& spec) {
  const uint64_t before = weights::WeightSource::total_bytes_read();
  CheckpointRead r;
  r.label = spec;
  uint64_t uncounted = 0;  // config.json of a local directory, which the loader reads without a source
  std::optional<weights::WeightSource> src;
  std::string config_at;  // where config.json is, unless the loader read it with the directory
  if (is_url(spec)) {
    std::string url = hub_url(spec);
    const std::string base = url.substr(0, url.find_first_of("?#"));
    if (!base.empty() && base.back() == '/') {
      auto index = weights::WeightSource::url(base + "model.safetensors.index.json");
      if (index.ok()) {
        src = *index;
      } else {
        auto single = weights::WeightSource::url(base + "model.safetensors");
        if (!single.ok()) {
          return NotFound(
              fmt::format("{}: neither model.safetensors.index.json ({}) nor model.safetensors ({})", spec,
                          index.status().message(), single.status().message()));
        }
        src = *single;
      }
      config_at = base + "config.json";
    } else {
      GANTRY_ASSIGN_OR_RETURN(src, weights::WeightSource::url(url));
      config_at = base.substr(0, base.rfind('/') + 1) + "config.json";
    }
  } else {
    GANTRY_ASSIGN_OR_RETURN(src, weights::WeightSource::open(spec));
    if (src->kind() != weights::WeightSource::Kind::kDirectory) {
      config_at = (fs::path(spec).parent_path() / "config.json").string();
      if (fs::path(spec).parent_path().empty()) config_at = "config.json";
    }
  }
  GANTRY_ASSIGN_OR_RETURN(auto meta, weights::metadata(*src));
  if (meta.format != weights::WeightFormat::kSafetensors &&
      meta.format != weights::WeightFormat::kSafetensorsIndex) {
    return InvalidArgument(fmt::format("{}: a {} file, not a safetensors checkpoint", spec,
                                       weights::weight_format_name(meta.format)));
  }
  r.tensors = checkpoint_tensors(meta);
  r.files = std::max<size_t>(1, meta.shards.size());
  r.stored_bytes = meta.total_bytes;
  if (config_at.empty()) {
    if (meta.config_json.empty())
      return NotFound(spec + ": no config.json in the directory; a checkpoint is planned from it");
    r.config_json = meta.config_json;
    uncounted = r.config_json.size();
  } else {
    auto cfg = read_small(config_at);
    if (!cfg.ok())
      return cfg.status().with_context(spec + ": its config.json (a checkpoint is planned from it)");
    r.config_json = std::move(*cfg);
  }
  r.bytes_read = weights::WeightSource::total_bytes_read() - before + uncounted;
  return r;
}

std::string checkpoint_name(const std::string& spec) {
  std::string s = spec.substr(0, spec.find_first_of("?#"));
  while (!s.empty() && s.back() == '/') s.pop_back();
  std::vector<std::string> parts;
  for (size_t at = 0; at <= s.size();) {
    const size_t slash = s.find('/', at);
    const std::string part = s.substr(at, slash == std::string::npos ? std::string::npos : slash - at);
    if (!part.empty() && part != "." && part != "resolve" && part != "main") parts.push_back(part);
    if (slash == std::string::npos) break;
    at = slash + 1;
  }
  while (!parts.empty() && (ends_with(parts.back(), ".json") || ends_with(parts.back(), ".safetensors")))
    parts.pop_back();
  return parts.empty() ? spec : parts.back();
}

}  // namespace gantry::plan

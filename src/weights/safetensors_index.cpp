// model.safetensors.index.json: {"metadata": {...}, "weight_map": {"tensor": "shard.safetensors"}}; the
// shards lie beside the index (never outside its directory, never through another scheme).
#include <nlohmann/json.hpp>
#include <set>

#include "gantry/core/file_io.h"
#include "gantry/core/json.h"
#include "weights/catalog.h"

namespace gantry::weights {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// Refuses names that could leave the directory: absolute, "..", backslashes, schemes, empty parts.
Status check_shard_name(const std::string& index, const std::string& shard) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument(index + ": shard \"" + shard + "\" " + why +
                           " (shards must lie in the index's directory)");
  };
  if (shard.empty()) return bad("is empty");
  if (shard.front() == '/') return bad("is an absolute path");
  if (shard.find('\\') != std::string::npos || shard.find("://") != std::string::npos ||
      shard.find('\0') != std::string::npos || shard.find('?') != std::string::npos ||
      shard.find('#') != std::string::npos)
    return bad("contains a forbidden character");
  for (const auto& part : fs::path(shard))
    if (part == ".." || part == ".") return bad("has a \".\" or \"..\" component");
  return Status::Ok();
}

// Opens a local shard. The name was checked lexically (relative, no ".."); symlinks inside the
// directory are followed, as the Hugging Face cache links snapshot files to its blob store.
Result<WeightSource> open_local_shard(const std::string& index, const fs::path& dir,
                                      const std::string& shard) {
  const fs::path p = dir / shard;
  std::error_code ec;
  if (!fs::exists(p, ec))
    return NotFound(index + ": shard \"" + shard + "\" is missing (" + p.string() + ")");
  auto src = WeightSource::file(p);
  if (!src.ok()) return src.status().with_context(index + ": shard \"" + shard + "\"");
  return src;
}

}  // namespace

Result<Catalog> parse_safetensors_index(const WeightSource& index, const HttpOptions& http) {
  const std::string& label = index.label();
  constexpr uint64_t kMaxIndex = uint64_t{64} << 20;
  if (index.size() > kMaxIndex)
    return Corrupt(label + ": index of " + std::to_string(index.size()) + " bytes is above the 64 MiB limit");
  GANTRY_ASSIGN_OR_RETURN(Bytes bytes, index.read(0, index.size()));
  const auto* p = reinterpret_cast<const char*>(bytes.data.data());
  auto parsed = parse_json<Json>(std::string_view(p, bytes.data.size()), label + ": the index");
  if (!parsed.ok()) return Corrupt(parsed.status().message());
  const Json& j = *parsed;
  if (!j.is_object()) return Corrupt(label + ": the index is not a JSON object");
  const auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) return Corrupt(label + ": the index has no \"weight_map\" object");

  Catalog cat;
  cat.meta.format = WeightFormat::kSafetensorsIndex;
  cat.meta.source = label;
  if (const auto md = j.find("metadata"); md != j.end() && md->is_object())
    for (const auto& [k, v] : md->items())
      cat.meta.metadata[k] = v.is_string() ? v.get<std::string>() : v.dump();

  // Shards in first-mention order; the tensors each must hold.
  std::vector<std::string> shards;
  std::map<std::string, std::set<std::string>> wanted;
  for (const auto& [tensor, shard] : wm->items()) {
    if (!shard.is_string()) return Corrupt(label + ": weight_map[\"" + tensor + "\"] is not a string");
    const auto s = shard.get<std::string>();
    GANTRY_RETURN_IF_ERROR(check_shard_name(label, s));
    if (!wanted.contains(s)) shards.push_back(s);
    wanted[s].insert(tensor);
  }
  for (const auto& shard : shards) {
    WeightSource src = index;
    if (index.kind() == WeightSource::Kind::kUrl) {
      const auto& u = index.url_string();
      const auto slash = u.rfind('/');
      auto s = WeightSource::url(u.substr(0, slash + 1) + shard, http);
      if (!s.ok()) return s.status().with_context(label + ": shard \"" + shard + "\"");
      src = *s;
    } else if (index.kind() == WeightSource::Kind::kFile) {
      GANTRY_ASSIGN_OR_RETURN(src, open_local_shard(label, index.path().parent_path(), shard));
    } else {
      return Unsupported(label + ": a sharded index in memory has no directory to find its shards in");
    }
    const auto& names = wanted[shard];
    cat.sources.push_back(src);
    cat.meta.shards.push_back(shard);
    const size_t before = cat.entries.size();
    GANTRY_RETURN_IF_ERROR(add_safetensors(cat, src, cat.sources.size() - 1, shard,
                                           [&](const std::string& n) { return names.contains(n); }));
    if (cat.entries.size() - before != names.size()) {
      for (const auto& n : names)
        if (!cat.by_name.contains(n))
          return Corrupt(label + ": tensor \"" + n + "\" is mapped to shard \"" + shard +
                         "\", which does not hold it");
    }
  }
  cat.finish();
  return cat;
}

}  // namespace gantry::weights

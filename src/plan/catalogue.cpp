#include "gantry/plan/catalogue.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "gantry/core/json.h"
#include "gantry/hw/bandwidth.h"

namespace gantry::plan {
namespace {

using nlohmann::json;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Reads the fields of one JSON object, remembering which were seen so unknown keys can be refused.
class Fields {
 public:
  Fields(const json& obj, std::string where) : obj_(obj), where_(std::move(where)) {}

  Result<std::string> str(const char* key, bool optional = false) {
    seen_.insert(key);
    auto it = obj_.find(key);
    if (it == obj_.end()) {
      if (optional) return std::string();
      return missing(key);
    }
    if (!it->is_string() || (!optional && it->get_ref<const std::string&>().empty())) {
      return InvalidArgument(fmt::format("{}: field \"{}\" must be a non-empty string", where_, key));
    }
    return it->get<std::string>();
  }
  Result<double> positive(const char* key) {
    seen_.insert(key);
    auto it = obj_.find(key);
    if (it == obj_.end()) return missing(key);
    if (!it->is_number() || !(it->get<double>() > 0) || !std::isfinite(it->get<double>())) {
      return InvalidArgument(fmt::format("{}: field \"{}\" must be a positive number", where_, key));
    }
    return it->get<double>();
  }
  Result<int> count(const char* key) {
    seen_.insert(key);
    auto it = obj_.find(key);
    if (it == obj_.end()) return missing(key);
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 4096) {
      return InvalidArgument(fmt::format("{}: field \"{}\" must be an integer from 1 to 4096", where_, key));
    }
    return static_cast<int>(it->get<int64_t>());
  }
  Result<std::vector<std::string>> strings(const char* key) {
    seen_.insert(key);
    std::vector<std::string> out;
    auto it = obj_.find(key);
    if (it == obj_.end()) return out;
    if (!it->is_array())
      return InvalidArgument(fmt::format("{}: field \"{}\" must be an array", where_, key));
    for (const auto& v : *it) {
      if (!v.is_string() || v.get_ref<const std::string&>().empty()) {
        return InvalidArgument(fmt::format("{}: field \"{}\" must hold non-empty strings", where_, key));
      }
      out.push_back(v.get<std::string>());
    }
    return out;
  }
  void mark(const char* key) { seen_.insert(key); }  // a field the caller checks itself
  Status no_unknown_keys() const {
    for (const auto& [k, v] : obj_.items()) {
      if (!seen_.count(k)) return InvalidArgument(fmt::format("{}: unknown field \"{}\"", where_, k));
    }
    return Status::Ok();
  }

 private:
  Status missing(const char* key) const {
    return InvalidArgument(fmt::format("{}: missing field \"{}\"", where_, key));
  }
  const json& obj_;
  std::string where_;
  std::set<std::string, std::less<>> seen_;
};

bool is_date(std::string_view d) {
  if (d.size() != 10 || d[4] != '-' || d[7] != '-') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (!std::isdigit(static_cast<unsigned char>(d[i]))) return false;
  }
  return true;
}

Result<Accelerator> parse_accelerator(const json& j, const std::string& where) {
  if (!j.is_object()) return InvalidArgument(where + ": must be an object");
  Fields f(j, where);
  Accelerator a;
  GANTRY_ASSIGN_OR_RETURN(a.id, f.str("id"));
  GANTRY_ASSIGN_OR_RETURN(a.name, f.str("name"));
  GANTRY_ASSIGN_OR_RETURN(a.memory_gib, f.positive("memory_gib"));
  // Device memory bandwidth has one definition: the hardware registry's known-device table. An accelerator it
  // knows (by id) takes the figure from there and may only repeat it; others must give it.
  const hw::KnownDevice* known = hw::known_device_by_id(a.id);
  if (known && !j.contains("memory_bandwidth_gb_s")) {
    f.mark("memory_bandwidth_gb_s");
    a.memory_bandwidth_gb_s = static_cast<double>(known->memory_bandwidth_bytes_per_s) / 1e9;
  } else {
    GANTRY_ASSIGN_OR_RETURN(a.memory_bandwidth_gb_s, f.positive("memory_bandwidth_gb_s"));
    if (known && std::llround(a.memory_bandwidth_gb_s * 1e9) !=
                     static_cast<long long>(known->memory_bandwidth_bytes_per_s)) {
      return InvalidArgument(fmt::format(
          "{}: memory_bandwidth_gb_s {} disagrees with the hardware registry's figure for \"{}\" ({} GB/s, "
          "{}); leave the field out to use it, or give the accelerator another id",
          where, a.memory_bandwidth_gb_s, a.id,
          static_cast<double>(known->memory_bandwidth_bytes_per_s) / 1e9, known->source));
    }
  }
  GANTRY_ASSIGN_OR_RETURN(a.fp16_dense_tflops, f.positive("fp16_dense_tflops"));
  GANTRY_ASSIGN_OR_RETURN(a.source, f.str("source"));
  GANTRY_ASSIGN_OR_RETURN(a.match, f.strings("match"));
  GANTRY_RETURN_IF_ERROR(f.no_unknown_keys());
  return a;
}

Result<Instance> parse_instance(const json& j, const std::string& where) {
  if (!j.is_object()) return InvalidArgument(where + ": must be an object");
  Fields f(j, where);
  Instance i;
  GANTRY_ASSIGN_OR_RETURN(i.id, f.str("id"));
  GANTRY_ASSIGN_OR_RETURN(i.provider, f.str("provider"));
  GANTRY_ASSIGN_OR_RETURN(i.name, f.str("name"));
  GANTRY_ASSIGN_OR_RETURN(i.accelerator, f.str("accelerator"));
  GANTRY_ASSIGN_OR_RETURN(i.count, f.count("count"));
  GANTRY_ASSIGN_OR_RETURN(i.interconnect, f.str("interconnect"));
  GANTRY_ASSIGN_OR_RETURN(i.host_memory_gib, f.positive("host_memory_gib"));
  GANTRY_ASSIGN_OR_RETURN(i.storage_bandwidth_gb_s, f.positive("storage_bandwidth_gb_s"));
  GANTRY_ASSIGN_OR_RETURN(i.price_usd_per_hour, f.positive("price_usd_per_hour"));
  GANTRY_ASSIGN_OR_RETURN(i.price_date, f.str("price_date"));
  if (!is_date(i.price_date)) {
    return InvalidArgument(
        fmt::format("{}: field \"price_date\" must be YYYY-MM-DD, not \"{}\"", where, i.price_date));
  }
  GANTRY_ASSIGN_OR_RETURN(i.price_source, f.str("price_source"));
  GANTRY_ASSIGN_OR_RETURN(i.price_note, f.str("price_note", /*optional=*/true));
  GANTRY_RETURN_IF_ERROR(f.no_unknown_keys());
  return i;
}

}  // namespace

const Accelerator* Catalogue::find_accelerator(std::string_view id) const {
  for (const auto& a : accelerators) {
    if (a.id == id) return &a;
  }
  return nullptr;
}

const Instance* Catalogue::find_instance(std::string_view id) const {
  for (const auto& i : instances) {
    if (i.id == id) return &i;
  }
  return nullptr;
}

const Accelerator* Catalogue::match_device(std::string_view device_name) const {
  const std::string name = lower(device_name);
  for (const auto& a : accelerators) {
    for (const auto& m : a.match) {
      if (name.find(lower(m)) != std::string::npos) return &a;
    }
  }
  return nullptr;
}

Result<Catalogue> parse_catalogue(std::string_view text, std::string_view origin) {
  auto parsed = parse_json<json>(text, fmt::format("catalogue {}", origin));
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  if (!j.is_object()) return InvalidArgument(fmt::format("catalogue {}: must be a JSON object", origin));
  const std::string where = fmt::format("catalogue {}", origin);
  Catalogue c;
  c.path = std::string(origin);
  auto sv = j.find("schema_version");
  if (sv == j.end() || !sv->is_number_integer()) {
    return InvalidArgument(where + ": missing integer field \"schema_version\"");
  }
  c.schema_version = sv->get<int>();
  if (c.schema_version != kCatalogueSchemaVersion) {
    return InvalidArgument(fmt::format("{}: schema_version {} is not supported (this gantry reads {})", where,
                                       c.schema_version, kCatalogueSchemaVersion));
  }
  Fields top(j, where);
  top.mark("schema_version");
  GANTRY_ASSIGN_OR_RETURN(c.version, top.str("catalogue_version"));
  GANTRY_RETURN_IF_ERROR(top.strings("notes").status());  // optional free text for people
  for (const char* list : {"accelerators", "instances"}) {
    top.mark(list);
    auto it = j.find(list);
    if (it == j.end() || !it->is_array()) {
      return InvalidArgument(fmt::format("{}: missing array field \"{}\"", where, list));
    }
  }
  GANTRY_RETURN_IF_ERROR(top.no_unknown_keys());
  std::set<std::string, std::less<>> ids;
  const json& accs = j["accelerators"];
  for (size_t k = 0; k < accs.size(); ++k) {
    GANTRY_ASSIGN_OR_RETURN(Accelerator a,
                            parse_accelerator(accs[k], fmt::format("{}: accelerators[{}]", where, k)));
    if (!ids.insert(a.id).second) {
      return InvalidArgument(fmt::format("{}: accelerators[{}]: duplicate id \"{}\"", where, k, a.id));
    }
    c.accelerators.push_back(std::move(a));
  }
  const json& insts = j["instances"];
  for (size_t k = 0; k < insts.size(); ++k) {
    const std::string w = fmt::format("{}: instances[{}]", where, k);
    GANTRY_ASSIGN_OR_RETURN(Instance i, parse_instance(insts[k], w));
    if (!ids.insert(i.id).second) return InvalidArgument(fmt::format("{}: duplicate id \"{}\"", w, i.id));
    if (c.find_accelerator(i.accelerator) == nullptr) {
      return InvalidArgument(fmt::format(
          "{}: field \"accelerator\" names \"{}\", which is not in accelerators", w, i.accelerator));
    }
    c.instances.push_back(std::move(i));
  }
  return c;
}

Result<Catalogue> load_catalogue(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFound(fmt::format("catalogue {} cannot be read (pass --catalogue FILE or set GANTRY_CATALOGUE)",
                                path.string()));
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_catalogue(text, path.string());
}

std::filesystem::path default_catalogue_path() {
  if (const char* env = std::getenv("GANTRY_CATALOGUE"); env != nullptr && *env != '\0') return env;
  // An unpacked bundle (make dist) carries it in share/gantry beside bin/; a build tree reads the source's.
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto bundled = exe.parent_path().parent_path() / "share" / "gantry" / "catalogue.json";
    if (std::filesystem::is_regular_file(bundled, ec)) return bundled;
  }
  return std::filesystem::path(GANTRY_CATALOGUE_DIR) / "catalogue.json";
}

}  // namespace gantry::plan

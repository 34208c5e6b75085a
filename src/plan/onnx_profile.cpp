#include "gantry/plan/onnx_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "gantry/core/file_io.h"
#include "gantry/model/sha256.h"

namespace gantry::plan {

uint64_t OnnxMemoryBytes::peak_in_use() const { return std::max(load_peak, weights + activations); }
uint64_t OnnxMemoryBytes::reservation() const { return peak_in_use() + outside_pool; }
uint64_t OnnxMemoryBytes::total() const { return reservation() + arena; }

uint64_t OnnxMemoryPrediction::peak_in_use() const {
  uint64_t t = 0;
  for (const auto& [device, b] : devices) t += b.peak_in_use();
  return t;
}

uint64_t OnnxMemoryPrediction::reservation() const {
  uint64_t t = 0;
  for (const auto& [device, b] : devices) t += b.reservation();
  return t;
}

uint64_t OnnxMemoryPrediction::total() const {
  uint64_t t = 0;
  for (const auto& [device, b] : devices) t += b.total();
  return t;
}

const OnnxMemoryPoint* OnnxMemoryProfile::at(int64_t batch) const {
  for (const auto& p : points)
    if (p.batch == batch) return &p;
  return nullptr;
}

void OnnxMemoryProfile::put(OnnxMemoryPoint point) {
  auto it = std::lower_bound(points.begin(), points.end(), point.batch,
                             [](const OnnxMemoryPoint& p, int64_t b) { return p.batch < b; });
  if (it != points.end() && it->batch == point.batch)
    *it = std::move(point);
  else
    points.insert(it, std::move(point));
}

std::vector<int64_t> base_batches(bool batch_dynamic, int64_t fixed_batch) {
  if (batch_dynamic) return {1, 2};
  return {std::max<int64_t>(1, fixed_batch)};
}

namespace {

// The two measured points a prediction at `batch` uses: the two largest at or below it when there are
// two, else the two nearest (ties to the smaller batch).
std::pair<const OnnxMemoryPoint*, const OnnxMemoryPoint*> pick_two(const OnnxMemoryProfile& profile,
                                                                   int64_t batch) {
  std::vector<const OnnxMemoryPoint*> below;
  for (const auto& p : profile.points)
    if (p.batch <= batch) below.push_back(&p);
  if (below.size() >= 2) return {below[below.size() - 2], below.back()};
  std::vector<const OnnxMemoryPoint*> all;
  for (const auto& p : profile.points) all.push_back(&p);
  std::stable_sort(all.begin(), all.end(), [batch](const auto* a, const auto* b) {
    return std::llabs(a->batch - batch) < std::llabs(b->batch - batch);
  });
  const OnnxMemoryPoint* x = all[0];
  const OnnxMemoryPoint* y = all[1];
  if (x->batch > y->batch) std::swap(x, y);
  return {x, y};
}

uint64_t extrapolate(uint64_t a1, int64_t b1, uint64_t a2, int64_t b2, int64_t b) {
  const double slope = (static_cast<double>(a2) - static_cast<double>(a1)) / static_cast<double>(b2 - b1);
  const double v = static_cast<double>(a1) + slope * static_cast<double>(b - b1);
  if (!(v > 0)) return 0;
  if (v >= 1.8e19) return UINT64_MAX;
  return static_cast<uint64_t>(std::llround(v));
}

}  // namespace

Result<OnnxMemoryPrediction> predict(const OnnxMemoryProfile& profile, int64_t batch) {
  if (batch < 1) return InvalidArgument("batch size " + std::to_string(batch) + " is not positive");
  OnnxMemoryPrediction out;
  out.batch = batch;
  if (const OnnxMemoryPoint* p = profile.at(batch)) {
    out.measured = true;
    out.devices = p->devices;
    out.basis = fmt::format("measured at batch {}", batch);
    return out;
  }
  if (!profile.batch_dynamic) {
    std::string have;
    for (const auto& p : profile.points) have += (have.empty() ? "" : ", ") + std::to_string(p.batch);
    return FailedPrecondition(fmt::format("{} has a fixed batch ({}); batch {} cannot run", profile.model,
                                          have.empty() ? "none measured" : have, batch));
  }
  if (profile.points.size() < 2)
    return FailedPrecondition(
        fmt::format("batch {} was not measured and a prediction needs two measured batch sizes ({} has {})",
                    batch, profile.model, profile.points.size()));
  auto [p1, p2] = pick_two(profile, batch);
  out.from = {p1->batch, p2->batch};
  out.basis = fmt::format("predicted from {} and {}", p1->batch, p2->batch);
  for (const auto& [device, m2] : p2->devices) {
    OnnxMemoryBytes m1;
    if (auto it = p1->devices.find(device); it != p1->devices.end()) m1 = it->second;
    OnnxMemoryBytes& d = out.devices[device];
    // Weights and the load do not depend on the batch (the larger of the two, should they differ); the
    // arena is the pool's block slack, not linear in anything: the larger point's.
    d.weights = std::max(m1.weights, m2.weights);
    d.load_peak = std::max(m1.load_peak, m2.load_peak);
    d.outside_pool = std::max(m1.outside_pool, m2.outside_pool);
    d.activations = extrapolate(m1.activations, p1->batch, m2.activations, p2->batch, batch);
    d.arena = m2.arena;
  }
  return out;
}

namespace {

nlohmann::json bytes_to_json(const OnnxMemoryBytes& b) {
  return {{"weights", b.weights},           {"activations", b.activations},
          {"load_peak", b.load_peak},       {"arena", b.arena},
          {"outside_pool", b.outside_pool}, {"peak_in_use", b.peak_in_use()},
          {"reservation", b.reservation()}, {"total", b.total()}};
}

Result<uint64_t> get_u64(const nlohmann::json& j, const char* field, std::string_view where) {
  if (!j.is_object() || !j.contains(field) || !j[field].is_number_unsigned())
    return InvalidArgument(std::string(where) + ": '" + field + "' is missing or not a byte count");
  return j[field].get<uint64_t>();
}

}  // namespace

nlohmann::json profile_to_json(const OnnxMemoryProfile& profile) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : profile.points) {
    nlohmann::json devices = nlohmann::json::object();
    for (const auto& [id, b] : p.devices) devices[id] = bytes_to_json(b);
    points.push_back({{"batch", p.batch}, {"devices", devices}});
  }
  return {{"key", profile.key},
          {"model", profile.model},
          {"provider", profile.provider},
          {"shapes", profile.shapes},
          {"batch_dynamic", profile.batch_dynamic},
          {"points", points}};
}

Result<OnnxMemoryProfile> profile_from_json(const nlohmann::json& j) {
  const std::string where = "memory profile";
  auto str = [&](const char* f) -> Result<std::string> {
    if (!j.is_object() || !j.contains(f) || !j[f].is_string())
      return InvalidArgument(where + ": '" + f + "' is missing or not a string");
    return j[f].get<std::string>();
  };
  OnnxMemoryProfile p;
  GANTRY_ASSIGN_OR_RETURN(p.key, str("key"));
  GANTRY_ASSIGN_OR_RETURN(p.model, str("model"));
  GANTRY_ASSIGN_OR_RETURN(p.provider, str("provider"));
  GANTRY_ASSIGN_OR_RETURN(p.shapes, str("shapes"));
  if (!j.contains("batch_dynamic") || !j["batch_dynamic"].is_boolean())
    return InvalidArgument(where + ": 'batch_dynamic' is missing or not a boolean");
  p.batch_dynamic = j["batch_dynamic"].get<bool>();
  if (!j.contains("points") || !j["points"].is_array())
    return InvalidArgument(where + ": 'points' is missing or not an array");
  for (const auto& pj : j["points"]) {
    if (!pj.is_object() || !pj.contains("batch") || !pj["batch"].is_number_integer() ||
        pj["batch"].get<int64_t>() < 1 || !pj.contains("devices") || !pj["devices"].is_object())
      return InvalidArgument(where + ": a point needs a positive 'batch' and a 'devices' object");
    OnnxMemoryPoint point;
    point.batch = pj["batch"].get<int64_t>();
    for (const auto& [id, bj] : pj["devices"].items()) {
      const std::string at = where + " batch " + std::to_string(point.batch) + " device " + id;
      OnnxMemoryBytes b;
      GANTRY_ASSIGN_OR_RETURN(b.weights, get_u64(bj, "weights", at));
      GANTRY_ASSIGN_OR_RETURN(b.activations, get_u64(bj, "activations", at));
      GANTRY_ASSIGN_OR_RETURN(b.load_peak, get_u64(bj, "load_peak", at));
      GANTRY_ASSIGN_OR_RETURN(b.arena, get_u64(bj, "arena", at));
      GANTRY_ASSIGN_OR_RETURN(b.outside_pool, get_u64(bj, "outside_pool", at));
      point.devices[id] = b;
    }
    if (p.at(point.batch))
      return InvalidArgument(where + ": batch " + std::to_string(point.batch) + " twice");
    p.put(std::move(point));
  }
  return p;
}

nlohmann::json prediction_to_json(const OnnxMemoryPrediction& p) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& [id, b] : p.devices) devices.push_back({{"device", id}, {"bytes", bytes_to_json(b)}});
  return {{"batch", p.batch},
          {"measured", p.measured},
          {"from_batches", p.from},
          {"basis", p.basis},
          {"devices", devices},
          {"peak_in_use", p.peak_in_use()},
          {"reservation", p.reservation()},
          {"total", p.total()}};
}

std::string onnx_profile_key(std::string_view model_sha256, std::string_view device,
                             std::string_view provider, std::string_view runtime_version) {
  return fmt::format("{}|{}|{}|{}|memory", model_sha256, device, provider, runtime_version);
}

std::string OnnxProfileCache::path_for(const std::string& key) const {
  return (std::filesystem::path(dir_) / ("memory-" + model::sha256_hex(key).substr(0, 16) + ".json"))
      .string();
}

std::optional<OnnxMemoryProfile> OnnxProfileCache::get(const std::string& key) const {
  auto text = read_file(path_for(key), 1 << 20);
  if (!text.ok()) return std::nullopt;
  auto parsed = parse_json(*text, path_for(key));
  if (!parsed.ok()) return std::nullopt;
  auto profile = profile_from_json(*parsed);
  if (!profile.ok() || profile->key != key) return std::nullopt;  // damaged, or another key's
  return std::move(*profile);
}

Status OnnxProfileCache::put(const OnnxMemoryProfile& profile) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return IoError("cannot create the profile cache directory " + dir_ + ": " + ec.message());
  return write_file(path_for(profile.key), profile_to_json(profile).dump(2) + "\n");
}

}  // namespace gantry::plan

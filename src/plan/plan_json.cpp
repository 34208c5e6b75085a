#include "gantry/plan/plan_json.h"

#include <fmt/format.h>

namespace gantry::plan {
namespace {

// "0-11" style ranges for a sorted layer list.
std::string layer_ranges(const std::vector<uint32_t>& layers) {
  std::string out;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += i == j ? std::to_string(layers[i]) : fmt::format("{}-{}", layers[i], layers[j]);
    i = j + 1;
  }
  return out.empty() ? "-" : out;
}

}  // namespace

std::string human_bytes(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (1ull << 30)) return fmt::format("{:.2f} GiB", b / (1ull << 30));
  if (bytes >= (1ull << 20)) return fmt::format("{:.2f} MiB", b / (1ull << 20));
  if (bytes >= (1ull << 10)) return fmt::format("{:.2f} KiB", b / (1ull << 10));
  return fmt::format("{} B", bytes);
}

nlohmann::json memory_to_json(const MemoryBytes& m) {
  return {{"weights", m.weights},
          {"kv_cache", m.kv_cache},
          {"compute", m.compute},
          {"output", m.output},
          {"total", m.total()}};
}

nlohmann::json plan_to_json(const Plan& plan) {
  nlohmann::json j;
  j["model"] = plan.model;
  j["estimate"] = plan.estimate;
  if (!plan.estimate) {
    const PlanOptions& o = plan.options;
    j["context"] = {{"n_ctx", plan.n_ctx},
                    {"n_ctx_seq", plan.n_ctx_seq},
                    {"parallel", o.n_parallel},
                    {"kv_streams", plan.n_stream},
                    {"kv_cells", plan.kv_cells},
                    {"kv_cells_swa", plan.kv_cells_swa},
                    {"n_batch", plan.n_batch},
                    {"n_ubatch", plan.n_ubatch},
                    {"kv_type", std::string(kv_type_name(o.kv_type))},
                    {"flash_attn", o.flash_attn},
                    {"gpu_layers", o.n_gpu_layers}};
  }
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : plan.devices) {
    devices.push_back(
        {{"id", hw::memory_device_id(d.device)},
         {"name", d.device.name},
         {"gpu", is_gpu(d.device)},
         {"layers", d.layers},
         {"output_layer", d.has_output_layer},
         {"predicted_bytes", memory_to_json(d.predicted)},
         {"free_bytes", device_free_bytes(d.device)},
         {"total_bytes", device_total_bytes(d.device)},
         {"fits", d.fits},
         {"remote", d.device.remote ? nlohmann::json(d.device.remote->endpoint) : nlohmann::json()}});
  }
  j["devices"] = devices;
  j["totals"] = memory_to_json(plan.totals);
  j["fits"] = plan.fits;
  j["suggestion"] = plan.suggestion.empty() ? nlohmann::json(nullptr) : nlohmann::json(plan.suggestion);
  j["notes"] = plan.notes;
  return j;
}

std::string plan_to_text(const Plan& plan) {
  std::string out;
  if (plan.estimate) {
    out += fmt::format("model: {} (ESTIMATE: not a GGUF model, sizes are approximate)\n", plan.model);
  } else {
    const PlanOptions& o = plan.options;
    out += fmt::format("model: {}\n", plan.model);
    out += fmt::format(
        "context: {} tokens ({} per sequence x {} parallel), batch {}, ubatch {}, KV {}, flash "
        "attention {}\n",
        plan.n_ctx, plan.n_ctx_seq, o.n_parallel, plan.n_batch, plan.n_ubatch, kv_type_name(o.kv_type),
        o.flash_attn ? "on" : "off");
    if (plan.kv_cells_swa > 0 && plan.kv_cells_swa != plan.kv_cells) {
      out += fmt::format("sliding-window layers keep {} KV cells\n", plan.kv_cells_swa);
    }
  }
  out += fmt::format("{:<10} {:<10} {:>10} {:>11} {:>11} {:>11} {:>11} {:>11}  {}\n", "device", "layers",
                     "weights", "kv_cache", "compute", "output", "total", "free", "fits");
  for (const auto& d : plan.devices) {
    const std::string layers =
        d.layers.empty() ? (d.has_output_layer ? "out" : "-")
                         : fmt::format("{}{}", layer_ranges(d.layers), d.has_output_layer ? "+out" : "");
    out += fmt::format("{:<10} {:<10} {:>10} {:>11} {:>11} {:>11} {:>11} {:>11}  {}\n",
                       hw::memory_device_id(d.device), layers, human_bytes(d.predicted.weights),
                       human_bytes(d.predicted.kv_cache), human_bytes(d.predicted.compute),
                       human_bytes(d.predicted.output), human_bytes(d.predicted.total()),
                       human_bytes(device_free_bytes(d.device)), d.fits ? "yes" : "NO");
  }
  out += fmt::format("{:<10} {:<10} {:>10} {:>11} {:>11} {:>11} {:>11}\n", "total", "",
                     human_bytes(plan.totals.weights), human_bytes(plan.totals.kv_cache),
                     human_bytes(plan.totals.compute), human_bytes(plan.totals.output),
                     human_bytes(plan.totals.total()));
  out += fmt::format("fits: {}\n", plan.fits ? "yes" : "no");
  if (!plan.suggestion.empty()) out += fmt::format("suggestion: {}\n", plan.suggestion);
  for (const auto& n : plan.notes) out += fmt::format("note: {}\n", n);
  return out;
}

}  // namespace gantry::plan

#include "cli/plan_checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>

#include "gantry/plan/checkpoint_plan.h"
#include "gantry/plan/checkpoint_source.h"
#include "gantry/plan/plan_json.h"
#include "gantry/plan/speed.h"

namespace gantry::cli {
namespace {

using nlohmann::json;
using plan::CheckpointRead;

std::string describe(const CheckpointRead& r, const plan::ConvertedCheckpoint* c) {
  std::string out;
  if (!r.assumptions.empty()) {
    out += fmt::format("model: ESTIMATE for {} parameters (no checkpoint read)\n", r.label);
    for (const auto& a : r.assumptions) out += "assumes: " + a + "\n";
  } else {
    out += fmt::format("checkpoint: {}\n", r.label);
    out += fmt::format(
        "read {} (config.json and the safetensors headers only) of {} of tensors in {} file{}\n",
        plan::human_bytes(r.bytes_read), plan::human_bytes(r.stored_bytes), r.files, r.files == 1 ? "" : "s");
  }
  if (c != nullptr) {
    const auto& h = c->hparams;
    out += fmt::format(
        "converts to: {} -> llama.cpp {}, {} layers, embd {}, {} heads ({} KV, width {}), ff {}, vocab {}, "
        "training context {}{}{}; converted as {}\n",
        c->hf_architecture, h.architecture, h.n_layer, h.n_embd, h.n_head[0], h.n_head_kv[0],
        h.n_embd_head_k[0], h.n_ff[0], h.n_vocab, h.n_ctx_train,
        h.n_expert ? fmt::format(", {} experts", h.n_expert) : "",
        h.n_swa ? fmt::format(", sliding window {}", h.n_swa) : "", c->converted_type.name);
    for (const auto& n : c->notes) out += "note: " + n + "\n";
  }
  return out;
}

json describe_json(const CheckpointRead& r, const plan::ConvertedCheckpoint* c) {
  json j = {{"source", r.label}, {"estimate", !r.assumptions.empty()}, {"assumptions", r.assumptions},
            {"files", r.files},  {"stored_bytes", r.stored_bytes},     {"bytes_read", r.bytes_read}};
  if (c != nullptr) {
    const auto& h = c->hparams;
    j["hf_architecture"] = c->hf_architecture;
    j["architecture"] = h.architecture;
    j["layers"] = h.n_layer;
    j["embd"] = h.n_embd;
    j["heads"] = h.n_head[0];
    j["kv_heads"] = h.n_head_kv[0];
    j["head_width"] = h.n_embd_head_k[0];
    j["feed_forward"] = h.n_ff[0];
    j["vocab"] = h.n_vocab;
    j["training_context"] = h.n_ctx_train;
    j["experts"] = h.n_expert;
    j["sliding_window"] = h.n_swa;
    j["converted_type"] = std::string(c->converted_type.name);
    j["notes"] = c->notes;
  }
  return j;
}

int not_planned(const CheckpointRead& r, const Status& why, const CheckpointPlanRequest& q, std::ostream& out,
                std::ostream& err) {
  auto types = plan::requested_file_types(q.quant, nullptr);
  if (!types.ok()) {
    err << "gantry: plan: " << types.status().message() << "\n";
    return 2;
  }
  json weights = json::object();
  for (const auto& t : *types) weights[std::string(t.name)] = plan::checkpoint_weight_bytes(r.tensors, t);
  if (q.json) {
    out << json{{"checkpoint", describe_json(r, nullptr)},
                {"planned", false},
                {"reason", why.message()},
                {"weights_alone", weights}}
               .dump(2)
        << "\n";
    return 0;
  }
  out << describe(r, nullptr) << why.message() << "\n";
  out << "weights alone (every matrix at the type's nominal bits per weight; no KV cache or buffers):\n";
  for (const auto& t : *types)
    out << fmt::format("  {:<8} {}\n", t.name,
                       plan::human_bytes(weights[std::string(t.name)].get<uint64_t>()));
  return 0;
}

}  // namespace

int run_checkpoint_plan(const CheckpointPlanRequest& q, std::ostream& out, std::ostream& err) {
  auto read = q.params.params.empty() ? plan::read_checkpoint(q.spec) : plan::params_checkpoint(q.params);
  if (!read.ok()) {
    err << "gantry: plan: " << read.status().to_string() << "\n";
    return read.status().code() == StatusCode::kInvalidArgument && !q.params.params.empty() ? 2 : 1;
  }
  auto conv = plan::convert_checkpoint(read->config_json, read->tensors);
  if (!conv.ok()) {
    if (conv.status().code() == StatusCode::kUnsupported)
      return not_planned(*read, conv.status(), q, out, err);
    err << "gantry: plan: " << read->label << ": " << conv.status().message() << "\n";
    return 1;
  }
  auto types = plan::requested_file_types(q.quant, &*conv);
  if (!types.ok()) {
    err << "gantry: plan: " << types.status().message() << "\n";
    return 2;
  }
  const std::string name =
      q.params.params.empty() ? plan::checkpoint_name(q.spec) : q.params.params + " (estimate)";
  auto profiled = plan::profile_candidates(*conv, *types, name);
  if (!profiled.ok()) {
    err << "gantry: plan: " << profiled.status().to_string() << "\n";
    return 1;
  }
  std::vector<plan::QuantCandidate>& cands = *profiled;

  if (!q.what_if.empty()) {
    auto targets = plan::resolve_targets(*q.catalogue, q.what_if,
                                         q.this_machine ? std::optional(q.this_machine()) : std::nullopt);
    if (!targets.ok()) {
      err << "gantry: plan: " << targets.status().message() << "\n";
      return 2;
    }
    std::vector<plan::QuantisedProfile> qp;
    for (const auto& c : cands) qp.push_back({std::string(c.type.name), c.profile});
    qp.front().profile.name = name;
    auto report = plan::what_if(qp, q.options, *q.catalogue, *targets);
    if (!report.ok()) {
      err << "gantry: plan: " << report.status().to_string() << "\n";
      return 2;
    }
    if (q.json) {
      json j = plan::what_if_to_json(*report);
      j["checkpoint"] = describe_json(*read, &*conv);
      out << j.dump(2) << "\n";
    } else {
      out << describe(*read, &*conv) << plan::what_if_to_text(*report);
    }
    return 0;
  }

  const uint32_t train = conv->hparams.n_ctx_train;
  auto picked = plan::plan_candidates(cands, q.options, q.ctx_given, q.devices);
  if (!picked.ok()) {
    err << "gantry: plan: " << picked.status().to_string() << "\n";
    return picked.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  const plan::QuantCandidate* chosen = *picked ? &cands[**picked] : nullptr;
  const plan::QuantCandidate& shown = chosen != nullptr ? *chosen : cands.back();
  std::optional<plan::SpeedPrediction> speed;
  if (q.speed && q.this_machine) {
    const plan::WhatIfTarget self = q.this_machine();
    auto s = plan::predict_speed(shown.profile, shown.plan, self.speeds, self.storage_bytes_per_s);
    if (s.ok()) speed = std::move(*s);
  }
  plan::Plan p = shown.plan;
  if (!read->assumptions.empty()) {
    p.notes.insert(p.notes.begin(), "ESTIMATE from a parameter count: see the assumptions above");
  }

  if (q.json) {
    json j = plan::plan_to_json(p);
    j["checkpoint"] = describe_json(*read, &*conv);
    j["quantization"] = std::string(shown.type.name);
    j["weight_bytes"] = shown.profile.total_weight_bytes();  // the GGUF's tensors (CPU repack copies aside)
    if (cands.size() > 1) {
      json rows = json::array();
      for (const auto& c : cands) {
        rows.push_back({{"quantization", std::string(c.type.name)},
                        {"weight_bytes", c.profile.total_weight_bytes()},
                        {"total_bytes", c.plan.totals.total()},
                        {"n_ctx", c.plan.n_ctx},
                        {"fits", c.plan.fits},
                        {"max_context", c.plan.fits ? json(c.max_context) : json(nullptr)}});
      }
      j["quantizations"] = rows;
      j["chosen"] = chosen != nullptr ? json(std::string(chosen->type.name)) : json(nullptr);
    }
    if (speed) j["speed"] = plan::speed_to_json(*speed);
    out << j.dump(2) << "\n";
    return 0;
  }
  out << describe(*read, &*conv);
  if (cands.size() > 1) {
    out << fmt::format("\n{:<8} {:>11} {:>14} {:>12}  {}\n", "quant", "weights",
                       fmt::format("total @{}", cands.front().plan.n_ctx), "max context", "fits");
    for (const auto& c : cands) {
      out << fmt::format("{:<8} {:>11} {:>14} {:>12}  {}\n", c.type.name,
                         plan::human_bytes(c.profile.total_weight_bytes()),
                         plan::human_bytes(c.plan.totals.total()),
                         c.plan.fits ? std::to_string(c.max_context) : "-", c.plan.fits ? "yes" : "no");
    }
    if (chosen != nullptr) {
      out << fmt::format("\nlargest that fits: {} ({} of weights), leaving a context of up to {} tokens{}\n",
                         chosen->type.name, plan::human_bytes(chosen->profile.total_weight_bytes()),
                         chosen->max_context, chosen->max_context >= train ? " (the training context)" : "");
    } else {
      out << fmt::format("\nnone fits at {} tokens, not even {}\n", cands.front().plan.n_ctx,
                         cands.back().type.name);
    }
    out << fmt::format("\nplan at {}:\n", shown.type.name);
  }
  out << plan::plan_to_text(p);
  if (speed) out << plan::speed_to_text(*speed);
  return 0;
}

}  // namespace gantry::cli

#include "gantry/weights/weight.h"

namespace gantry::weights {
namespace {

// ggml's plain types are DTypes here, so a weight is never typed as one of them.
bool is_block_type(model::GgmlType t) {
  const auto traits = model::ggml_type_traits(static_cast<uint32_t>(t));
  return traits && traits->block_size > 1;
}

}  // namespace

std::string weight_type_name(const WeightType& t) {
  if (const auto* d = std::get_if<DType>(&t)) return std::string(dtype_name(*d));
  const auto traits = model::ggml_type_traits(static_cast<uint32_t>(std::get<model::GgmlType>(t)));
  return traits ? std::string(traits->name) : "unknown";
}

std::optional<WeightType> parse_weight_type(std::string_view name) {
  if (auto d = parse_dtype(name)) return WeightType{*d};
  if (auto g = model::ggml_type_by_name(name); g && is_block_type(g->type)) return WeightType{g->type};
  return std::nullopt;
}

}  // namespace gantry::weights

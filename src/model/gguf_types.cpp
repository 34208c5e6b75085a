#include "gantry/model/gguf_types.h"

#include <array>
#include <cctype>

namespace gantry::model {
namespace {

constexpr std::array kTypes = {
    GgmlTypeTraits{GgmlType::kF32, "f32", 1, 4},
    GgmlTypeTraits{GgmlType::kF16, "f16", 1, 2},
    GgmlTypeTraits{GgmlType::kQ4_0, "q4_0", 32, 18},
    GgmlTypeTraits{GgmlType::kQ4_1, "q4_1", 32, 20},
    GgmlTypeTraits{GgmlType::kQ5_0, "q5_0", 32, 22},
    GgmlTypeTraits{GgmlType::kQ5_1, "q5_1", 32, 24},
    GgmlTypeTraits{GgmlType::kQ8_0, "q8_0", 32, 34},
    GgmlTypeTraits{GgmlType::kQ8_1, "q8_1", 32, 36},
    GgmlTypeTraits{GgmlType::kQ2_K, "q2_K", 256, 84},
    GgmlTypeTraits{GgmlType::kQ3_K, "q3_K", 256, 110},
    GgmlTypeTraits{GgmlType::kQ4_K, "q4_K", 256, 144},
    GgmlTypeTraits{GgmlType::kQ5_K, "q5_K", 256, 176},
    GgmlTypeTraits{GgmlType::kQ6_K, "q6_K", 256, 210},
    GgmlTypeTraits{GgmlType::kQ8_K, "q8_K", 256, 292},
    GgmlTypeTraits{GgmlType::kIQ2_XXS, "iq2_xxs", 256, 66},
    GgmlTypeTraits{GgmlType::kIQ2_XS, "iq2_xs", 256, 74},
    GgmlTypeTraits{GgmlType::kIQ3_XXS, "iq3_xxs", 256, 98},
    GgmlTypeTraits{GgmlType::kIQ1_S, "iq1_s", 256, 50},
    GgmlTypeTraits{GgmlType::kIQ4_NL, "iq4_nl", 32, 18},
    GgmlTypeTraits{GgmlType::kIQ3_S, "iq3_s", 256, 110},
    GgmlTypeTraits{GgmlType::kIQ2_S, "iq2_s", 256, 82},
    GgmlTypeTraits{GgmlType::kIQ4_XS, "iq4_xs", 256, 136},
    GgmlTypeTraits{GgmlType::kI8, "i8", 1, 1},
    GgmlTypeTraits{GgmlType::kI16, "i16", 1, 2},
    GgmlTypeTraits{GgmlType::kI32, "i32", 1, 4},
    GgmlTypeTraits{GgmlType::kI64, "i64", 1, 8},
    GgmlTypeTraits{GgmlType::kF64, "f64", 1, 8},
    GgmlTypeTraits{GgmlType::kIQ1_M, "iq1_m", 256, 56},
    GgmlTypeTraits{GgmlType::kBF16, "bf16", 1, 2},
    GgmlTypeTraits{GgmlType::kTQ1_0, "tq1_0", 256, 54},
    GgmlTypeTraits{GgmlType::kTQ2_0, "tq2_0", 256, 66},
    GgmlTypeTraits{GgmlType::kMXFP4, "mxfp4", 32, 17},
    GgmlTypeTraits{GgmlType::kNVFP4, "nvfp4", 64, 36},
    GgmlTypeTraits{GgmlType::kQ1_0, "q1_0", 128, 18},
    GgmlTypeTraits{GgmlType::kQ2_0, "q2_0", 64, 18},
};

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t id) {
  for (const auto& t : kTypes) {
    if (static_cast<uint32_t>(t.type) == id) return t;
  }
  return std::nullopt;
}

std::optional<GgmlTypeTraits> ggml_type_by_name(std::string_view name) {
  for (const auto& t : kTypes) {
    if (iequal(t.name, name)) return t;
  }
  return std::nullopt;
}

uint64_t ggml_row_bytes(const GgmlTypeTraits& type, uint64_t n_elements) {
  return n_elements / type.block_size * type.type_size;
}

}  // namespace gantry::model

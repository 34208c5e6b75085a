#include "cli/speculative_flags.h"

#include <tuple>

namespace gantry::cli {

void add_speculative_flags(CLI::App& cmd, SpeculativeFlags& f) {
  cmd.add_option("--draft-model,--model-draft,--spec-draft-model", f.draft_model,
                 "Speculative decoding: a small GGUF draft model with the same vocabulary (-md also works)");
  cmd.add_option("--draft-max,--draft,--draft-n,--spec-draft-n-max", f.draft_max,
                 "Most tokens the draft model drafts per step (default 3, llama-server's)");
  cmd.add_option("--draft-min,--draft-n-min,--spec-draft-n-min", f.draft_min,
                 "Drafts shorter than this are not used (default 0)");
  cmd.add_option("--draft-p-min,--spec-draft-p-min", f.draft_p_min,
                 "A drafted token below this probability ends the draft (default 0)");
  cmd.add_option(
      "--spec-type", f.spec_type,
      "Draft-free speculative decoding, comma-separated: ngram-simple (prompt lookup), ngram-map-k, "
      "ngram-map-k4v, ngram-mod, ngram-cache");
  cmd.add_option("--spec-ngram-size-n,--spec-ngram-simple-size-n", f.ngram_size_n,
                 "N-gram looked up in the sequence's own tokens (default 12)");
  cmd.add_option("--spec-ngram-size-m,--spec-ngram-simple-size-m", f.ngram_size_m,
                 "Most tokens copied after an n-gram match (default 48)");
}

Status apply_speculative_flags(const SpeculativeFlags& f, model::LlamaOptions& o) {
  for (const auto& [key, value, flag] :
       {std::tuple{"draft_model", f.draft_model, "--draft-model"},
        std::tuple{"draft_max", f.draft_max, "--draft-max"},
        std::tuple{"draft_min", f.draft_min, "--draft-min"},
        std::tuple{"draft_p_min", f.draft_p_min, "--draft-p-min"},
        std::tuple{"spec_type", f.spec_type, "--spec-type"},
        std::tuple{"spec_ngram_size_n", f.ngram_size_n, "--spec-ngram-size-n"},
        std::tuple{"spec_ngram_size_m", f.ngram_size_m, "--spec-ngram-size-m"}}) {
    if (value.empty()) continue;
    if (Status s = model::set_llama_option(o, key, value); !s.ok())
      return InvalidArgument(flag + (": " + s.message()));
  }
  return model::validate_llama_options(o);
}

}  // namespace gantry::cli

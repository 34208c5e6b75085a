// The speculative-decoding flags of `gantry serve` and `gantry run`, in llama-server's spellings
// (common/arg.cpp at the pinned commit) with its older ones as aliases:
//   --draft-model, --model-draft, --spec-draft-model, -md FILE   a draft model (same vocabulary)
//   --draft-max, --draft, --draft-n, --spec-draft-n-max N        most tokens drafted per step (3)
//   --draft-min, --draft-n-min, --spec-draft-n-min N             shorter drafts are dropped (0)
//   --draft-p-min, --spec-draft-p-min P                          least probability of a drafted token (0)
//   --spec-type TYPES                                            draft-free types (ngram-simple, ...)
//   --spec-ngram-size-n, --spec-ngram-simple-size-n N            n-gram looked up (12)
//   --spec-ngram-size-m, --spec-ngram-simple-size-m N            most tokens copied after it (48)
// (-md is rewritten to --model-draft before parsing: cli/llama_flags.h.) They become llama options
// (draft_model, draft_max, ...; gantry/model/backend_options.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "gantry/core/status.h"
#include "gantry/model/backend_options.h"

namespace gantry::cli {

struct SpeculativeFlags {
  std::string draft_model, draft_max, draft_min, draft_p_min, spec_type, ngram_size_n, ngram_size_m;

  bool operator==(const SpeculativeFlags&) const = default;
};

void add_speculative_flags(CLI::App& cmd, SpeculativeFlags& flags);

// Sets the given flags' llama options; InvalidArgument names the flag.
Status apply_speculative_flags(const SpeculativeFlags& flags, model::LlamaOptions& options);

}  // namespace gantry::cli

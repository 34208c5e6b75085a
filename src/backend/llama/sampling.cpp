#include "backend/llama/sampling.h"

#include <llama.h>

#include <vector>

namespace gantry::llama {

llama_sampler* make_sampler_chain(const backend::SamplingParams& p, int32_t n_vocab, int32_t penalty_window,
                                  std::span<const int32_t> history, llama_sampler* grammar) {
  llama_sampler_chain_params cp = llama_sampler_chain_default_params();
  cp.no_perf = true;
  llama_sampler* chain = llama_sampler_chain_init(cp);
  if (!p.logit_bias.empty()) {
    std::vector<llama_logit_bias> bias;
    bias.reserve(p.logit_bias.size());
    for (const auto& [token, b] : p.logit_bias) bias.push_back({token, b});
    llama_sampler_chain_add(
        chain, llama_sampler_init_logit_bias(n_vocab, static_cast<int32_t>(bias.size()), bias.data()));
  }
  if (p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    const int32_t last_n = p.repeat_last_n < 0 ? penalty_window : p.repeat_last_n;
    llama_sampler* penalties = llama_sampler_init_penalties(n_vocab, last_n, p.repeat_penalty,
                                                            p.frequency_penalty, p.presence_penalty);
    for (int32_t t : history) llama_sampler_accept(penalties, t);
    llama_sampler_chain_add(chain, penalties);
  }
  if (grammar) llama_sampler_chain_add(chain, grammar);
  if (p.temperature <= 0.0f) {
    llama_sampler_chain_add(chain, llama_sampler_init_greedy());
    return chain;
  }
  if (p.top_k > 0) llama_sampler_chain_add(chain, llama_sampler_init_top_k(p.top_k));
  if (p.top_p < 1.0f) llama_sampler_chain_add(chain, llama_sampler_init_top_p(p.top_p, 1));
  if (p.min_p > 0.0f) llama_sampler_chain_add(chain, llama_sampler_init_min_p(p.min_p, 1));
  llama_sampler_chain_add(chain, llama_sampler_init_temp(p.temperature));
  llama_sampler_chain_add(chain, llama_sampler_init_dist(p.seed));
  return chain;
}

}  // namespace gantry::llama

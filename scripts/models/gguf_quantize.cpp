// Set-up helper for scripts/models/gguf_llama.py, built against the llama.cpp install:
//   gguf_quantize quantize IN.gguf OUT.gguf TYPE THREADS        (llama.cpp's own llama_model_quantize;
//                                                               TYPE: q8_0, q4_0, q4_k_m, bf16, ... as below)
//   gguf_quantize check MODEL.gguf                              (loads it with llama_model_load_from_file)
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "llama.h"

// llama-quantize's names for the file types it writes without an importance matrix.
static const struct {
  const char* name;
  llama_ftype ftype;
} kTypes[] = {
    {"f32", LLAMA_FTYPE_ALL_F32},          {"f16", LLAMA_FTYPE_MOSTLY_F16},
    {"bf16", LLAMA_FTYPE_MOSTLY_BF16},     {"q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},
    {"q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},     {"q4_1", LLAMA_FTYPE_MOSTLY_Q4_1},
    {"q5_0", LLAMA_FTYPE_MOSTLY_Q5_0},     {"q5_1", LLAMA_FTYPE_MOSTLY_Q5_1},
    {"q2_k", LLAMA_FTYPE_MOSTLY_Q2_K},     {"q3_k_s", LLAMA_FTYPE_MOSTLY_Q3_K_S},
    {"q3_k_m", LLAMA_FTYPE_MOSTLY_Q3_K_M}, {"q3_k_l", LLAMA_FTYPE_MOSTLY_Q3_K_L},
    {"q4_k_s", LLAMA_FTYPE_MOSTLY_Q4_K_S}, {"q4_k_m", LLAMA_FTYPE_MOSTLY_Q4_K_M},
    {"q5_k_s", LLAMA_FTYPE_MOSTLY_Q5_K_S}, {"q5_k_m", LLAMA_FTYPE_MOSTLY_Q5_K_M},
    {"q6_k", LLAMA_FTYPE_MOSTLY_Q6_K},     {"iq4_nl", LLAMA_FTYPE_MOSTLY_IQ4_NL},
    {"iq4_xs", LLAMA_FTYPE_MOSTLY_IQ4_XS},
};

static void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level >= GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

int main(int argc, char** argv) {
  llama_log_set(quiet_log, nullptr);
  if (argc == 6 && std::strcmp(argv[1], "quantize") == 0) {
    llama_model_quantize_params p = llama_model_quantize_default_params();
    bool known = false;
    for (const auto& t : kTypes) {
      if (std::strcmp(argv[4], t.name) == 0) {
        p.ftype = t.ftype;
        known = true;
      }
    }
    if (!known) {
      std::fprintf(stderr, "gguf_quantize: unknown type %s (q8_0, q4_0, q4_k_m, ...)\n", argv[4]);
      return 2;
    }
    p.nthread = std::atoi(argv[5]);
    if (llama_model_quantize(argv[2], argv[3], &p) != 0) {
      std::fprintf(stderr, "gguf_quantize: llama_model_quantize %s -> %s failed\n", argv[2], argv[3]);
      return 1;
    }
    return 0;
  }
  if (argc == 3 && std::strcmp(argv[1], "check") == 0) {
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.progress_callback = [](float, void*) { return true; };  // no progress dots
    llama_model* model = llama_model_load_from_file(argv[2], mp);
    if (model == nullptr) {
      std::fprintf(stderr, "gguf_quantize: llama.cpp could not load %s\n", argv[2]);
      return 1;
    }
    std::fprintf(stderr, "gantry setup: %s loads in llama.cpp (%llu parameters, %llu bytes)\n", argv[2],
                 (unsigned long long)llama_model_n_params(model),
                 (unsigned long long)llama_model_size(model));
    llama_model_free(model);
    llama_backend_free();
    return 0;
  }
  std::fprintf(stderr, "usage: gguf_quantize quantize IN OUT TYPE THREADS | check MODEL\n");
  return 2;
}

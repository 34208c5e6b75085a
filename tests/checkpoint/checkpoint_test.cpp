// Hugging Face checkpoints planned before conversion, against the truth: the generated checkpoints
// (scripts/models/hf_checkpoints.py) converted to GGUF with the converter's mapping and quantised by
// llama.cpp's own llama_model_quantize at every type. The GGUF the checkpoint planner predicts must be the
// file llama.cpp wrote (every tensor's name, shape, type, size and offset), its profile the one
// profile_from_gguf reads, and its plan within 1 % of llama.cpp's own allocations per component (weights, KV
// cache, compute, output) for every architecture and type.
#include "gantry/plan/checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_files.h"
#include "gantry/backend/llama/measure.h"
#include "gantry/backend/llama/settings.h"
#include "gantry/model/gguf.h"
#include "gantry/plan/gguf_profile.h"
#include "gantry/plan/planner.h"

namespace gantry::plan {
namespace {

using testing::kArchitectures;
using testing::kQuantisations;
using testing::read_checkpoint;

TEST(Checkpoint, PredictsTheGgufLlamaCppWrites) {
  for (const char* arch : kArchitectures) {
    auto ck = read_checkpoint(arch);
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    auto conv = convert_checkpoint(ck->config_json, ck->tensors);
    ASSERT_TRUE(conv.ok()) << arch << ": " << conv.status().to_string();
    EXPECT_EQ(conv->converted_type.name, "bf16") << arch;
    for (const char* q : kQuantisations) {
      SCOPED_TRACE(std::string(arch) + " " + q);
      auto file = model::GgufFile::open(testing::gguf_path(arch, q));
      ASSERT_TRUE(file.ok()) << file.status().to_string();
      const auto predicted = checkpoint_gguf_tensors(*conv, *file_type_by_name(q));
      const auto& actual = file->tensors();
      ASSERT_EQ(predicted.size(), actual.size());
      for (size_t i = 0; i < actual.size(); ++i) {
        EXPECT_EQ(predicted[i].name, actual[i].name);
        EXPECT_EQ(predicted[i].dims, actual[i].dims) << actual[i].name;
        EXPECT_EQ(predicted[i].type.name, actual[i].type.name) << actual[i].name;
        EXPECT_EQ(predicted[i].size_bytes, actual[i].size_bytes) << actual[i].name;
        EXPECT_EQ(predicted[i].offset, actual[i].offset) << actual[i].name;
      }

      auto from_ckpt = profile_checkpoint(*conv, *file_type_by_name(q), "x");
      auto from_gguf = profile_from_gguf(*file);
      ASSERT_TRUE(from_ckpt.ok()) << from_ckpt.status().to_string();
      ASSERT_TRUE(from_gguf.ok()) << from_gguf.status().to_string();
      EXPECT_EQ(from_ckpt->architecture, from_gguf->architecture);
      EXPECT_EQ(from_ckpt->n_embd, from_gguf->n_embd);
      EXPECT_EQ(from_ckpt->n_vocab, from_gguf->n_vocab);
      EXPECT_EQ(from_ckpt->n_ctx_train, from_gguf->n_ctx_train);
      EXPECT_EQ(from_ckpt->n_swa, from_gguf->n_swa);
      EXPECT_EQ(from_ckpt->n_params, from_gguf->n_params);
      EXPECT_EQ(from_ckpt->weight_type, from_gguf->weight_type);
      EXPECT_EQ(from_ckpt->input_weight_bytes, from_gguf->input_weight_bytes);
      EXPECT_EQ(from_ckpt->output_weight_bytes, from_gguf->output_weight_bytes);
      EXPECT_EQ(from_ckpt->output_repack_bytes, from_gguf->output_repack_bytes);
      EXPECT_EQ(from_ckpt->mapped_span_bytes, from_gguf->mapped_span_bytes);
      ASSERT_EQ(from_ckpt->n_layer(), from_gguf->n_layer());
      for (uint32_t il = 0; il < from_gguf->n_layer(); ++il) {
        const auto &a = from_ckpt->layers[il], &b = from_gguf->layers[il];
        EXPECT_EQ(a.weight_bytes, b.weight_bytes) << "layer " << il;
        EXPECT_EQ(a.repack_bytes, b.repack_bytes) << "layer " << il;
        EXPECT_EQ(a.n_head, b.n_head);
        EXPECT_EQ(a.n_head_kv, b.n_head_kv);
        EXPECT_EQ(a.n_embd_head_k, b.n_embd_head_k);
        EXPECT_EQ(a.n_embd_head_v, b.n_embd_head_v);
        EXPECT_EQ(a.n_ff, b.n_ff);
        EXPECT_EQ(a.sliding_window, b.sliding_window) << "layer " << il;
      }
    }
  }
}

double relative(uint64_t predicted, uint64_t measured) {
  if (measured == 0) return predicted == 0 ? 0 : 1;
  return std::fabs(static_cast<double>(predicted) - static_cast<double>(measured)) /
         static_cast<double>(measured);
}

TEST(Checkpoint, PlanIsWithinOnePercentOfLlamaCppPerComponent) {
  constexpr uint32_t kCtx = 4096;
  for (const char* arch : kArchitectures) {
    auto ck = read_checkpoint(arch);
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    auto conv = convert_checkpoint(ck->config_json, ck->tensors);
    ASSERT_TRUE(conv.ok()) << conv.status().to_string();
    for (const char* q : kQuantisations) {
      SCOPED_TRACE(std::string(arch) + " " + q);
      auto profile = profile_checkpoint(*conv, *file_type_by_name(q), arch);
      ASSERT_TRUE(profile.ok()) << profile.status().to_string();
      auto m = testing::measure(arch, q, kCtx);
      ASSERT_TRUE(m.ok()) << m.status().to_string();
      auto p = plan_gguf(*profile, testing::cpu_plan_options(kCtx), {testing::big_cpu()});
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      EXPECT_LE(relative(p->totals.weights, m->model_bytes), 0.01)
          << p->totals.weights << " vs " << m->model_bytes;
      EXPECT_LE(relative(p->totals.kv_cache, m->kv_bytes), 0.01)
          << p->totals.kv_cache << " vs " << m->kv_bytes;
      EXPECT_LE(relative(p->totals.compute, m->compute_bytes), 0.01)
          << p->totals.compute << " vs " << m->compute_bytes;
      EXPECT_LE(relative(p->totals.output, m->output_bytes), 0.01)
          << p->totals.output << " vs " << m->output_bytes;
    }
  }
}

TEST(Checkpoint, ExactWithoutFlashAttentionAndWithAQuantisedCache) {
  // The other attention graph (KQ scores, soft_max) and a q8_0 cache (Hadamard-rotated q/k/v), one type each.
  struct Case {
    bool flash;
    KvType kv;
  };
  for (const char* arch : kArchitectures) {
    auto ck = read_checkpoint(arch);
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    auto conv = convert_checkpoint(ck->config_json, ck->tensors);
    ASSERT_TRUE(conv.ok()) << conv.status().to_string();
    auto profile = profile_checkpoint(*conv, *file_type_by_name("q4_k_m"), arch);
    ASSERT_TRUE(profile.ok());
    for (const Case c : {Case{false, KvType::kF16}, Case{true, KvType::kQ8_0}}) {
      SCOPED_TRACE(std::string(arch) + (c.flash ? " kv q8_0" : " no flash attention"));
      auto m = testing::measure(arch, "q4_k_m", 2048, c.flash, c.kv);
      ASSERT_TRUE(m.ok()) << m.status().to_string();
      auto p = plan_gguf(*profile, testing::cpu_plan_options(2048, c.flash, c.kv), {testing::big_cpu()});
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      EXPECT_EQ(p->totals.compute, m->compute_bytes);
      EXPECT_EQ(p->totals.kv_cache, m->kv_bytes);
      EXPECT_LE(relative(p->totals.weights, m->model_bytes), 0.01);
    }
  }
}

TEST(Checkpoint, UnknownArchitectureIsNamed) {
  const std::string cfg = R"({"architectures": ["FalconH1ForCausalLM"], "hidden_size": 64})";
  auto r = convert_checkpoint(cfg, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("not planned yet: architecture FalconH1ForCausalLM"),
            std::string::npos);
}

TEST(Checkpoint, BadConfigNamesTheField) {
  auto ck = read_checkpoint("llama");
  ASSERT_TRUE(ck.ok());
  auto r = convert_checkpoint(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 256})", ck->tensors);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("num_hidden_layers"), std::string::npos) << r.status().message();
  // Heads that contradict the q/k/v shapes.
  std::string cfg = ck->config_json;
  const auto at = cfg.find("\"num_key_value_heads\": 2");
  ASSERT_NE(at, std::string::npos);
  cfg.replace(at, 24, "\"num_key_value_heads\": 4");
  r = convert_checkpoint(cfg, ck->tensors);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("attn_k.weight"), std::string::npos) << r.status().message();
  EXPECT_FALSE(convert_checkpoint("{not json", ck->tensors).ok());
}

}  // namespace
}  // namespace gantry::plan

// gantry.json: every field parsed strictly, serialised back, and each kind of mistake a clear error naming
// the field.
#include "gantry/model/manifest.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <tuple>

#include "core/temp_dir.h"

namespace gantry::model {
namespace {

using Json = nlohmann::json;
const std::string kHash(64, 'a');

Json full_manifest() {
  return Json::parse(R"({
    "name": "silero-vad", "version": "5.1.0", "format": "onnx", "task": "vad",
    "model_file": "models/silero.onnx",
    "sha256": {"models/silero.onnx": ")" +
                     kHash + R"(", "README.md": ")" + std::string(64, 'B') + R"("},
    "io": {"inputs": [{"name": "input", "dtype": "f32", "shape": [1, "samples"], "bucket_dims": ["samples"]},
                      {"name": "state", "dtype": "float32", "shape": [2, "batch", 128]},
                      {"name": "sr", "dtype": "int64", "shape": []}],
           "outputs": [{"name": "output", "shape": [null, 1]}]},
    "hardware_requirements": {"preferred_provider": "cuda", "fallback_providers": ["tensorrt", "cpu"],
      "min_memory_mb": 512, "min_vram_mb": 1024, "min_cuda_version": "12.0", "required_precision": "fp16",
      "device_id": 0, "gpu_device_ids": [0, 1], "strategy": "round-robin", "graph_optimization_level": 99},
    "runtime": {"intra_op_threads": 2, "inter_op_threads": 1, "memory_pattern": false, "cpu_arena": true,
      "session_buckets": [{"input": [1, 512]}, {"input": [1, 1024]}], "peak_concurrency": 8,
      "bucket_max_dims": {"batch": 16}, "bucket_dim_granularity": 256},
    "dynamic_batching": {"max_batch_size": 16, "preferred_batch_size": [4, 8], "max_queue_delay_microseconds": 500}
  })");
}

TEST(Manifest, ParsesEveryField) {
  auto m = parse_manifest(full_manifest().dump());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->name, "silero-vad");
  EXPECT_EQ(m->version, "5.1.0");
  EXPECT_EQ(m->format, ModelFormat::kOnnx);
  EXPECT_EQ(m->task, "vad");
  EXPECT_EQ(m->model_file, "models/silero.onnx");
  EXPECT_EQ(m->sha256.at("README.md"), std::string(64, 'b')) << "digests are normalised to lower case";
  ASSERT_TRUE(m->io);
  ASSERT_EQ(m->io->inputs.size(), 3u);
  EXPECT_EQ(m->io->inputs[0].shape, Shape({1, Shape::kDynamic}));
  EXPECT_EQ(m->io->inputs[1].dtype, DType::kFloat32);
  EXPECT_EQ(m->io->inputs[1].dim_names, (std::vector<std::string>{"", "batch", ""}));
  EXPECT_EQ(m->io->inputs[2].shape, Shape());
  EXPECT_EQ(m->io->inputs[2].dtype, DType::kInt64);
  EXPECT_FALSE(m->io->outputs[0].dtype);
  const auto& h = m->hardware_requirements;
  EXPECT_EQ(h.preferred_provider, "cuda");
  EXPECT_EQ(h.fallback_providers, (std::vector<std::string>{"tensorrt", "cpu"}));
  EXPECT_EQ(h.min_memory_mb, 512u);
  EXPECT_EQ(h.min_vram_mb, 1024u);
  ASSERT_TRUE(h.min_cuda_version);
  EXPECT_GT(*h.min_cuda_version, *Version::parse("9.2"));
  EXPECT_EQ(h.required_precision, Precision::kFp16);
  EXPECT_EQ(h.device_id, 0);
  EXPECT_EQ(h.gpu_device_ids, (std::vector<int>{0, 1}));
  EXPECT_EQ(h.strategy, Strategy::kRoundRobin);
  const auto& r = m->runtime;
  EXPECT_EQ(r.intra_op_threads, 2);
  EXPECT_EQ(r.inter_op_threads, 1);
  EXPECT_EQ(r.peak_concurrency, 8);
  // ONNX Runtime's options keep their places in the JSON and land in the typed ONNX options.
  const auto& o = m->onnx;
  EXPECT_EQ(o.graph_optimization, GraphOptimizationLevel::kAll);
  EXPECT_EQ(o.memory_pattern, false);
  EXPECT_EQ(o.cpu_arena, true);
  EXPECT_EQ(o.bucket_max_dims, (std::map<std::string, int64_t>{{"batch", 16}}));
  EXPECT_EQ(o.bucket_dim_granularity, 256);
  EXPECT_EQ(m->io->inputs[0].bucket_dims, std::vector<std::string>{"samples"});
  ASSERT_EQ(o.session_buckets.size(), 2u);
  EXPECT_EQ(o.session_buckets[1].at("input"), Shape({1, 1024}));
  EXPECT_TRUE(m->llama.empty());
}

TEST(Manifest, SerialisesAndParsesBackEqual) {
  auto m = parse_manifest(full_manifest().dump());
  ASSERT_TRUE(m.ok());
  const std::string text = manifest_to_json(*m);
  auto again = parse_manifest(text);
  ASSERT_TRUE(again.ok()) << again.status().to_string() << "\n" << text;
  EXPECT_EQ(*again, *m);
  EXPECT_TRUE(validate_manifest(*m).ok());
  // Only set fields are written.
  Manifest minimal;
  minimal.name = "m";
  minimal.version = "1";
  minimal.model_file = "m.onnx";
  minimal.sha256["m.onnx"] = kHash;
  const auto j = Json::parse(manifest_to_json(minimal));
  EXPECT_FALSE(j.contains("hardware_requirements"));
  EXPECT_FALSE(j.contains("runtime"));
  EXPECT_FALSE(j.contains("io"));
  EXPECT_EQ(*parse_manifest(j.dump()), minimal);
}

TEST(Manifest, DynamicBatchingKnobs) {
  auto m = parse_manifest(full_manifest().dump());
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_TRUE(m->dynamic_batching.has_value());
  EXPECT_EQ(m->dynamic_batching->max_batch_size, 16);
  EXPECT_EQ(m->dynamic_batching->preferred_batch_size, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(m->dynamic_batching->max_queue_delay_microseconds, 500);
  auto back = parse_manifest(manifest_to_json(*m));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *m);
  for (auto [field, value, phrase] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"max_batch_size", "0", "must be an integer in 1..65536, got 0"},
           {"preferred_batch_size", "[32]", "larger than max_batch_size"},
           {"preferred_batch_size", "4", "must be an array"},
           {"max_queue_delay_microseconds", "-1", "must be an integer in 0..60000000, got -1"},
           {"max_queue_delay", "5", "unknown field"}}) {
    Json j = full_manifest();
    j["dynamic_batching"][field] = Json::parse(value);
    auto bad = parse_manifest(j.dump());
    ASSERT_FALSE(bad.ok()) << field << "=" << value;
    EXPECT_NE(bad.status().message().find("dynamic_batching." + field), std::string::npos)
        << bad.status().message();
    EXPECT_NE(bad.status().message().find(phrase), std::string::npos) << bad.status().message();
  }
}

TEST(Manifest, GraphOptimizationLevelSpellings) {
  for (const auto& [value, want] :
       std::vector<std::pair<Json, GraphOptimizationLevel>>{{"disable", GraphOptimizationLevel::kDisable},
                                                            {"basic", GraphOptimizationLevel::kBasic},
                                                            {"extended", GraphOptimizationLevel::kExtended},
                                                            {"all", GraphOptimizationLevel::kAll},
                                                            {0, GraphOptimizationLevel::kDisable},
                                                            {1, GraphOptimizationLevel::kBasic},
                                                            {2, GraphOptimizationLevel::kExtended},
                                                            {3, GraphOptimizationLevel::kAll},
                                                            {99, GraphOptimizationLevel::kAll},
                                                            {"2", GraphOptimizationLevel::kExtended}}) {
    auto j = full_manifest();
    j["hardware_requirements"]["graph_optimization_level"] = value;
    auto m = parse_manifest(j.dump());
    ASSERT_TRUE(m.ok()) << value << ": " << m.status().to_string();
    EXPECT_EQ(m->onnx.graph_optimization, want) << value;
  }
  for (auto s : {"pool", "round-robin", "data-parallel", "pipeline", "tensor-parallel", "auto"}) {
    auto j = full_manifest();
    j["hardware_requirements"]["strategy"] = s;
    auto m = parse_manifest(j.dump());
    ASSERT_TRUE(m.ok()) << s;
    EXPECT_EQ(strategy_name(*m->hardware_requirements.strategy), s);
  }
}

struct BadCase {
  const char* what;
  std::function<void(Json&)> mutate;
  const char* fragment;  // must appear in the message (usually the field path)
};

// Each case's mutation of `base` is refused with an InvalidArgument that starts with the origin and holds
// the case's fragment.
void expect_refused(const Json& base, const std::vector<BadCase>& cases) {
  for (const auto& c : cases) {
    Json j = base;
    c.mutate(j);
    auto m = parse_manifest(j.dump(), "pkg/gantry.json");
    ASSERT_FALSE(m.ok()) << c.what << " was accepted";
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(m.status().message().find(c.fragment), std::string::npos)
        << c.what << ": message '" << m.status().message() << "' lacks '" << c.fragment << "'";
    EXPECT_EQ(m.status().message().rfind("pkg/gantry.json: ", 0), 0u) << m.status().message();
  }
}

TEST(Manifest, EachMistakeIsAClearErrorNamingTheField) {
  const std::vector<BadCase> cases = {
      {"unknown top-level field", [](Json& j) { j["colour"] = "red"; }, "colour: unknown field"},
      {"unknown nested field", [](Json& j) { j["hardware_requirements"]["gpus"] = 2; },
       "hardware_requirements.gpus: unknown field"},
      {"unknown runtime field", [](Json& j) { j["runtime"]["threads"] = 2; },
       "runtime.threads: unknown field"},
      {"unknown io field", [](Json& j) { j["io"]["inputs"][0]["layout"] = "NCHW"; }, "io.inputs[0].layout"},
      {"missing name", [](Json& j) { j.erase("name"); }, "name: is required"},
      {"missing version", [](Json& j) { j.erase("version"); }, "version: is required"},
      {"missing format", [](Json& j) { j.erase("format"); }, "format: is required"},
      {"missing model_file", [](Json& j) { j.erase("model_file"); }, "model_file: is required"},
      {"missing sha256", [](Json& j) { j.erase("sha256"); }, "sha256: is required"},
      {"empty name", [](Json& j) { j["name"] = ""; }, "name: must not be empty"},
      {"name wrong type", [](Json& j) { j["name"] = 7; }, "name: must be a string"},
      {"version not a version", [](Json& j) { j["version"] = "latest"; },
       "version: 'latest' is not a version"},
      {"version a number", [](Json& j) { j["version"] = 1.5; }, "version: must be a string"},
      {"bad format", [](Json& j) { j["format"] = "tflite"; }, "format: 'tflite' is not one of onnx, gguf"},
      {"task wrong type", [](Json& j) { j["task"] = true; }, "task: must be a string"},
      {"absolute model_file", [](Json& j) { j["model_file"] = "/etc/passwd"; }, "absolute path"},
      {"model_file escapes", [](Json& j) { j["model_file"] = "../x.onnx"; }, "escapes the package directory"},
      {"model_file escapes midway", [](Json& j) { j["model_file"] = "a/../../x.onnx"; }, "escapes"},
      {"model_file backslash", [](Json& j) { j["model_file"] = "a\\b.onnx"; }, "backslash"},
      {"sha256 not object", [](Json& j) { j["sha256"] = "abc"; }, "sha256: must be an object"},
      {"sha256 short", [](Json& j) { j["sha256"]["models/silero.onnx"] = "abc"; },
       "sha256.models/silero.onnx: 'abc' is not a SHA-256 digest"},
      {"sha256 non-hex", [](Json& j) { j["sha256"]["models/silero.onnx"] = std::string(64, 'g'); },
       "is not a SHA-256 digest"},
      {"sha256 escaping key", [](Json& j) { j["sha256"]["../../etc/shadow"] = kHash; }, "escapes"},
      {"sha256 misses model", [](Json& j) { j["sha256"].erase("models/silero.onnx"); },
       "sha256: has no entry for the model file"},
      {"bad dtype", [](Json& j) { j["io"]["inputs"][0]["dtype"] = "f128"; }, "io.inputs[0].dtype: 'f128'"},
      {"bad dim", [](Json& j) { j["io"]["inputs"][0]["shape"][1] = -7; }, "io.inputs[0].shape[1]"},
      {"fractional dim", [](Json& j) { j["io"]["inputs"][0]["shape"][0] = 1.5; }, "io.inputs[0].shape[0]"},
      {"duplicate input", [](Json& j) { j["io"]["inputs"][1]["name"] = "input"; }, "appears twice"},
      {"input without name", [](Json& j) { j["io"]["inputs"][0].erase("name"); },
       "io.inputs[0].name: is required"},
      {"unknown provider", [](Json& j) { j["hardware_requirements"]["preferred_provider"] = "gpu"; },
       "hardware_requirements.preferred_provider: 'gpu' is not a known provider"},
      {"fallbacks not array", [](Json& j) { j["hardware_requirements"]["fallback_providers"] = "cpu"; },
       "hardware_requirements.fallback_providers: must be an array"},
      {"unknown fallback", [](Json& j) { j["hardware_requirements"]["fallback_providers"][1] = "tpu"; },
       "hardware_requirements.fallback_providers[1]"},
      {"duplicate fallback",
       [](Json& j) { j["hardware_requirements"]["fallback_providers"][1] = "tensorrt"; }, "listed twice"},
      {"negative memory", [](Json& j) { j["hardware_requirements"]["min_memory_mb"] = -1; },
       "hardware_requirements.min_memory_mb: must be an integer in 0..9223372036854775807, got -1"},
      {"memory as string", [](Json& j) { j["hardware_requirements"]["min_vram_mb"] = "1GB"; },
       "hardware_requirements.min_vram_mb: must be an integer"},
      {"cuda version garbage", [](Json& j) { j["hardware_requirements"]["min_cuda_version"] = "twelve"; },
       "hardware_requirements.min_cuda_version: 'twelve' is not a version"},
      {"cuda version number", [](Json& j) { j["hardware_requirements"]["min_cuda_version"] = 12.0; },
       "hardware_requirements.min_cuda_version: must be a string"},
      {"bad precision", [](Json& j) { j["hardware_requirements"]["required_precision"] = "fp8"; },
       "hardware_requirements.required_precision: 'fp8'"},
      {"negative device", [](Json& j) { j["hardware_requirements"]["device_id"] = -1; },
       "hardware_requirements.device_id"},
      {"duplicate gpu id",
       [](Json& j) {
         j["hardware_requirements"]["gpu_device_ids"] = {0, 0};
       },
       "hardware_requirements.gpu_device_ids[1]: device 0 is listed twice"},
      {"bad strategy", [](Json& j) { j["hardware_requirements"]["strategy"] = "fastest"; },
       "hardware_requirements.strategy: 'fastest' is not one of pool, round-robin"},
      {"bad opt level", [](Json& j) { j["hardware_requirements"]["graph_optimization_level"] = 5; },
       "hardware_requirements.graph_optimization_level: '5'"},
      {"bad opt level name", [](Json& j) { j["hardware_requirements"]["graph_optimization_level"] = "max"; },
       "graph_optimization_level: 'max'"},
      {"threads negative", [](Json& j) { j["runtime"]["intra_op_threads"] = -2; },
       "runtime.intra_op_threads"},
      {"threads fractional", [](Json& j) { j["runtime"]["inter_op_threads"] = 1.5; },
       "runtime.inter_op_threads: must be an integer"},
      {"memory_pattern not bool", [](Json& j) { j["runtime"]["memory_pattern"] = "yes"; },
       "runtime.memory_pattern: must be a boolean, got string"},
      {"zero concurrency", [](Json& j) { j["runtime"]["peak_concurrency"] = 0; }, "runtime.peak_concurrency"},
      {"max dim zero", [](Json& j) { j["runtime"]["bucket_max_dims"]["batch"] = 0; },
       "runtime.bucket_max_dims.batch"},
      {"max dims list", [](Json& j) { j["runtime"]["bucket_max_dims"] = Json::array({8}); },
       "runtime.bucket_max_dims: must be a non-empty object"},
      {"bucket dynamic", [](Json& j) { j["runtime"]["session_buckets"][0]["input"][1] = -1; },
       "runtime.session_buckets[0].input[1]"},
      {"bucket empty", [](Json& j) { j["runtime"]["session_buckets"][0] = Json::object(); },
       "runtime.session_buckets[0]: must be a non-empty object"},
      {"hardware not object", [](Json& j) { j["hardware_requirements"] = Json::array(); },
       "hardware_requirements: must be an object"},
      {"llama options on an onnx model",
       [](Json& j) {
         j["llama"] = {{"n_ctx", 4096}};
       },
       "llama: llama.cpp options apply to format gguf; this model's format is onnx"},
  };
  expect_refused(full_manifest(), cases);
}

// Manifests are read by the one strict JSON reader (gantry/core/json_reader.h): JSON null means "not given",
// as in every request body, so a required field that is null is missing and an optional one keeps its
// default.
TEST(Manifest, NullIsNotGiven) {
  Json j = full_manifest();
  j["task"] = nullptr;
  j["hardware_requirements"]["min_memory_mb"] = nullptr;
  j["runtime"]["memory_pattern"] = nullptr;
  j["dynamic_batching"]["max_batch_size"] = nullptr;
  auto m = parse_manifest(j.dump());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->task, "");
  EXPECT_FALSE(m->hardware_requirements.min_memory_mb.has_value());
  EXPECT_FALSE(m->onnx.memory_pattern.has_value());
  EXPECT_FALSE(m->dynamic_batching->max_batch_size.has_value());
  expect_refused(full_manifest(),
                 {{"null name", [](Json& j) { j["name"] = nullptr; }, "name: is required"},
                  {"null element",
                   [](Json& j) {
                     j["hardware_requirements"]["gpu_device_ids"] = {0, nullptr};
                   },
                   "hardware_requirements.gpu_device_ids[1]: must be an integer, got null"}});
}

// A GGUF package's manifest: the llama.cpp options, checked for type, range and spelling when parsed.
Json gguf_manifest() {
  return Json::parse(R"({"name": "tiny", "version": "1.0.0", "format": "gguf", "model_file": "m.gguf",
    "sha256": {"m.gguf": ")" +
                     kHash + R"("},
    "llama": {"n_ctx": 4096, "parallel": 2, "n_batch": 256, "n_ubatch": 128, "n_gpu_layers": -1,
              "tensor_split": [3, 1.5], "kv_type": "q8_0", "flash_attn": "on", "mmap": false, "max_tokens": 64,
              "kv_unified": true, "cache_prompt": false, "cache_ram": 512, "prefill_chunk": 64}
  })");
}

TEST(Manifest, LlamaRpcServersAreHostPortStrings) {
  Json j = gguf_manifest();
  j["llama"]["rpc"] = {"10.0.0.2:50052", "10.0.0.3:50052"};
  auto m = parse_manifest(j.dump());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->llama.rpc, (std::vector<std::string>{"10.0.0.2:50052", "10.0.0.3:50052"}));
  EXPECT_EQ(llama_option_texts(m->llama).at("rpc"), "10.0.0.2:50052,10.0.0.3:50052");
  j["llama"]["rpc"] = "10.0.0.4:50052";  // one string, as on the command line
  m = parse_manifest(j.dump());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->llama.rpc, (std::vector<std::string>{"10.0.0.4:50052"}));
  for (const Json& bad :
       {Json::array({"10.0.0.2"}), Json::array({1}), Json::array(), Json(5), Json::array({"a:1", "a:1"})}) {
    j["llama"]["rpc"] = bad;
    auto r = parse_manifest(j.dump());
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_NE(r.status().message().find("llama.rpc"), std::string::npos) << r.status().message();
  }
}

TEST(Manifest, LlamaOptionsAreTypedAndRoundTrip) {
  auto m = parse_manifest(gguf_manifest().dump());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const auto& l = m->llama;
  EXPECT_EQ(l.n_ctx, 4096);
  EXPECT_EQ(l.parallel, 2);
  EXPECT_EQ(l.n_batch, 256);
  EXPECT_EQ(l.n_ubatch, 128);
  EXPECT_EQ(l.n_gpu_layers, -1);
  EXPECT_EQ(l.tensor_split, (std::vector<float>{3, 1.5}));
  EXPECT_EQ(l.kv_type, KvType::kQ8_0);
  EXPECT_EQ(l.flash_attn, true);
  EXPECT_EQ(l.mmap, false);
  EXPECT_EQ(l.max_tokens, 64);
  EXPECT_EQ(l.kv_unified, true);
  EXPECT_EQ(l.cache_prompt, false);
  EXPECT_EQ(l.cache_ram, 512);
  EXPECT_EQ(l.prefill_chunk, 64);
  EXPECT_TRUE(m->onnx.empty());
  auto again = parse_manifest(manifest_to_json(*m));
  ASSERT_TRUE(again.ok()) << again.status().to_string() << "\n" << manifest_to_json(*m);
  EXPECT_EQ(*again, *m);
  // flash_attn also takes true/false and "auto" (unset).
  auto j = gguf_manifest();
  j["llama"]["flash_attn"] = "auto";
  auto autofa = parse_manifest(j.dump());
  ASSERT_TRUE(autofa.ok()) << autofa.status().to_string();
  EXPECT_FALSE(autofa->llama.flash_attn);
}

TEST(Manifest, SpeculativeDecodingOptionsRoundTrip) {
  auto j = gguf_manifest();
  j["llama"]["draft_model"] = "draft.gguf";
  j["llama"]["draft_max"] = 8;
  j["llama"]["draft_min"] = 1;
  j["llama"]["draft_p_min"] = 0.75;
  j["llama"]["spec_type"] = "ngram-simple";
  j["llama"]["spec_ngram_size_n"] = 4;
  j["llama"]["spec_ngram_size_m"] = 24;
  auto m = parse_manifest(j.dump());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->llama.draft_model, "draft.gguf");
  EXPECT_EQ(m->llama.draft_max, 8);
  EXPECT_EQ(m->llama.draft_min, 1);
  EXPECT_EQ(m->llama.draft_p_min, 0.75f);
  EXPECT_EQ(m->llama.spec_type, "ngram-simple");
  EXPECT_EQ(m->llama.spec_ngram_size_n, 4);
  EXPECT_EQ(m->llama.spec_ngram_size_m, 24);
  auto again = parse_manifest(manifest_to_json(*m));
  ASSERT_TRUE(again.ok()) << again.status().to_string() << "\n" << manifest_to_json(*m);
  EXPECT_EQ(*again, *m);
  EXPECT_TRUE(validate_manifest(*m).ok());
}

TEST(Manifest, BadLlamaOptionsNameTheField) {
  const std::vector<BadCase> cases = {
      {"unknown key", [](Json& j) { j["llama"]["ctx"] = 512; },
       "unknown llama.cpp option 'ctx' (known: n_ctx"},
      {"ctx as string", [](Json& j) { j["llama"]["n_ctx"] = "4096"; }, "llama.n_ctx: must be an integer"},
      {"ctx too large", [](Json& j) { j["llama"]["n_ctx"] = 1 << 25; }, "llama.n_ctx: "},
      {"parallel zero", [](Json& j) { j["llama"]["parallel"] = 0; }, "out of range (1..256)"},
      {"bad kv type", [](Json& j) { j["llama"]["kv_type"] = "q3_k"; }, "is not a KV cache type"},
      {"kv type number", [](Json& j) { j["llama"]["kv_type"] = 8; }, "llama.kv_type: must be a string"},
      {"bad flash", [](Json& j) { j["llama"]["flash_attn"] = "maybe"; }, "must be auto, on or off"},
      {"mmap string", [](Json& j) { j["llama"]["mmap"] = "off"; },
       "llama.mmap: must be a boolean, got string"},
      {"kv_unified string", [](Json& j) { j["llama"]["kv_unified"] = "on"; },
       "llama.kv_unified: must be a boolean, got string"},
      {"cache_ram below -1", [](Json& j) { j["llama"]["cache_ram"] = -2; }, "llama.cache_ram: "},
      {"split string", [](Json& j) { j["llama"]["tensor_split"] = "3,1"; }, "llama.tensor_split: must be"},
      {"split negative",
       [](Json& j) {
         j["llama"]["tensor_split"] = {1, -1};
       },
       "tensor_split"},
      {"split of strings", [](Json& j) { j["llama"]["tensor_split"] = {"a"}; }, "llama.tensor_split[0]"},
      {"batch below parallel", [](Json& j) { j["llama"]["n_batch"] = 1; }, "n_batch=1 must be >= parallel"},
      {"quantised V without flash", [](Json& j) { j["llama"]["flash_attn"] = false; },
       "needs flash attention"},
      {"llama not object", [](Json& j) { j["llama"] = Json::array(); }, "llama: must be an object"},
      {"draft model number", [](Json& j) { j["llama"]["draft_model"] = 3; },
       "llama.draft_model: must be a string"},
      {"p_min string", [](Json& j) { j["llama"]["draft_p_min"] = "0.5"; },
       "llama.draft_p_min: must be a number"},
      {"p_min above 1", [](Json& j) { j["llama"]["draft_p_min"] = 2; }, "must be a probability in 0..1"},
      {"draft_min above max",
       [](Json& j) {
         j["llama"]["draft_max"] = 2;
         j["llama"]["draft_min"] = 4;
       },
       "draft_min=4 must be <= draft_max (2)"},
      {"unknown spec type", [](Json& j) { j["llama"]["spec_type"] = "eagle"; }, "unknown type 'eagle'"},
      {"onnx options on a gguf model",
       [](Json& j) {
         j["runtime"] = {{"memory_pattern", false}};
       },
       "are ONNX Runtime options; this model's format is gguf"},
      {"opt level on a gguf model",
       [](Json& j) {
         j["hardware_requirements"] = {{"graph_optimization_level", "all"}};
       },
       "are ONNX Runtime options"},
  };
  expect_refused(gguf_manifest(), cases);
}

TEST(Manifest, NotJsonAndWrongTopLevel) {
  for (const char* text : {"", "{", "[1,2]", "null", "{\"name\": }", "\xff\xfe"}) {
    auto m = parse_manifest(text);
    ASSERT_FALSE(m.ok()) << text;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_NE(parse_manifest("{").status().message().find("not valid JSON"), std::string::npos);
}

TEST(Manifest, ValidateCatchesCodeBuiltMistakes) {
  Manifest m;
  m.name = "x";
  m.version = "1.0";
  m.model_file = "../x.onnx";
  m.sha256["../x.onnx"] = kHash;
  EXPECT_FALSE(validate_manifest(m).ok());
  m.model_file = "x.onnx";
  m.sha256 = {{"x.onnx", kHash}};
  EXPECT_TRUE(validate_manifest(m).ok());
  m.runtime.intra_op_threads = -1;
  auto s = validate_manifest(m);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("runtime.intra_op_threads"), std::string::npos) << s.message();
}

TEST(Manifest, ReadAndWriteFiles) {
  test_util::TempDir dir;
  auto m = parse_manifest(full_manifest().dump());
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(write_manifest(dir.path() / "gantry.json", *m).ok());
  auto back = read_manifest(dir.path() / "gantry.json");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, *m);
  auto missing = read_manifest(dir.path() / "nope.json");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(Manifest, RelativePathRules) {
  EXPECT_TRUE(check_relative_package_path("model.onnx", "f").ok());
  EXPECT_TRUE(check_relative_package_path("a/b/model.onnx", "f").ok());
  EXPECT_TRUE(check_relative_package_path("..hidden", "f").ok());
  for (const char* bad : {"", "/abs", "..", "../x", "a/..", "a//b", "./a", "a/./b", "a\\b", "a/"})
    EXPECT_FALSE(check_relative_package_path(bad, "f").ok()) << bad;
  EXPECT_FALSE(check_relative_package_path(std::string_view("a\0b", 3), "f").ok());
}

}  // namespace
}  // namespace gantry::model

namespace gantry::model {
namespace {

TEST(Manifest, NumberOverflowIsAClearErrorNotACrash) {  // found by manifest_fuzz
  for (const char* text : {"1e6079", R"({"name": "m", "runtime": {"intra_op_threads": 1e400}})"}) {
    auto m = parse_manifest(text, "gantry.json");
    ASSERT_FALSE(m.ok()) << text;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(m.status().message().find("gantry.json"), std::string::npos) << m.status().message();
  }
}

// Issue 13: a repeated key is an error naming it (the last one no longer wins silently), at any depth.
TEST(Manifest, DuplicateKeysAreRejectedByName) {
  const std::string base = full_manifest().dump();
  auto top = parse_manifest("{\"name\": \"evil\", " + base.substr(1), "dup.json");
  ASSERT_FALSE(top.ok());
  EXPECT_EQ(top.status().message(),
            "dup.json: duplicate key 'name' (a key may appear only once in an object)");
  std::string nested = base;
  const auto at = nested.find("\"min_memory_mb\"");
  ASSERT_NE(at, std::string::npos);
  nested.insert(at, "\"min_memory_mb\": 1, ");
  auto inner = parse_manifest(nested, "dup.json");
  ASSERT_FALSE(inner.ok());
  EXPECT_NE(inner.status().message().find("duplicate key 'min_memory_mb'"), std::string::npos)
      << inner.status().message();
  // The same key in two different objects is fine.
  EXPECT_TRUE(parse_manifest(base).ok());
}

// Issue 13: 160k keys (1.6 MB) took 22 s; the duplicate check is one hash set per open object now
// (parse_json_unique_keys). 160,001 keys parse, and a duplicate at the very end is still found. (The test
// once compared wall-clock times of two sizes, which failed on a loaded 2-core machine.)
TEST(Manifest, HugeManifestParsesAndFindsADuplicateAtTheEnd) {
  std::string text = R"({"name":"m","version":"1.0.0","format":"onnx","model_file":"m.onnx","sha256":{)";
  for (size_t i = 0; i < 160000; ++i)
    text += "\"f" + std::to_string(i) + "\":\"" + std::string(64, 'a') + "\",";
  text += "\"m.onnx\":\"" + std::string(64, 'a') + "\"}}";
  auto m = parse_manifest(text, "big.json");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->sha256.size(), 160001u);
  std::string dup = text;
  dup.insert(dup.size() - 2, ",\"f7\":\"" + std::string(64, 'b') + "\"");
  auto d = parse_manifest(dup, "big.json");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("duplicate key 'f7'"), std::string::npos) << d.status().message();
}

}  // namespace
}  // namespace gantry::model

namespace gantry::model {
namespace {

// Manifests written for kapsl: each of its spellings Gantry reads differently is accepted with kapsl's
// meaning, or refused with a message that names it.
TEST(Manifest, KapslSpellings) {
  // "pipeline-parallel" is kapsl's name for the pipeline strategy; written back as Gantry's.
  Json j = full_manifest();
  j["hardware_requirements"]["strategy"] = "pipeline-parallel";
  auto m = parse_manifest(j.dump());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->hardware_requirements.strategy, Strategy::kPipeline);
  EXPECT_NE(manifest_to_json(*m).find("\"pipeline\""), std::string::npos);
  EXPECT_TRUE(validate_manifest(*m).ok());

  // bucket_max_dims as a number: the same cap on every dimension io buckets.
  j = full_manifest();
  j["io"]["inputs"][1]["bucket_dims"] = Json::array({"batch"});
  j["runtime"]["bucket_max_dims"] = 32;
  m = parse_manifest(j.dump());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->onnx.bucket_max_dims, (std::map<std::string, int64_t>{{"batch", 32}, {"samples", 32}}));
  auto again = parse_manifest(manifest_to_json(*m));
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(*again, *m);
  // ... and refused where io buckets nothing, or with a bad size.
  j = full_manifest();
  j["io"]["inputs"][0].erase("bucket_dims");
  j["runtime"]["bucket_max_dims"] = 32;
  auto none = parse_manifest(j.dump());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("runtime.bucket_max_dims: a number (kapsl's spelling: one cap for "
                                         "every bucketed dimension)"),
            std::string::npos)
      << none.status().message();
  j = full_manifest();
  j["runtime"]["bucket_max_dims"] = 0;
  EXPECT_FALSE(parse_manifest(j.dump()).ok());

  // session_buckets as a count: refused, naming kapsl's meaning and Gantry's spellings.
  j = full_manifest();
  j["runtime"]["session_buckets"] = 4;
  auto count = parse_manifest(j.dump());
  ASSERT_FALSE(count.ok());
  const std::string msg = count.status().message();
  EXPECT_NE(msg.find("runtime.session_buckets: a count (kapsl's spelling: how many shape-bucketed sessions"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("peak_concurrency"), std::string::npos) << msg;

  // metal is a known provider name (refused at load with kapsl's meaning: tests/backend/factory_test.cpp).
  j = full_manifest();
  j["hardware_requirements"]["preferred_provider"] = "metal";
  EXPECT_TRUE(parse_manifest(j.dump()).ok());
}

}  // namespace
}  // namespace gantry::model

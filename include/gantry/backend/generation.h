// Text generation and embeddings, as any backend that generates text offers them (llama.cpp today).
//
// The types are plain data and defined once here; the llama.cpp engine uses them as they are.
// Model (gantry/backend/model.h) exposes them generically, so no caller needs the backend's own class.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gantry/backend/fair_queue.h"
#include "gantry/core/status.h"

namespace gantry::backend {

// Sampling; defaults are llama.cpp's (common/common.h). temperature == 0 means greedy.
// This is the one definition of the sampling defaults: CLI flags and server requests start from it.
struct SamplingParams {
  float temperature = 0.8f;     // >= 0
  int top_k = 40;               // >= 0; 0 = off
  float top_p = 0.95f;          // (0, 1]; 1 = off
  float min_p = 0.05f;          // [0, 1]; 0 = off
  float repeat_penalty = 1.0f;  // > 0; 1 = off
  // OpenAI's penalties, subtracted from a token's logit: presence once if the token occurred,
  // frequency times the number of its occurrences. [-2, 2]; 0 = off.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int repeat_last_n = 64;       // >= -1; tokens the three penalties look back over (-1 = whole context)
  uint32_t seed = 0xFFFFFFFFu;  // 0xFFFFFFFF = a random seed
  // Added to the raw logit of a token before sampling, as (token id, bias); -inf bans the token.
  // Not NaN nor +inf; ids are checked against the vocabulary where the request is started.
  std::vector<std::pair<int32_t, float>> logit_bias;
};

// Checks every field; the message names the bad one and its allowed range.
Status validate(const SamplingParams& p);

// A prompt or text to embed that is longer than the model's context allows: the request's fault, so
// InvalidArgument (400 on every protocol, never a retryable 429; OpenAI's code
// "context_length_exceeded"). The message starts with "context length exceeded: " and goes on with
// `details` (both numbers and what to do).
Status context_length_exceeded(std::string_view details);
// Whether `st` is such an error (also after with_context() prefixed it).
bool is_context_length_exceeded(const Status& st);

// Asked between the pieces of synchronous work (each text to embed or document to rank, each decode):
// true stops it with Cancelled (the client went away, the server is stopping). Empty: never.
using CancelCheck = std::function<bool()>;

// Texts one embedding call takes (OpenAI's limit on an input array) and documents one rerank call
// scores: more is InvalidArgument before any is tokenized.
inline constexpr size_t kMaxEmbedInputs = 2048;
inline constexpr size_t kMaxRerankDocuments = 10000;

enum class FinishReason { kEndOfGeneration, kMaxTokens, kStopString, kCancelled };
std::string_view finish_reason_name(FinishReason r);  // "eog", "max_tokens", "stop", "cancelled"

// Receives each new piece of generated text (valid UTF-8, stop strings held back). Return false to
// cancel the generation.
using TextCallback = std::function<bool(std::string_view text)>;

// One generated token's log-probability (natural log) under the model's distribution: log-softmax
// over the full vocabulary of the raw logits, before penalties, constraints and temperature.
struct TokenLogprob {
  int32_t token = -1;
  std::string text;  // the token's bytes (may be part of a UTF-8 character)
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;  // the most likely tokens as (text, logprob), best first
};

// One piece of generated text with what a streaming protocol needs besides the text.
struct TextPiece {
  int choice = 0;         // which of the request's n_choices it continues (0-based)
  std::string_view text;  // as TextCallback's
  // When the request asked for logprobs (n_logprobs >= 0): the tokens sampled since this choice's
  // previous piece, in order, so a choice's pieces together carry exactly its result's `logprobs`.
  // A token whose text is held back (an incomplete character, a possible stop string) or hidden (a
  // special token) comes with the piece that follows it; a choice's last piece may have empty text
  // and only logprobs. Empty otherwise.
  std::span<const TokenLogprob> logprobs;
};
// Receives each piece of every choice. Return false to cancel the generation (all its choices).
using PieceCallback = std::function<bool(const TextPiece& piece)>;

// A constraint on the shape of the generated text (OpenAI's response_format). The backend enforces
// it while sampling, so every token keeps the output a prefix of a valid document; the output is
// complete when the generation ends with kEndOfGeneration (max_tokens or a stop string can cut it).
struct OutputConstraint {
  enum class Kind {
    kNone,
    kJsonObject,  // any JSON object
    kJsonSchema,  // a JSON value valid against `json_schema` (a supported subset; see the backend)
    kGrammar,     // the GBNF `grammar` (a chat layer's tool-call or schema grammar; see below)
  };
  OutputConstraint() = default;
  OutputConstraint(Kind k, std::string schema = {}) : kind(k), json_schema(std::move(schema)) {}

  Kind kind = Kind::kNone;
  std::string json_schema;  // kJsonSchema: the schema as JSON text
  // kGrammar: the grammar (root rule "root"). When `lazy`, it only applies once the text matches one
  // of `trigger_patterns` (regular expressions over the generated text) or a `trigger_tokens`
  // token is sampled; before that the model writes freely. `prefill_tokens` (not lazy only) are
  // tokens the prompt already ends with that the grammar must accept before the first sampled one.
  std::string grammar;
  bool lazy = false;
  std::vector<std::string> trigger_patterns;
  std::vector<int32_t> trigger_tokens;
  std::vector<int32_t> prefill_tokens;
};

inline constexpr size_t kMaxStopSequences = 64;
inline constexpr size_t kMaxStopBytes = 1024;

struct GenerationRequest {
  std::string prompt;           // used when `tokens` is empty
  std::vector<int32_t> tokens;  // pre-tokenized prompt
  bool add_special = true;      // add BOS (as the model's vocabulary asks)
  bool parse_special = true;    // "<s>" in the prompt text becomes the special token
  bool render_special = true;   // show special tokens in the output text (as llama.cpp's tools do)
  // Special tokens shown in the text even when render_special is off (a chat format's tool-call
  // markers, which its parser needs to see).
  std::vector<int32_t> render_tokens;
  int max_tokens = 128;  // >= 1
  // Generation ends before the first occurrence of any; at most kMaxStopSequences of at most
  // kMaxStopBytes each (every one is looked for at every token, on the thread the model's sequences share).
  std::vector<std::string> stop;
  SamplingParams sampling;
  // Independent continuations of the one prompt (OpenAI's "n"), >= 1 and at most the model's
  // parallel sequences. The prompt is evaluated once and its cache shared by every choice; choice i
  // samples with its own sampler, seeded with sampling.seed + i (mod 2^32) when a seed is given (a
  // random seed each otherwise). The choices start together and the generation ends when the last
  // one has; the result lists them all (GenerationResult::choices). Cancelling cancels them all.
  int n_choices = 1;
  // Optional; at most one of the two. on_text suits one choice; on_piece tells the choice and
  // carries the logprobs. Both are called on the decoding thread, in order within a choice.
  TextCallback on_text;
  PieceCallback on_piece;
  // Called once when the result is ready (finished, cancelled or failed), on the thread that ended
  // it; Generation::wait() then returns at once. Lets a server answer without a thread per request.
  // Not called when start_generation itself fails (that error is returned instead).
  std::function<void()> on_done;
  int n_top_logits = 0;  // record the n largest raw logits at each generated token
  OutputConstraint constraint;
  // -1: off. 0..20: record each generated token's logprob and that many top alternatives
  // (GenerationResult::logprobs).
  int n_logprobs = -1;
  // Reuse the longest common prefix a slot's cache holds from an earlier request (llama-server's
  // cache_prompt). Off: the whole prompt is evaluated again. Either way the output is the same.
  bool cache_prompt = true;
  // Never end at an end-of-generation token (llama-server's ignore_eos): every EOG token of the
  // vocabulary is banned while sampling, so the generation runs to max_tokens unless a stop string,
  // the context or a cancel ends it first. For benchmarks that must generate an exact number of
  // tokens. Not with an output constraint (InvalidArgument): a constrained output must be able to end.
  bool ignore_eos = false;
  // Its place in the model's waiting line (fair_queue.h): class, flow (tenant) and weight. The runtime's
  // ModelQueue sets it from the request's tenant; the default is one interactive flow, first come
  // first served.
  Schedule schedule;
};

struct GenerationResult {
  std::string text;             // everything generated (stop string excluded)
  std::vector<int32_t> tokens;  // the generated tokens
  int n_prompt_tokens = 0;
  // Of n_prompt_tokens, those that came from the prompt cache (not evaluated again); the rest,
  // n_prompt_tokens - n_cached_tokens, were evaluated for this request.
  int n_cached_tokens = 0;
  FinishReason finish = FinishReason::kMaxTokens;
  double prompt_ms = 0;      // time from admission to the first generated token
  double generation_ms = 0;  // time from the first to the last generated token
  // Per generated token (when n_top_logits > 0): the largest raw logits, best first, as (token, logit).
  std::vector<std::vector<std::pair<int32_t, float>>> top_logits;
  // When n_logprobs >= 0: one entry per element of `tokens`, in order (an end-of-generation token
  // is not included, as it is not in `tokens` either).
  std::vector<TokenLogprob> logprobs;
  // n_choices > 1: every choice's result in order, each with the fields above; the fields above are
  // then choice 0's. n_prompt_tokens counts the prompt once (it was evaluated once). Empty for one
  // choice. Read the choices with choice_results(), the total tokens with completion_tokens().
  std::vector<GenerationResult> choices;
};

// The result's choices: `r.choices`, or `r` itself when the request had one choice.
std::span<const GenerationResult> choice_results(const GenerationResult& r);
// Tokens generated by all choices together (usage's completion_tokens).
int completion_tokens(const GenerationResult& r);

// Throughput of a text-generation model, measured as llama.cpp's llama-bench does: prompt processing
// (pp: n_prompt tokens in batches of n_batch) and generation (tg: n_gen single-token steps), each on a
// fresh cache of n_prompt + n_gen cells, one warm-up run, then `reps` timed runs; random tokens.
struct ThroughputOptions {
  int n_prompt = 512;  // 0: skip the pp test
  int n_gen = 128;     // 0: skip the tg test
  int reps = 5;
  int threads = 0;  // 0: hardware concurrency
  uint32_t n_batch = 2048;
  uint32_t n_ubatch = 512;
  bool threadpool = true;  // a polling threadpool between steps (llama-bench attaches one too)
};

struct ThroughputResult {
  std::string test;  // "pp512", "tg128"
  int n_prompt = 0;
  int n_gen = 0;
  std::vector<double> samples_ts;  // tokens/s of each timed run
  double avg_ts = 0;
  double stddev_ts = 0;  // sample standard deviation (as llama-bench)
};

// A generation in progress. cancel() is safe from any thread (the result then ends with kCancelled);
// wait() blocks until it ends. Destroying an unfinished Generation cancels it.
class Generation {
 public:
  virtual ~Generation() = default;
  virtual uint64_t id() const = 0;
  virtual void cancel() = 0;
  virtual bool done() const = 0;
  virtual Result<GenerationResult> wait() = 0;
};

}  // namespace gantry::backend

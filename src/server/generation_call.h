// One text generation in flight for an HTTP route (OpenAI, Ollama), private to src/server/.
//
// The shared part of every generating route: starting it through the model's queue (which admits it),
// streaming the text as it comes,
// cancelling when the client goes away or the deadline (--max-generation-time) passes, and answering
// once the engine is done, on a worker thread, without a thread per request. What the bytes look
// like (SSE chunks, NDJSON lines, the final body) is the protocol's, given as GenerationHooks.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "gantry/backend/generation.h"
#include "gantry/backend/model.h"
#include "gantry/runtime/model_queue.h"
#include "server_state.h"

namespace gantry::server {

// What a protocol does with a generation's output. Every hook runs at most once per piece / outcome.
struct GenerationHooks {
  // Streaming only, optional: right after the stream's header went out, before any text (OpenAI's
  // chat role chunk).
  std::function<void(Reply&)> stream_begun;
  // Streaming only: the bytes that carry one piece of text (whole SSE events or NDJSON lines; ""
  // sends nothing for this piece).
  std::function<std::string(std::string_view piece)> text_event;
  // Streaming, instead of text_event when set: the same for a piece that says which choice it
  // continues and carries its tokens' logprobs (requests with n_choices > 1 or logprobs need it).
  // Pieces may have empty text (logprobs only).
  std::function<std::string(const backend::TextPiece& piece)> piece_event;
  // The generation ended with a result (all its choices): answer it (the whole body, or the last
  // events and Reply::end_stream()).
  std::function<void(Reply&, const backend::GenerationResult&)> done;
  // It failed: `at_start` when start_generation refused it (a prompt longer than the context, a
  // schema the backend cannot enforce; no stream has begun: answer with an error status and body),
  // else while running (an error body, or an error event and Reply::end_stream() once streaming).
  std::function<void(Reply&, const Status&, bool at_start)> failed;
};

struct GenerationStart {
  std::string model;                   // the served name: metrics
  backend::GenerationRequest request;  // on_piece and on_done are set by start_generation_call
  bool stream = false;                 // stream the text as it comes
  std::string stream_content_type = "text/event-stream";
};

// Starts a generation through `model`'s queue (runtime::ModelQueue::generate, which admits it: a model
// at capacity fails it at start with ResourceExhausted, 429) and answers `reply` through `hooks` when
// it ends (or at once when it cannot start). Streaming begins as soon as the backend accepted (queued) the
// generation, so a client sees the header at once even when the model is busy, and a request refused
// at once gets its error status (400) rather than a 200 stream holding an error.
void start_generation_call(Server::State& s, std::shared_ptr<Reply> reply, runtime::ModelQueue& model,
                           GenerationStart start, GenerationHooks hooks);

}  // namespace gantry::server

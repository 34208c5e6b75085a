#include "generation_call.h"

#include <boost/asio/steady_timer.hpp>
#include <mutex>

namespace gantry::server {
namespace {
using Clock = std::chrono::steady_clock;

// One generation in flight: the handle, and how it ends (whichever of "done" and "started" comes
// last runs finish()).
struct GenerationCall {
  Server::State& server;
  std::shared_ptr<Reply> reply;
  std::string model;
  bool stream = false;
  std::string stream_content_type;
  std::once_flag stream_begun;
  GenerationHooks hooks;
  std::unique_ptr<backend::Generation> generation;
  std::unique_ptr<boost::asio::steady_timer> deadline;
  std::mutex mu;
  bool started = false;   // generation is set
  bool finished = false;  // on_done fired
  bool cancel_requested = false;
  bool first_text = true;

  GenerationCall(Server::State& s, std::shared_ptr<Reply> r) : server(s), reply(std::move(r)) {}

  // Sends the stream's header (and the protocol's first event) once: after the generation was
  // accepted, or at its first text if that comes sooner (on the decoding thread).
  void begin_stream() {
    std::call_once(stream_begun, [this] {
      reply->begin_stream(stream_content_type);
      if (hooks.stream_begun) hooks.stream_begun(*reply);
    });
  }

  // Each piece of generated text, on the decoding thread: the first one times TTFT; a stream sends
  // it as an event. False (stop generating) once the client is gone.
  bool text(const backend::TextPiece& piece) {
    if (first_text) {
      first_text = false;
      server.metrics.time_to_first_token(model, Clock::now() - reply->received());
    }
    if (!stream) return true;
    if (!hooks.piece_event && piece.text.empty()) return true;
    begin_stream();
    std::string bytes = hooks.piece_event ? hooks.piece_event(piece) : hooks.text_event(piece.text);
    if (bytes.empty()) return true;  // the protocol holds the piece back (a tool call being parsed)
    return reply->event(std::move(bytes));
  }

  void cancel() {
    std::lock_guard lock(mu);
    cancel_requested = true;
    if (generation) generation->cancel();
  }

  void finish() {
    auto result = generation->wait();
    if (deadline) deadline->cancel();
    if (!result.ok()) {
      hooks.failed(*reply, result.status(), false);
      return;
    }
    const backend::GenerationResult& r = *result;
    server.metrics.tokens(
        model, static_cast<uint64_t>(r.n_prompt_tokens), static_cast<uint64_t>(backend::completion_tokens(r)),
        std::chrono::duration<double, std::milli>(r.generation_ms), static_cast<uint64_t>(r.n_cached_tokens));
    hooks.done(*reply, r);
  }
};

}  // namespace

void start_generation_call(Server::State& s, std::shared_ptr<Reply> reply, runtime::ModelQueue& model,
                           GenerationStart start, GenerationHooks hooks) {
  auto call = std::make_shared<GenerationCall>(s, reply);
  call->model = std::move(start.model);
  call->stream = start.stream;
  call->stream_content_type = std::move(start.stream_content_type);
  call->hooks = std::move(hooks);
  backend::GenerationRequest g = std::move(start.request);

  std::weak_ptr<GenerationCall> weak = call;
  g.on_text = nullptr;
  g.on_piece = [weak](const backend::TextPiece& piece) {
    auto c = weak.lock();
    return c && c->text(piece);
  };
  // Holds the call until the engine is done with it, then hands it to the worker that answers: the
  // engine's copy of the request holds nothing afterwards, so the call (and the model handle a
  // protocol's hooks may hold) is never destroyed on the decoding thread.
  g.on_done = [held = call]() mutable {
    auto call = std::move(held);
    if (!call) return;
    post_task(call->server.workers, "generation end", [call] {
      {
        std::lock_guard lock(call->mu);
        call->finished = true;
        if (!call->started) return;  // start_generation has not returned yet: it runs finish()
      }
      call->finish();
    });
  };
  reply->exchange().on_client_gone([weak] {
    if (auto c = weak.lock()) c->cancel();
  });
  // The stream's header goes out only once the backend accepted the request, so what it refuses at
  // once (a prompt longer than the context, a schema too large) is a plain 400 on streams too.
  auto gen = model.generate(std::move(g), reply->admission());
  if (!gen.ok()) {
    call->hooks.failed(*reply, gen.status(), true);
    return;
  }
  if (call->stream) call->begin_stream();
  // --max-generation-time, or the request's own deadline when sooner (the runtime also stops it at its
  // next token past the deadline; this timer ends one that waits or evaluates its prompt that long).
  auto until = Clock::now() + s.options.max_generation_time;
  if (const auto& d = reply->admission().deadline; d && *d < until) until = *d;
  call->deadline = std::make_unique<boost::asio::steady_timer>(s.workers, until);
  call->deadline->async_wait([weak](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: the generation ended first
    if (auto c = weak.lock()) c->cancel();
  });
  bool run_finish = false;
  {
    std::lock_guard lock(call->mu);
    call->generation = std::move(*gen);
    call->started = true;
    if (call->cancel_requested) call->generation->cancel();
    run_finish = call->finished;
  }
  if (run_finish) call->finish();
}

}  // namespace gantry::server

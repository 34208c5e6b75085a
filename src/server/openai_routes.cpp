// OpenAI-compatible routes: /v1/models, /v1/chat/completions and /v1/completions (plain or streamed
// as server-sent events, on the model's continuous-batching engine), /v1/embeddings.
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>
#include <random>

#include "gantry/server/openai_codec.h"
#include "server_state.h"

namespace gantry::server {
namespace {
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string completion_id(bool chat) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = chat ? "chatcmpl-" : "cmpl-";
  for (int i = 0; i < 24; ++i) id += kHex[rng() & 15];
  return id;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send_api_error(Reply& reply, const openai::ApiError& e) {
  HttpResponse r;
  r.status = e.http_status;
  r.body = openai::error_body(e);
  if (e.http_status == 429 || e.http_status == 503) r.headers.emplace_back("Retry-After", "1");
  reply.send(std::move(r));
}

// A failed generation: the error body, or (once a stream began) a final error event, then [DONE].
void send_generation_error(Reply& reply, bool streaming, const openai::ApiError& e) {
  if (!streaming) {
    send_api_error(reply, e);
    return;
  }
  reply.event(openai::sse_error(e));
  reply.event(std::string(openai::sse_done()));
  reply.end_stream(e.http_status);
}

// One generation in flight: the handle, and how it ends (whichever of "done" and "started" comes
// last runs finish()).
struct GenerationCall {
  Server::State& server;
  std::shared_ptr<Reply> reply;
  openai::TextRequest request;
  std::string id;
  int64_t created = unix_now();
  bool chat = true;
  std::unique_ptr<backend::Generation> generation;
  std::unique_ptr<boost::asio::steady_timer> deadline;
  std::mutex mu;
  bool started = false;   // generation is set
  bool finished = false;  // on_done fired
  bool cancel_requested = false;
  bool first_text = true;

  GenerationCall(Server::State& s, std::shared_ptr<Reply> r) : server(s), reply(std::move(r)) {}

  // Each piece of generated text, on the decoding thread: the first one times TTFT; a stream sends
  // it as an event. False (stop generating) once the client is gone.
  bool text(std::string_view piece) {
    if (first_text) {
      first_text = false;
      server.metrics.time_to_first_token(request.model, Clock::now() - reply->received());
    }
    if (!request.stream) return true;
    return reply->event(chat ? openai::chat_chunk_text(id, request.model, created, piece)
                             : openai::completion_chunk_text(id, request.model, created, piece));
  }

  void cancel() {
    std::lock_guard lock(mu);
    cancel_requested = true;
    if (generation) generation->cancel();
  }

  void finish() {
    auto result = generation->wait();
    if (deadline) deadline->cancel();
    server.release(request.model);
    const bool stream = request.stream;
    if (!result.ok()) {
      send_generation_error(*reply, stream, openai::api_error(result.status()));
      return;
    }
    const backend::GenerationResult& r = *result;
    server.metrics.tokens(request.model, static_cast<uint64_t>(r.n_prompt_tokens), r.tokens.size(),
                          std::chrono::duration<double, std::milli>(r.generation_ms));
    if (!stream) {
      reply->json(200, chat ? openai::chat_response(id, request.model, created, r, request)
                            : openai::completion_response(id, request.model, created, r, request));
      return;
    }
    reply->event(chat ? openai::chat_chunk_finish(id, request.model, created, r.finish)
                      : openai::completion_chunk_finish(id, request.model, created, r.finish));
    if (request.include_usage) {
      reply->event(openai::usage_chunk(id, request.model, created, request.endpoint, r.n_prompt_tokens,
                                       static_cast<int>(r.tokens.size())));
    }
    reply->event(std::string(openai::sse_done()));
    reply->end_stream(200);
  }
};

}  // namespace

void openai_models(Server::State& s, std::shared_ptr<Reply> reply) {
  const int64_t created =
      std::chrono::duration_cast<std::chrono::seconds>(s.started.time_since_epoch()).count();
  std::vector<openai::ModelEntry> entries;
  for (const auto& e : s.repository.entries()) entries.push_back({e.name, created, "gantry"});
  if (reply->model() != "-") {  // GET /v1/models/{model}
    for (const auto& e : entries) {
      if (e.id == reply->model()) {
        reply->json(
            200,
            json{{"id", e.id}, {"object", "model"}, {"created", e.created}, {"owned_by", e.owned_by}}.dump(
                -1, ' ', false, json::error_handler_t::replace));
        return;
      }
    }
    reply->error(404, "model '" + reply->model() + "' is not served here", "model", "model_not_found");
    return;
  }
  reply->json(200, openai::models_response(entries));
}

void openai_text(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest request, bool chat) {
  auto parsed = openai::parse_text_request(request.body,
                                           chat ? openai::Endpoint::kChat : openai::Endpoint::kCompletion);
  if (auto* e = std::get_if<openai::ApiError>(&parsed)) {
    send_api_error(*reply, *e);
    return;
  }
  auto call = std::make_shared<GenerationCall>(s, reply);
  call->request = std::move(std::get<openai::TextRequest>(parsed));
  call->chat = chat;
  call->id = completion_id(chat);
  const std::string& name = call->request.model;
  reply->set_model(name);

  auto handle = s.model(name);
  if (!handle.ok()) {
    const int code = http_status_for(handle.status());
    reply->error(code, handle.status().message(), "model", code == 404 ? "model_not_found" : "");
    return;
  }
  backend::Model& model = handle->model();
  const backend::ModelMetadata& md = model.metadata();
  if (md.properties.find("n_ctx") == md.properties.end()) {
    reply->error(
        400,
        "model '" + name + "' does not generate text (" + md.backend + "); use /v2/models/" + name + "/infer",
        "model", "model_not_text_generation");
    return;
  }
  if (!s.admit(name, static_cast<size_t>(std::max<int64_t>(1, md.max_batch)))) {
    reply->error(429, "model '" + name + "' is at capacity (" + std::to_string(md.max_batch) +
                          " generating, " + std::to_string(s.options.max_queue) +
                          " waiting; --parallel / --max-queue); retry later");
    return;
  }
  backend::GenerationRequest g = call->request.generation;
  if (chat) {
    auto prompt = model.format_chat(call->request.messages, true);
    if (!prompt.ok()) {
      s.release(name);
      reply->error(400, prompt.status().message(), "messages");
      return;
    }
    g.prompt = std::move(*prompt);
  } else {
    g.prompt = call->request.prompt;
  }
  if (g.max_tokens <= 0) g.max_tokens = s.options.max_tokens_default;
  g.render_special = false;

  std::weak_ptr<GenerationCall> weak = call;
  g.on_text = [weak](std::string_view text) {
    auto c = weak.lock();
    return c && c->text(text);
  };
  // Holds the call until the engine is done with it (the engine drops the request after on_done).
  g.on_done = [call] {
    boost::asio::post(call->server.workers, [call] {
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
  if (call->request.stream) {
    reply->begin_stream();
    if (chat) reply->event(openai::chat_chunk_role(call->id, name, call->created));
  }
  auto gen = model.start_generation(std::move(g));
  if (!gen.ok()) {
    s.release(name);
    // A prompt longer than the context is the request's fault: 400 with both numbers.
    send_generation_error(*reply, call->request.stream,
                          openai::api_error(gen.status(), chat ? "messages" : "prompt"));
    return;
  }
  call->deadline = std::make_unique<boost::asio::steady_timer>(s.workers, s.options.max_generation_time);
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

void openai_embeddings(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest request) {
  auto parsed = openai::parse_embedding_request(request.body);
  if (auto* e = std::get_if<openai::ApiError>(&parsed)) {
    send_api_error(*reply, *e);
    return;
  }
  auto& req = std::get<openai::EmbeddingRequest>(parsed);
  reply->set_model(req.model);
  auto handle = s.model(req.model);
  if (!handle.ok()) {
    const int code = http_status_for(handle.status());
    reply->error(code, handle.status().message(), "model", code == 404 ? "model_not_found" : "");
    return;
  }
  if (!s.admit(req.model, 1)) {
    reply->error(429, "model '" + req.model + "' is at capacity; retry later");
    return;
  }
  auto vectors = handle->model().embed(req.input, true);
  s.release(req.model);
  if (!vectors.ok()) {
    send_api_error(*reply, openai::api_error(vectors.status(), "input"));
    return;
  }
  int tokens = 0;
  for (const auto& text : req.input) {
    auto n = handle->model().token_count(text);
    if (n.ok()) tokens += *n;
  }
  reply->json(200, openai::embeddings_response(req.model, *vectors, req.base64, tokens));
}

}  // namespace gantry::server

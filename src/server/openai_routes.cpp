// OpenAI-compatible routes: /v1/models, /v1/chat/completions and /v1/completions (plain or streamed
// as server-sent events, on the model's continuous-batching engine), /v1/embeddings.
#include <nlohmann/json.hpp>

#include "gantry/backend/chat_generation.h"
#include "gantry/core/random_id.h"
#include "gantry/protocol/openai_codec.h"
#include "gantry/runtime/model_queue.h"
#include "generation_call.h"
#include "route_table.h"
#include "server_state.h"

namespace gantry::server {
namespace {
using json = nlohmann::json;

std::string completion_id(bool chat) { return random_hex_id(chat ? "chatcmpl-" : "cmpl-"); }

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
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

// What a text request's hooks share: one chat parser per choice and, while streaming, each choice's
// logprobs not sent yet (chat) or text offset (completions). Touched by one thread at a time: the
// decoding thread while it generates, then the worker that answers.
struct TextStreamState {
  std::vector<std::shared_ptr<backend::ChatOutputParser>> parsers;
  std::vector<std::vector<backend::TokenLogprob>> logprobs;
  std::vector<size_t> text_offset;
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
  auto parsed = openai::parse_text_request(
      request.body, chat ? openai::Endpoint::kChat : openai::Endpoint::kCompletion, s.options.sampling);
  if (auto* e = std::get_if<openai::ApiError>(&parsed)) {
    send_api_error(*reply, *e);
    return;
  }
  // Shared by the hooks, which answer after this function has returned.
  auto req = std::make_shared<const openai::TextRequest>(std::move(std::get<openai::TextRequest>(parsed)));
  const std::string id = completion_id(chat);
  const int64_t created = unix_now();
  const std::string& name = req->model;
  reply->set_model(name);

  auto handle = s.model(name);
  if (!handle.ok()) {
    const int code = http_status_for(handle.status());
    reply->error(code, handle.status().message(), "model", code == 404 ? "model_not_found" : "");
    return;
  }
  const backend::Model& model = handle->model();
  if (auto refused = backend::check_generates(model, name)) {
    send_api_error(*reply, openai::chat_refusal_error(*refused, refused->field));
    return;
  }
  const int n = std::max(1, req->generation.n_choices);
  const int sequences = model.text()->text_info().sequences;
  if (n > sequences) {
    reply->error(400,
                 "'n' is " + std::to_string(n) + " but model '" + name + "' generates at most " +
                     std::to_string(sequences) + " sequences at once (--parallel)",
                 "n");
    return;
  }
  GenerationStart start;
  start.model = name;
  start.stream = req->stream;
  backend::GenerationRequest& g = start.request;
  // A chat's answer is parsed back (content, reasoning, tool calls) by the model's chat layer, each
  // choice by its own parser.
  auto stream = std::make_shared<TextStreamState>();
  if (chat) {
    auto made = backend::prepare_chat(model, name, req->chat, req->generation, n);
    if (auto* refused = std::get_if<backend::ChatRefusal>(&made)) {
      send_api_error(*reply, openai::chat_refusal_error(*refused, refused->field));
      return;
    }
    auto& prepared = std::get<backend::ChatGeneration>(made);
    g = std::move(prepared.request);
    stream->parsers = std::move(prepared.parsers);
  } else {
    g = req->generation;
    g.prompt = req->prompt;
    g.tokens = req->prompt_tokens;
    g.render_special = false;
  }
  stream->logprobs.resize(static_cast<size_t>(n));
  stream->text_offset.resize(static_cast<size_t>(n));
  if (g.max_tokens <= 0) g.max_tokens = s.options.max_tokens_default;

  GenerationHooks hooks;
  if (chat) {
    hooks.stream_begun = [id, name, created, n, usage_null = req->include_usage](Reply& r) {
      for (int i = 0; i < n; ++i) r.event(openai::chat_chunk_role(id, name, created, i, usage_null));
    };
  }
  // Runs on the decoding thread, piece after piece; `stream` is the request's alone.
  hooks.piece_event = [req, id, created, chat, stream](const backend::TextPiece& piece) {
    const auto i = static_cast<size_t>(piece.choice);
    openai::ChunkChoice c;
    c.index = piece.choice;
    c.usage_null = req->include_usage;
    c.logprobs = req->logprobs;
    c.top_logprobs = req->top_logprobs;
    if (!chat) {
      c.tokens = piece.logprobs;
      c.text_offset = stream->text_offset[i];
      for (const auto& t : piece.logprobs) stream->text_offset[i] += t.text.size();
      if (piece.text.empty() && piece.logprobs.empty()) return std::string();
      return openai::completion_chunk_text(id, req->model, created, piece.text, c);
    }
    // The logprobs ride on the next delta the parser lets out (a tool call's text may be held back).
    auto& pending = stream->logprobs[i];
    pending.insert(pending.end(), piece.logprobs.begin(), piece.logprobs.end());
    std::string events;
    for (const auto& d : stream->parsers[i]->add(piece.text, false)) {
      c.tokens = pending;
      events += openai::chat_chunk_delta(id, req->model, created, d, c);
      pending.clear();
      c.logprobs = false;  // the piece's later deltas carry none
    }
    return events;
  };
  Server::State* state = &s;
  const size_t owner = s.owner(request);
  // store: true keeps the completion as a whole body (a streamed one too, once its parsers are done).
  auto keep = [req, id, created, stream, state, owner](const backend::GenerationResult& r,
                                                       const std::string* body) {
    if (!req->store) return;
    if (body) return keep_chat_completion(*state, owner, id, *body, req->chat.messages);
    std::vector<backend::ChatOutput> outputs;
    for (const auto& p : stream->parsers) outputs.push_back(p->output());
    keep_chat_completion(*state, owner, id, openai::chat_response(id, req->model, created, r, outputs, *req),
                         req->chat.messages);
  };
  hooks.done = [req, id, created, chat, stream, keep](Reply& reply, const backend::GenerationResult& r) {
    const auto results = backend::choice_results(r);
    if (!req->stream) {
      std::vector<backend::ChatOutput> outputs;
      if (chat) {
        for (size_t i = 0; i < results.size() && i < stream->parsers.size(); ++i) {
          stream->parsers[i]->add(results[i].text, true);
          outputs.push_back(stream->parsers[i]->output());
        }
      }
      std::string body = chat ? openai::chat_response(id, req->model, created, r, outputs, *req)
                              : openai::completion_response(id, req->model, created, r, *req);
      if (chat) keep(r, &body);
      reply.json(200, std::move(body));
      return;
    }
    for (size_t i = 0; i < results.size(); ++i) {
      openai::ChunkChoice c;
      c.index = static_cast<int>(i);
      c.usage_null = req->include_usage;
      if (chat) {
        auto& parser = *stream->parsers[i];
        auto& pending = stream->logprobs[i];
        c.logprobs = req->logprobs;
        for (const auto& d : parser.add("", true)) {
          c.tokens = pending;
          reply.event(openai::chat_chunk_delta(id, req->model, created, d, c));
          pending.clear();
          c.logprobs = false;
        }
        c.logprobs = req->logprobs && !pending.empty();
        c.tokens = pending;
        reply.event(openai::chat_chunk_finish(
            id, req->model, created, openai::chat_finish_reason(results[i].finish, parser.output()), c));
      } else {
        reply.event(openai::completion_chunk_finish(id, req->model, created, results[i].finish, c));
      }
    }
    if (chat) keep(r, nullptr);
    if (req->include_usage) {
      reply.event(openai::usage_chunk(id, req->model, created, req->endpoint, r.n_prompt_tokens,
                                      backend::completion_tokens(r), r.n_cached_tokens));
    }
    reply.event(std::string(openai::sse_done()));
    reply.end_stream(200);
  };
  hooks.failed = [req, chat](Reply& reply, const Status& st, bool at_start) {
    // Refused at start (no stream has begun): a prompt longer than the context (400 with both numbers
    // and code "context_length_exceeded"), or an output constraint the backend refuses.
    std::string param;
    if (st.code() == StatusCode::kResourceExhausted) {
      // the model at capacity: nothing in the request is at fault
    } else if (at_start && backend::is_context_length_exceeded(st)) {
      param = chat ? "messages" : "prompt";
    } else if (at_start && st.message().find("logit_bias") != std::string::npos) {
      param = "logit_bias";
    } else if (at_start && st.message().find("n_choices") != std::string::npos) {
      param = "n";
    } else if (at_start && !req->chat.tools.empty()) {
      param = "tools";
    } else if (at_start && req->generation.constraint.kind != backend::OutputConstraint::Kind::kNone) {
      param = "response_format";
    }
    send_generation_error(reply, req->stream && !at_start, openai::api_error(st, std::move(param)));
  };
  start_generation_call(s, reply, handle->queue(), std::move(start), std::move(hooks));
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
  // The model's own pooling decides (as llama-server does): none gives no vector per text, and a
  // reranker's (rank) output is a score.
  if (const backend::TextModel* text = handle->model().text(); text && !text->text_info().embeds) {
    const std::string& pooling = text->text_info().pooling;
    reply->error(400,
                 "model '" + req.model + "' gives no embeddings: its pooling is " + pooling +
                     (pooling == "rank" ? " (a reranking model: use /v1/rerank)"
                                        : " (one vector per token, none per text)"),
                 "model", "model_not_embedding");
    return;
  }
  auto vectors = handle->queue().embed(req.input, true, work_cancel(s, *reply), reply->admission());
  if (!vectors.ok()) {
    if (vectors.status().code() == StatusCode::kCancelled)
      GANTRY_LOG_INFO("embeddings on '{}' cancelled after its client left or the server stopped ({} inputs)",
                      req.model, req.input.size());
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

// The OpenAI routes under /v1, and without it as llama-server serves them (the Responses API and rerank have
// tables of their own).
namespace {
using Runs = Route::Runs;

void models(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams&) {
  // Anthropic's SDK sends anthropic-version on every request: its Models API shape.
  if (request.header("anthropic-version")) {
    const std::string model = reply->model() == "-" ? "" : reply->model();
    anthropic_models(s, std::move(reply), model);
    return;
  }
  openai_models(s, std::move(reply));
}

void chat(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams&) {
  openai_text(s, std::move(reply), std::move(request), true);
}

void completions(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams&) {
  openai_text(s, std::move(reply), std::move(request), false);
}

void embeddings(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams&) {
  openai_embeddings(s, std::move(reply), std::move(request));
}

constexpr Protocol kOpenai = Protocol::kOpenai;
const Route kRoutes[] = {
    {.method = "GET", .pattern = "/v1/models", .protocol = kOpenai, .runs = Runs::kControl, .handle = models},
    {.method = "GET",
     .pattern = "/v1/models/{model}",
     .protocol = kOpenai,
     .runs = Runs::kControl,
     .handle = models},
    {.method = "POST",
     .pattern = "/v1/chat/completions",
     .protocol = kOpenai,
     .runs = Runs::kWorkers,
     .handle = chat,
     .inference = true},
    {.method = "POST",
     .pattern = "/v1/completions",
     .protocol = kOpenai,
     .runs = Runs::kWorkers,
     .handle = completions,
     .inference = true},
    {.method = "POST",
     .pattern = "/v1/embeddings",
     .protocol = kOpenai,
     .runs = Runs::kWorkers,
     .handle = embeddings,
     .inference = true},
    // The same without /v1, as llama-server serves them (its /completions is its native completion:
    // llama_server_routes.cpp).
    {.method = "GET", .pattern = "/models", .protocol = kOpenai, .runs = Runs::kControl, .handle = models},
    {.method = "POST",
     .pattern = "/chat/completions",
     .protocol = kOpenai,
     .runs = Runs::kWorkers,
     .handle = chat,
     .inference = true},
    {.method = "POST",
     .pattern = "/embeddings",
     .protocol = kOpenai,
     .runs = Runs::kWorkers,
     .handle = embeddings,
     .inference = true},
};
}  // namespace

std::span<const Route> openai_routes() { return kRoutes; }

}  // namespace gantry::server

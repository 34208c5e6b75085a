// The OpenAI Responses API: POST /v1/responses (whole or streamed as typed server-sent events, on the
// model's continuous-batching engine, through the one chat entry like /v1/chat/completions), and
// GET / DELETE /v1/responses/{id} over the server's ResponseStore.
#include <chrono>
#include <nlohmann/json.hpp>

#include "gantry/backend/chat_generation.h"
#include "gantry/core/json.h"
#include "gantry/protocol/responses_codec.h"
#include "generation_call.h"
#include "route_table.h"
#include "server_state.h"

namespace gantry::server {
namespace {
using json = nlohmann::json;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What the hooks share: the request, the response's fixed parts, the parser and (streaming) the encoder.
struct ResponseCall {
  responses::ResponsesRequest request;
  responses::ResponseHead head;
  std::vector<backend::ChatMessage> conversation;  // the history + input, without the instructions
  std::shared_ptr<backend::ChatOutputParser> parser;
  std::unique_ptr<responses::StreamEncoder> encoder;
  size_t owner = 0;                    // ApiKeys::owner() of the request: who may read what is kept
  runtime::ModelHandle handle;         // holds the model (its text facet counts reasoning tokens at the end)
  backend::TextModel* text = nullptr;  // handle's facet
};

responses::Usage usage_of(const ResponseCall& c, const backend::GenerationResult& r,
                          const backend::ChatOutput& out) {
  responses::Usage u;
  u.input_tokens = r.n_prompt_tokens;
  u.cached_tokens = r.n_cached_tokens;
  u.output_tokens = static_cast<int>(r.tokens.size());
  if (!out.reasoning_content.empty()) {
    auto n = c.text->token_count(out.reasoning_content);
    if (n.ok()) u.reasoning_tokens = std::min(*n, u.output_tokens);
  }
  return u;
}

void keep(Server::State& s, const ResponseCall& c, const json& response, const backend::ChatOutput& out) {
  if (!c.request.store) return;
  auto stored = std::make_shared<StoredResponse>();
  stored->id = c.head.id;
  stored->owner = c.owner;
  stored->body = dump_json(response);
  stored->conversation = c.conversation;
  stored->conversation.push_back(responses::assistant_message(out));
  s.responses.put(std::move(stored));
}

}  // namespace

void responses_create(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest request) {
  auto parsed = responses::parse_request(request.body);
  if (auto* e = std::get_if<openai::ApiError>(&parsed)) {
    send_api_error(*reply, *e);
    return;
  }
  auto call = std::make_shared<ResponseCall>();
  call->request = std::move(std::get<responses::ResponsesRequest>(parsed));
  call->owner = s.api_keys()->owner(request);
  const responses::ResponsesRequest& req = call->request;
  const std::string& name = req.model;
  reply->set_model(name);

  // The conversation: the history previous_response_id continues, then this input. Another key's
  // response is not found, as if it did not exist.
  if (!req.previous_response_id.empty()) {
    auto previous = s.responses.get(req.previous_response_id, call->owner);
    if (!previous) {
      reply->error(404,
                   "previous response '" + req.previous_response_id.substr(0, 80) +
                       "' not found (never made, made with store: false, deleted, or evicted; the server "
                       "keeps the last --responses-store " +
                       std::to_string(s.responses.capacity()) + ")",
                   "previous_response_id", "previous_response_not_found");
      return;
    }
    call->conversation = previous->conversation;
  }
  call->conversation.insert(call->conversation.end(), req.chat.messages.begin(), req.chat.messages.end());

  auto handle = s.model(name);
  if (!handle.ok()) {
    const int code = http_status_for(handle.status());
    reply->error(code, handle.status().message(), "model", code == 404 ? "model_not_found" : "");
    return;
  }
  call->handle = std::move(*handle);
  call->text = call->handle.model().text();

  backend::ChatRequest chat = req.chat;
  chat.messages.clear();
  if (!req.instructions.empty()) chat.messages.emplace_back("system", req.instructions);
  chat.messages.insert(chat.messages.end(), call->conversation.begin(), call->conversation.end());
  responses::resolve_tool_names(chat.messages);
  auto made = backend::prepare_chat(call->handle.model(), name, chat, req.generation);
  if (auto* refused = std::get_if<backend::ChatRefusal>(&made)) {
    send_api_error(*reply, openai::chat_refusal_error(*refused, responses::map_chat_field(refused->field)));
    return;
  }
  auto& prepared = std::get<backend::ChatGeneration>(made);
  call->parser = std::move(prepared.parsers.front());
  GenerationStart start;
  start.model = name;
  start.stream = req.stream;
  start.request = std::move(prepared.request);
  if (start.request.max_tokens <= 0) start.request.max_tokens = s.options.max_tokens_default;

  call->head.id = responses::new_id("resp");
  call->head.model = name;
  call->head.created_at = unix_now();
  call->head.echo = req.echo;
  if (req.stream) call->encoder = std::make_unique<responses::StreamEncoder>(call->head);

  GenerationHooks hooks;
  hooks.stream_begun = [call](Reply& r) { r.event(call->encoder->begin()); };
  hooks.text_event = [call](std::string_view piece) {
    return call->encoder->add(call->parser->add(piece, false));
  };
  Server::State* state = &s;
  hooks.done = [call, state](Reply& reply, const backend::GenerationResult& r) {
    if (!call->request.stream) {
      call->parser->add(r.text, true);
      const backend::ChatOutput& out = call->parser->output();
      json response = responses::response_object(call->head, out, r.finish, usage_of(*call, r, out));
      keep(*state, *call, response, out);
      reply.json(200, dump_json(response));
      return;
    }
    std::string events = call->encoder->add(call->parser->add("", true));
    const backend::ChatOutput& out = call->parser->output();
    events += call->encoder->finish(r.finish, usage_of(*call, r, out));
    keep(*state, *call, call->encoder->response(), call->encoder->output());
    reply.event(std::move(events));
    reply.end_stream(200);
  };
  hooks.failed = [call](Reply& reply, const Status& st, bool at_start) {
    // Refused at start (no stream has begun): a prompt longer than the context, or an output
    // constraint (tool grammar, text.format schema) the backend refuses.
    std::string param;
    const auto& req = call->request;
    if (st.code() == StatusCode::kResourceExhausted) {
      // the model at capacity: nothing in the request is at fault
    } else if (at_start && backend::is_context_length_exceeded(st)) {
      param = "input";
    } else if (at_start && !req.chat.tools.empty()) {
      param = "tools";
    } else if (at_start && req.generation.constraint.kind != backend::OutputConstraint::Kind::kNone) {
      param = "text.format";
    }
    const openai::ApiError e = openai::api_error(st, std::move(param));
    if (!req.stream || at_start) {
      send_api_error(reply, e);
      return;
    }
    reply.event(call->encoder->fail(e));
    reply.end_stream(e.http_status);
  };
  start_generation_call(s, reply, call->handle.queue(), std::move(start), std::move(hooks));
}

// Another key's response answers exactly as one never made.
void responses_stored(Server::State& s, std::shared_ptr<Reply> reply, std::string id, size_t owner,
                      bool erase) {
  const std::string shown = id.substr(0, 80);
  if (erase) {
    if (!s.responses.erase(id, owner)) {
      reply->error(404, "response '" + shown + "' not found", "response_id", "response_not_found");
      return;
    }
    reply->json(200, responses::deleted_body(id));
    return;
  }
  auto stored = s.responses.get(id, owner);
  if (!stored) {
    reply->error(
        404, "response '" + shown + "' not found (never made, made with store: false, deleted, or evicted)",
        "response_id", "response_not_found");
    return;
  }
  reply->json(200, stored->body);
}

// The Responses API: create, and a kept response read or deleted.
namespace {
void create(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams&) {
  responses_create(s, std::move(reply), std::move(request));
}

void get(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams& p) {
  responses_stored(s, std::move(reply), p.id, s.api_keys()->owner(request), false);
}

void erase(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams& p) {
  responses_stored(s, std::move(reply), p.id, s.api_keys()->owner(request), true);
}

constexpr Protocol kOpenai = Protocol::kOpenai;
const Route kRoutes[] = {
    {.method = "POST",
     .pattern = "/v1/responses",
     .protocol = kOpenai,
     .runs = Route::Runs::kWorkers,
     .handle = create,
     .inference = true},
    // GET first: another method on /v1/responses/{id} is answered 405 "takes GET".
    {.method = "GET",
     .pattern = "/v1/responses/{id}",
     .protocol = kOpenai,
     .runs = Route::Runs::kControl,
     .handle = get},
    {.method = "DELETE",
     .pattern = "/v1/responses/{id}",
     .protocol = kOpenai,
     .runs = Route::Runs::kControl,
     .handle = erase},
};
}  // namespace

std::span<const Route> responses_routes() { return kRoutes; }

}  // namespace gantry::server

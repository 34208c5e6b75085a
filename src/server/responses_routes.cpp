// The OpenAI Responses API: POST /v1/responses (whole or streamed as typed server-sent events, on the
// model's continuous-batching engine, through the one chat entry like /v1/chat/completions), GET /
// DELETE /v1/responses/{id}, GET .../{id}/input_items and POST .../{id}/cancel (refused: nothing runs in
// the background) over the server's ResponseStore, POST /v1/responses/input_tokens, and POST
// /v1/responses/compact (refused: OpenAI's compaction items are encrypted state).
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
  size_t owner = 0;                    // runtime::ApiKeys::owner() of the request: who may read what is kept
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
  stored->input_items = dump_json(responses::input_items(c.request.chat.messages));
  stored->conversation.push_back(responses::assistant_message(out));
  s.responses.put(std::move(stored));
}

}  // namespace

namespace {

// The conversation: the history previous_response_id continues, then this input. Another key's
// response is not found, as if it did not exist. False: answered 404.
bool conversation_of(Server::State& s, Reply& reply, const responses::ResponsesRequest& req, size_t owner,
                     std::vector<backend::ChatMessage>& out) {
  if (!req.previous_response_id.empty()) {
    auto previous = s.responses.get(req.previous_response_id, owner);
    if (!previous) {
      reply.error(404,
                  "previous response '" + req.previous_response_id.substr(0, 80) +
                      "' not found (never made, made with store: false, deleted, or evicted; the server "
                      "keeps the last --responses-store " +
                      std::to_string(s.responses.capacity()) + ")",
                  "previous_response_id", "previous_response_not_found");
      return false;
    }
    out = previous->conversation;
  }
  out.insert(out.end(), req.chat.messages.begin(), req.chat.messages.end());
  return true;
}

// The chat a request makes: its instructions as the system message, then the conversation.
backend::ChatRequest chat_of(const responses::ResponsesRequest& req,
                             const std::vector<backend::ChatMessage>& conversation) {
  backend::ChatRequest chat = req.chat;
  chat.messages.clear();
  if (!req.instructions.empty()) chat.messages.emplace_back("system", req.instructions);
  chat.messages.insert(chat.messages.end(), conversation.begin(), conversation.end());
  responses::resolve_tool_names(chat.messages);
  return chat;
}

}  // namespace

// POST /v1/responses/input_tokens: what a create request with this body would put in the model's
// context, in tokens (its template, tools and instructions included), without generating.
void responses_input_tokens(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest request) {
  auto parsed = responses::parse_request(request.body);
  if (auto* e = std::get_if<openai::ApiError>(&parsed)) {
    send_api_error(*reply, *e);
    return;
  }
  const auto& req = std::get<responses::ResponsesRequest>(parsed);
  reply->set_model(req.model);
  std::vector<backend::ChatMessage> conversation;
  if (!conversation_of(s, *reply, req, s.owner(request), conversation)) return;
  auto handle = s.model(req.model);
  if (!handle.ok()) {
    const int code = http_status_for(handle.status());
    reply->error(code, handle.status().message(), "model", code == 404 ? "model_not_found" : "");
    return;
  }
  auto made = backend::prepare_chat(handle->model(), req.model, chat_of(req, conversation), req.generation);
  if (auto* refused = std::get_if<backend::ChatRefusal>(&made)) {
    send_api_error(*reply, openai::chat_refusal_error(*refused, responses::map_chat_field(refused->field)));
    return;
  }
  const auto& g = std::get<backend::ChatGeneration>(made).request;
  int tokens = static_cast<int>(g.tokens.size());
  if (g.tokens.empty()) {
    auto n = handle->model().token_count(g.prompt);
    if (!n.ok()) {
      send_api_error(*reply, openai::api_error(n.status(), "input"));
      return;
    }
    tokens = *n;
  }
  reply->json(200, responses::input_tokens_body(tokens));
}

void responses_create(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest request) {
  auto parsed = responses::parse_request(request.body);
  if (auto* e = std::get_if<openai::ApiError>(&parsed)) {
    send_api_error(*reply, *e);
    return;
  }
  auto call = std::make_shared<ResponseCall>();
  call->request = std::move(std::get<responses::ResponsesRequest>(parsed));
  call->owner = s.owner(request);
  const responses::ResponsesRequest& req = call->request;
  const std::string& name = req.model;
  reply->set_model(name);

  if (!conversation_of(s, *reply, req, call->owner, call->conversation)) return;

  auto handle = s.model(name);
  if (!handle.ok()) {
    const int code = http_status_for(handle.status());
    reply->error(code, handle.status().message(), "model", code == 404 ? "model_not_found" : "");
    return;
  }
  call->handle = std::move(*handle);
  call->text = call->handle.model().text();

  auto made =
      backend::prepare_chat(call->handle.model(), name, chat_of(req, call->conversation), req.generation);
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

// What is asked of a kept response.
enum class Stored { kGet, kErase, kInputItems, kCancel };

// Another key's response answers exactly as one never made.
void responses_stored(Server::State& s, std::shared_ptr<Reply> reply, std::string id, size_t owner,
                      Stored what) {
  const std::string shown = id.substr(0, 80);
  if (what == Stored::kErase) {
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
  if (what == Stored::kInputItems) {
    reply->json(200, responses::input_items_list(stored->input_items));
  } else if (what == Stored::kCancel) {
    // Every response here is made while its request waits (background mode is not offered), so by the
    // time one can be named it has finished; cancelling a running one is closing its request.
    reply->error(400,
                 "response '" + shown +
                     "' cannot be cancelled: only background responses can be, and gantry serve makes every "
                     "response in the foreground (this one has finished; close a running request to cancel "
                     "it)",
                 "response_id");
  } else {
    reply->json(200, stored->body);
  }
}

// The Responses API: create, and a kept response read or deleted.
namespace {
void create(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams&) {
  responses_create(s, std::move(reply), std::move(request));
}

void get(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams& p) {
  responses_stored(s, std::move(reply), p.id, s.owner(request), Stored::kGet);
}

void erase(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams& p) {
  responses_stored(s, std::move(reply), p.id, s.owner(request), Stored::kErase);
}

void items(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams& p) {
  responses_stored(s, std::move(reply), p.id, s.owner(request), Stored::kInputItems);
}

void cancel(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams& p) {
  responses_stored(s, std::move(reply), p.id, s.owner(request), Stored::kCancel);
}

void input_tokens(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams&) {
  responses_input_tokens(s, std::move(reply), std::move(request));
}

// Compaction returns OpenAI's encrypted compaction items, which only its own models read back: there is
// nothing a model here could make of them.
void compact(Server::State&, std::shared_ptr<Reply> reply, HttpRequest&, const RouteParams&) {
  reply->error(400,
               "/v1/responses/compact is not supported by gantry serve: compaction items are encrypted "
               "state only OpenAI's models read back; continue a long conversation with "
               "previous_response_id, or shorten its input",
               "", "unsupported_endpoint");
}

constexpr Protocol kOpenai = Protocol::kOpenai;
const Route kRoutes[] = {
    {.method = "POST",
     .pattern = "/v1/responses",
     .protocol = kOpenai,
     .runs = Route::Runs::kWorkers,
     .handle = create,
     .inference = true},
    {.method = "POST",
     .pattern = "/v1/responses/input_tokens",
     .protocol = kOpenai,
     .runs = Route::Runs::kWorkers,
     .handle = input_tokens},
    {.method = "POST",
     .pattern = "/v1/responses/compact",
     .protocol = kOpenai,
     .runs = Route::Runs::kControl,
     .handle = compact},
    {.method = "GET",
     .pattern = "/v1/responses/{id}/input_items",
     .protocol = kOpenai,
     .runs = Route::Runs::kControl,
     .handle = items},
    {.method = "POST",
     .pattern = "/v1/responses/{id}/cancel",
     .protocol = kOpenai,
     .runs = Route::Runs::kControl,
     .handle = cancel},
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

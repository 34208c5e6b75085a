// Anthropic Messages routes: POST /v1/messages (plain or streamed as named server-sent events, on the
// model's continuous-batching engine), POST /v1/messages/count_tokens, the Models API's shape of GET
// /v1/models (an anthropic-version header picks it) and /v1/messages/batches (refused, in Anthropic's
// error shape). The conversation goes
// through the one chat entry (backend::prepare_chat), as on every chat route.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "gantry/backend/chat_generation.h"
#include "gantry/protocol/anthropic_codec.h"
#include "generation_call.h"
#include "route_table.h"
#include "server_state.h"

namespace gantry::server {
namespace {

void send_error(Reply& reply, const anthropic::ApiError& e) {
  reply.send(error_answer(e.http_status, anthropic::error_body(e)));
}

}  // namespace

void anthropic_messages(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest request,
                        bool count_tokens) {
  auto parsed = anthropic::parse_messages_request(
      request.body, count_tokens ? anthropic::Endpoint::kCountTokens : anthropic::Endpoint::kMessages);
  if (auto* e = std::get_if<anthropic::ApiError>(&parsed)) {
    send_error(*reply, *e);
    return;
  }
  // Shared by the hooks, which answer after this function has returned.
  auto req = std::make_shared<const anthropic::MessagesRequest>(
      std::move(std::get<anthropic::MessagesRequest>(parsed)));
  const std::string& name = req->model;
  reply->set_model(name);

  auto handle = s.model(name);
  if (!handle.ok()) {
    send_error(*reply, anthropic::api_error(handle.status(), "model"));
    return;
  }
  auto made = backend::prepare_chat(handle->model(), name, req->chat, req->generation);
  if (auto* refused = std::get_if<backend::ChatRefusal>(&made)) {
    send_error(*reply, anthropic::api_error(refused->status, anthropic::request_field(*req, refused->field)));
    return;
  }
  auto& prepared = std::get<backend::ChatGeneration>(made);
  // count_tokens answers with it; a stream's message_start carries it (the prompt is tokenized again
  // when it is evaluated; message_delta then gives the engine's own count).
  int prompt_tokens = 0;
  if (count_tokens || req->stream) {
    auto n = handle->model().text()->token_count(prepared.request.prompt);
    if (!n.ok()) {
      send_error(*reply, anthropic::api_error(n.status(), "messages"));
      return;
    }
    if (count_tokens) {
      reply->json(200, anthropic::count_tokens_response(*n));
      return;
    }
    prompt_tokens = *n;
  }
  std::shared_ptr<backend::ChatOutputParser> parser = std::move(prepared.parsers.front());
  GenerationStart start;
  start.model = name;
  start.stream = req->stream;
  start.request = std::move(prepared.request);

  const std::string id = anthropic::new_message_id();
  auto writer = std::make_shared<anthropic::EventWriter>(id, name);
  GenerationHooks hooks;
  hooks.stream_begun = [writer, prompt_tokens](Reply& r) { r.event(writer->start(prompt_tokens)); };
  hooks.text_event = [parser, writer](std::string_view piece) {
    std::string events;
    for (const auto& d : parser->add(piece, false)) events += writer->add(d);
    return events;
  };
  hooks.done = [req, id, parser, writer](Reply& reply, const backend::GenerationResult& r) {
    const int output_tokens = static_cast<int>(r.tokens.size());
    if (!req->stream) {
      parser->add(r.text, true);
      const auto stop = anthropic::stop_reason(r.finish, parser->output(), req->stop_sequences);
      reply.json(200, anthropic::message_response(id, req->model, parser->output(), stop, r.n_prompt_tokens,
                                                  output_tokens, r.n_cached_tokens));
      return;
    }
    std::string events;
    for (const auto& d : parser->add("", true)) events += writer->add(d);
    const auto stop = anthropic::stop_reason(r.finish, parser->output(), req->stop_sequences);
    events += writer->finish(stop, r.n_prompt_tokens, output_tokens, r.n_cached_tokens);
    reply.event(std::move(events));
    reply.end_stream(200);
  };
  hooks.failed = [req](Reply& reply, const Status& st, bool at_start) {
    // Refused at start (no stream has begun): a prompt longer than the context, or a tool schema the
    // backend cannot enforce.
    std::string field;
    if (st.code() == StatusCode::kResourceExhausted) {
      // the model at capacity: nothing in the request is at fault
    } else if (at_start && backend::is_context_length_exceeded(st)) {
      field = "messages";
    } else if (at_start && !req->chat.tools.empty()) {
      field = "tools";
    }
    const auto e = anthropic::api_error(st, std::move(field));
    if (!req->stream || at_start) {
      send_error(reply, e);
      return;
    }
    reply.event(anthropic::sse_error(e));
    reply.end_stream(e.http_status);
  };
  start_generation_call(s, reply, handle->queue(), std::move(start), std::move(hooks));
}

void anthropic_models(Server::State& s, std::shared_ptr<Reply> reply, const std::string& model) {
  const int64_t created =
      std::chrono::duration_cast<std::chrono::seconds>(s.started.time_since_epoch()).count();
  std::vector<std::string> ids;
  for (const auto& e : s.repository.entries()) ids.push_back(e.name);
  if (model.empty()) {
    reply->json(200, anthropic::models_response(ids, created));
    return;
  }
  if (std::find(ids.begin(), ids.end(), model) == ids.end()) {
    anthropic::ApiError e = anthropic::bad_request("model", "model '" + model + "' is not served here");
    e.http_status = 404;
    e.type = std::string(anthropic::error_type(404));
    send_error(*reply, e);
    return;
  }
  reply->json(200, anthropic::model_info(model, created));
}

// Anthropic's Messages API.
namespace {
void messages(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams&) {
  anthropic_messages(s, std::move(reply), std::move(request), false);
}

void count_tokens(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams&) {
  anthropic_messages(s, std::move(reply), std::move(request), true);
}

// Message Batches run requests asynchronously for up to a day and keep their results for 29 days:
// not offered (the queue here serves requests as they come); every batch route says so.
void batches(Server::State&, std::shared_ptr<Reply> reply, HttpRequest&, const RouteParams&) {
  send_error(*reply, anthropic::bad_request("",
                                            "message batches are not supported by gantry serve (it keeps "
                                            "no asynchronous jobs): send each request to POST "
                                            "/v1/messages, concurrently if you like"));
}

const Route kRoutes[] = {
    {.method = "POST",
     .pattern = "/v1/messages",
     .protocol = Protocol::kAnthropic,
     .runs = Route::Runs::kWorkers,
     .handle = messages,
     .inference = true},
    {.method = "POST",
     .pattern = "/v1/messages/count_tokens",
     .protocol = Protocol::kAnthropic,
     .runs = Route::Runs::kWorkers,
     .handle = count_tokens},
    {.method = "POST",
     .pattern = "/v1/messages/batches",
     .protocol = Protocol::kAnthropic,
     .runs = Route::Runs::kControl,
     .handle = batches},
    {.method = "GET",
     .pattern = "/v1/messages/batches",
     .protocol = Protocol::kAnthropic,
     .runs = Route::Runs::kControl,
     .handle = batches},
    {.method = "GET",
     .pattern = "/v1/messages/batches/**",
     .protocol = Protocol::kAnthropic,
     .runs = Route::Runs::kControl,
     .handle = batches},
    {.method = "POST",
     .pattern = "/v1/messages/batches/**",
     .protocol = Protocol::kAnthropic,
     .runs = Route::Runs::kControl,
     .handle = batches},
    {.method = "DELETE",
     .pattern = "/v1/messages/batches/**",
     .protocol = Protocol::kAnthropic,
     .runs = Route::Runs::kControl,
     .handle = batches},
};
}  // namespace

std::span<const Route> anthropic_routes() { return kRoutes; }

}  // namespace gantry::server

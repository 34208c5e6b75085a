// llama-server's own API, so that its clients switch without changes (gantry/protocol/llama_server_codec.h):
// GET /health and /v1/health ({"status": "ok"}, 503 until every model is loaded), GET /props, POST
// /completion and /completions (its native completion, plain or streamed), /infill, /tokenize,
// /detokenize, /apply-template, and GET /slots (501: Gantry's sequences are the runtime's). Routes
// translate only: generation goes through the model's queue (start_generation_call), chat through
// backend::prepare_chat, names through State::model (--any-model-name: any name is the one model).
#include <nlohmann/json.hpp>

#include "gantry/backend/chat_generation.h"
#include "gantry/backend/text_model.h"
#include "gantry/build_info.h"
#include "gantry/core/json.h"
#include "gantry/protocol/llama_server_codec.h"
#include "gantry/protocol/openai_codec.h"
#include "gantry/runtime/model_queue.h"
#include "generation_call.h"
#include "route_table.h"
#include "server_state.h"

namespace gantry::server {
namespace {
namespace ls = protocol::llama_server;
using json = nlohmann::json;
using Runs = Route::Runs;

// The model a request names (any name with --any-model-name), or the error already answered.
std::optional<runtime::ModelHandle> find_model(Server::State& s, Reply& reply, const std::string& name) {
  reply.set_model(name.empty() ? "-" : name);
  auto handle = s.model(name);
  if (!handle.ok()) {
    const int code = http_status_for(handle.status());
    reply.error(code,
                handle.status().message() +
                    (name.empty() ? " (name the model in \"model\", or start with --any-model-name)" : ""),
                "model", code == 404 ? "model_not_found" : "");
    return std::nullopt;
  }
  return std::move(*handle);
}

// The model's tokenizer, or the error answered.
const backend::TextModel* tokenizer(Reply& reply, runtime::ModelHandle& h) {
  const backend::TextModel* text = h.model().text();
  if (!text) reply.error(400, "model '" + reply.model() + "' takes no text", "model");
  return text;
}

void health(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest&, const RouteParams&) {
  if (!s.ready()) {
    reply->send(error_answer(
        503, dump_json(json{
                 {"error", {{"code", 503}, {"message", "Loading model"}, {"type", "unavailable_error"}}}})));
    return;
  }
  reply->json(200, R"({"status":"ok"})");
}

void slots(Server::State&, std::shared_ptr<Reply> reply, HttpRequest&, const RouteParams&) {
  reply->json(501, dump_json(json{{"error",
                                   {{"code", 501},
                                    {"message",
                                     "This server does not support the slots endpoint: its sequences "
                                     "are the runtime's (GET /metrics counts them)"},
                                    {"type", "not_supported_error"}}}}));
}

std::string query_value(std::string_view query, std::string_view key) {
  for (size_t i = 0; i < query.size();) {
    size_t j = query.find('&', i);
    if (j == std::string_view::npos) j = query.size();
    const auto kv = query.substr(i, j - i);
    if (kv.substr(0, kv.find('=')) == key && kv.find('=') != std::string_view::npos)
      return std::string(kv.substr(kv.find('=') + 1));
    i = j + 1;
  }
  return "";
}

void props(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams&) {
  const std::string name = query_value(request.query, "model");
  auto entry = s.resolve(name);
  auto h = s.loaded(name);
  if (!entry || !h.ok()) {
    reply->error(
        entry ? 503 : 404,
        entry ? "model '" + entry->name + "' is not loaded"
              : "no model named '" + name + "' (GET /props?model=NAME, or start with --any-model-name)",
        "model");
    return;
  }
  ls::Props p;
  p.model_path = entry->source.string();
  p.model_alias = entry->name;
  p.build_info = std::string("gantry ") + GANTRY_VERSION_STRING;
  p.sampling = s.options.sampling;
  p.n_predict_default = s.options.max_tokens_default;
  if (const backend::TextModel* text = h->model().text()) {
    p.total_slots = text->text_info().sequences;
    p.n_ctx_slot = text->text_info().context_length;
    p.chat_template_tools = text->text_info().chat.tools;
    p.chat_template = text->text_info().chat.format;
  }
  reply->json(200, ls::props_response(p));
}

void tokenize(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams&) {
  auto parsed = ls::parse_tokenize_request(request.body);
  if (auto* e = std::get_if<openai::ApiError>(&parsed)) return send_api_error(*reply, *e);
  const auto& req = std::get<ls::TokenizeRequest>(parsed);
  auto h = find_model(s, *reply, req.model);
  if (!h) return;
  const backend::TextModel* text = tokenizer(*reply, *h);
  if (!text) return;
  auto tokens = text->tokenize(req.content, req.add_special, req.parse_special);
  if (!tokens.ok()) return send_api_error(*reply, openai::api_error(tokens.status(), "content"));
  std::vector<std::string> pieces;
  if (req.with_pieces) {
    for (int32_t t : *tokens) {
      auto piece = text->token_piece(t);
      pieces.push_back(piece.ok() ? std::move(*piece) : std::string());
    }
  }
  reply->json(200, ls::tokenize_response(*tokens, req.with_pieces ? &pieces : nullptr));
}

void detokenize(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams&) {
  auto parsed = ls::parse_detokenize_request(request.body);
  if (auto* e = std::get_if<openai::ApiError>(&parsed)) return send_api_error(*reply, *e);
  const auto& tokens = std::get<std::vector<int32_t>>(parsed);
  auto h = find_model(s, *reply, "");
  if (!h) return;
  const backend::TextModel* text = tokenizer(*reply, *h);
  if (!text) return;
  auto content = text->detokenize(tokens);
  if (!content.ok()) return send_api_error(*reply, openai::api_error(content.status(), "tokens"));
  reply->json(200, dump_json(json{{"content", *content}}));
}

void apply_template(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request,
                    const RouteParams&) {
  auto parsed = openai::parse_text_request(request.body, openai::Endpoint::kChat);
  if (auto* e = std::get_if<openai::ApiError>(&parsed)) return send_api_error(*reply, *e);
  const auto& req = std::get<openai::TextRequest>(parsed);
  auto h = find_model(s, *reply, req.model);
  if (!h) return;
  auto made = backend::prepare_chat(h->model(), req.model, req.chat, req.generation, 0);
  if (auto* refused = std::get_if<backend::ChatRefusal>(&made))
    return send_api_error(*reply, openai::chat_refusal_error(*refused, refused->field));
  reply->json(200, dump_json(json{{"prompt", std::get<backend::ChatGeneration>(made).request.prompt}}));
}

// Sets `g`'s prompt from the request's parts: text alone as text (the engine tokenizes it), anything
// with token ids as tokens (each text part tokenized, BOS only before the first). /infill's prompt is
// the model's fill-in-the-middle layout. False when an error was answered.
bool set_prompt(Reply& reply, const backend::TextModel& text, const ls::CompletionRequest& req, bool infill,
                backend::GenerationRequest& g, std::string& shown) {
  auto add = [&](std::string_view t, bool special, std::vector<int32_t>& out) {
    auto tokens = text.tokenize(t, special, true);
    if (!tokens.ok()) {
      send_api_error(reply, openai::api_error(tokens.status(), "prompt"));
      return false;
    }
    out.insert(out.end(), tokens->begin(), tokens->end());
    return true;
  };
  if (infill) {
    auto fim = text.fim_tokens();
    if (!fim) {
      reply.error(400,
                  "model '" + reply.model() +
                      "' does not support infill: its vocabulary has no "
                      "fill-in-the-middle tokens (FIM prefix, suffix and middle)",
                  "model");
      return false;
    }
    std::vector<int32_t> out{fim->prefix};
    std::string before;
    for (const auto& chunk : req.input_extra) before += chunk + "\n";
    if (!add(before + req.input_prefix, false, out)) return false;
    out.push_back(fim->suffix);
    if (!add(req.input_suffix, false, out)) return false;
    out.push_back(fim->middle);
    for (const auto& part : req.prompt) {
      if (part.is_text && !add(part.text, false, out)) return false;
      if (!part.is_text) out.insert(out.end(), part.tokens.begin(), part.tokens.end());
    }
    g.tokens = std::move(out);
    shown = req.input_prefix;
    return true;
  }
  if (req.prompt.size() == 1 && req.prompt[0].is_text) {
    g.prompt = req.prompt[0].text;
    shown = g.prompt;
    return true;
  }
  std::vector<int32_t> out;
  for (size_t i = 0; i < req.prompt.size(); ++i) {
    const auto& part = req.prompt[i];
    if (part.is_text) {
      if (!add(part.text, i == 0, out)) return false;
      shown += part.text;
    } else {
      out.insert(out.end(), part.tokens.begin(), part.tokens.end());
    }
  }
  if (out.empty()) {
    reply.error(400, "'prompt' holds no tokens", "prompt");
    return false;
  }
  g.tokens = std::move(out);
  return true;
}

// What the hooks share: the tokens streamed so far.
struct CompletionStream {
  int predicted = 0;
};

void completion(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, bool infill) {
  auto parsed = ls::parse_completion_request(request.body, s.options.sampling, infill);
  if (auto* e = std::get_if<openai::ApiError>(&parsed)) return send_api_error(*reply, *e);
  auto req =
      std::make_shared<const ls::CompletionRequest>(std::move(std::get<ls::CompletionRequest>(parsed)));
  auto h = find_model(s, *reply, req->model);
  if (!h) return;
  const std::string name = s.resolve(req->model) ? s.resolve(req->model)->name : req->model;
  if (auto refused = backend::check_generates(h->model(), name))
    return send_api_error(*reply, openai::chat_refusal_error(*refused, refused->field));
  GenerationStart start;
  start.model = name;
  start.stream = req->stream;
  start.request = req->generation;
  backend::GenerationRequest& g = start.request;
  g.render_special = false;
  g.max_tokens = req->n_predict > 0 ? req->n_predict : s.options.max_tokens_default;
  auto shown = std::make_shared<std::string>();
  if (!set_prompt(*reply, *h->model().text(), *req, infill, g, *shown)) return;
  auto state = std::make_shared<CompletionStream>();
  GenerationHooks hooks;
  hooks.piece_event = [req, state](const backend::TextPiece& piece) {
    state->predicted += piece.logprobs.empty() ? 1 : static_cast<int>(piece.logprobs.size());
    if (piece.text.empty() && piece.logprobs.empty()) return std::string();
    return ls::completion_chunk(*req, piece.text, piece.logprobs, state->predicted, 0);
  };
  hooks.done = [req, name, shown](Reply& r, const backend::GenerationResult& result) {
    if (!req->stream) {
      r.json(200, ls::completion_response(*req, name, *shown, result, false));
      return;
    }
    r.event(ls::sse(ls::completion_response(*req, name, *shown, result, true)));
    r.end_stream(200);
  };
  hooks.failed = [req](Reply& r, const Status& st, bool at_start) {
    const bool too_long = at_start && backend::is_context_length_exceeded(st);
    auto e = openai::api_error(st, too_long ? "prompt" : "");
    if (too_long) e.message = "the request exceeds the available context size: " + e.message;  // llama-server's words
    if (!req->stream || at_start) return send_api_error(r, e);
    r.event(ls::sse(openai::error_body(e)));
    r.end_stream(e.http_status);
  };
  start_generation_call(s, reply, h->queue(), std::move(start), std::move(hooks));
}

void complete(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams&) {
  completion(s, std::move(reply), request, false);
}

void infill(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams&) {
  completion(s, std::move(reply), request, true);
}

constexpr Protocol kOpenai = Protocol::kOpenai;
const Route kRoutes[] = {
    {.method = "GET",
     .pattern = "/health",
     .protocol = kOpenai,
     .runs = Runs::kInline,
     .handle = health,
     .access = Route::Access::kProbe},
    {.method = "GET",
     .pattern = "/v1/health",
     .protocol = kOpenai,
     .runs = Runs::kInline,
     .handle = health,
     .access = Route::Access::kProbe},
    {.method = "GET", .pattern = "/props", .protocol = kOpenai, .runs = Runs::kControl, .handle = props},
    {.method = "GET", .pattern = "/slots", .protocol = kOpenai, .runs = Runs::kInline, .handle = slots},
    {.method = "POST",
     .pattern = "/completion",
     .protocol = kOpenai,
     .runs = Runs::kWorkers,
     .handle = complete,
     .inference = true},
    {.method = "POST",
     .pattern = "/completions",
     .protocol = kOpenai,
     .runs = Runs::kWorkers,
     .handle = complete,
     .inference = true},
    {.method = "POST",
     .pattern = "/infill",
     .protocol = kOpenai,
     .runs = Runs::kWorkers,
     .handle = infill,
     .inference = true},
    {.method = "POST",
     .pattern = "/tokenize",
     .protocol = kOpenai,
     .runs = Runs::kWorkers,
     .handle = tokenize},
    {.method = "POST",
     .pattern = "/detokenize",
     .protocol = kOpenai,
     .runs = Runs::kWorkers,
     .handle = detokenize},
    {.method = "POST",
     .pattern = "/apply-template",
     .protocol = kOpenai,
     .runs = Runs::kWorkers,
     .handle = apply_template},
};

}  // namespace

std::span<const Route> llama_server_routes() { return kRoutes; }

}  // namespace gantry::server

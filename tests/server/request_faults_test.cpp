// A request that throws after it was admitted — in the chat template, the output parser (the answer's
// codec), the backend as it starts or runs, the stream writer on the decoding thread — on every protocol
// (OpenAI chat, completions and embeddings, Responses, Anthropic, Ollama chat, generate and embed,
// rerank, KServe over HTTP and gRPC), and afterwards each model still admits its full capacity: no place
// in its queue leaked, the server answered every one of them and serves on (issue 35).
//
// The models are real (the tiny tool-calling GGUF, the tiny reranker and the MLP, through the real
// llama.cpp and ONNX Runtime backends); each is wrapped in a FaultModel that throws at the one point the
// test arms, and otherwise passes everything through.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "gantry/backend/backend.h"
#include "gantry/backend/llama/llama_backend.h"
#include "gantry/backend/onnx/onnx_backend.h"
#include "gantry/backend/text_model.h"
#include "gantry/runtime/model_queue.h"
#include "gantry/runtime/runtime.h"
#include "gantry/server/server.h"
#include "grpc_predict_v2.grpc.pb.h"
#include "wrapping_backend.h"

namespace gantry::server {
namespace {
namespace fs = std::filesystem;

enum class Fault { kNone, kTemplate, kParser, kStart, kStreamPiece, kRun };
std::atomic<Fault> g_fault{Fault::kNone};

[[noreturn]] void injected(std::string_view where) {
  throw std::runtime_error("injected fault in " + std::string(where));
}

// Throws in add() (the answer's parser, run by the protocol's hooks) when armed.
class FaultParser final : public backend::ChatOutputParser {
 public:
  explicit FaultParser(std::unique_ptr<backend::ChatOutputParser> inner) : inner_(std::move(inner)) {}
  std::vector<backend::ChatOutputDelta> add(std::string_view text, bool final) override {
    if (g_fault.load() == Fault::kParser) injected("the output parser");
    return inner_->add(text, final);
  }
  const backend::ChatOutput& output() const override { return inner_->output(); }

 private:
  std::unique_ptr<backend::ChatOutputParser> inner_;
};

class FaultModel final : public backend::Model, public backend::TextModel {
 public:
  explicit FaultModel(std::unique_ptr<backend::Model> inner) : inner_(std::move(inner)) {}
  const backend::ModelMetadata& metadata() const override { return inner_->metadata(); }
  Status init() override { return inner_->init(); }
  Result<std::vector<NamedTensor>> infer_one(std::span<const NamedTensor> inputs) override {
    if (g_fault.load() == Fault::kRun) injected("infer_one");
    return inner_->infer_one(inputs);
  }
  Result<std::vector<std::vector<NamedTensor>>> infer_batch(
      std::span<const std::vector<NamedTensor>> requests) override {
    if (g_fault.load() == Fault::kRun) injected("infer_batch, on the batcher's thread");
    return inner_->infer_batch(requests);
  }
  Status drain() override { return inner_->drain(); }
  Status reset() override { return inner_->reset(); }
  Result<std::unique_ptr<backend::Generation>> start_generation(backend::GenerationRequest request) override {
    if (g_fault.load() == Fault::kStart) injected("start_generation");
    if (g_fault.load() == Fault::kStreamPiece && request.on_piece) {
      request.on_piece = [](const backend::TextPiece&) -> bool { injected("the stream writer"); };
    }
    return inner_->start_generation(std::move(request));
  }
  backend::TextModel* text() override { return inner_->text() ? this : nullptr; }
  Result<std::vector<std::vector<float>>> embed(std::span<const std::string> texts, bool normalize,
                                                const backend::CancelCheck& cancelled) override {
    if (g_fault.load() == Fault::kRun) injected("embed");
    return inner_->embed(texts, normalize, cancelled);
  }
  Result<int> token_count(std::string_view text) const override { return inner_->token_count(text); }
  backend::ModelStats stats() const override { return inner_->stats(); }
  Status health() const override { return inner_->health(); }
  // TextModel
  const backend::TextModelInfo& text_info() const override { return inner_->text()->text_info(); }
  Result<backend::ChatPrompt> apply_chat(const backend::ChatRequest& request) const override {
    if (g_fault.load() == Fault::kTemplate) injected("the chat template");
    return inner_->text()->apply_chat(request);
  }
  Result<std::unique_ptr<backend::ChatOutputParser>> chat_parser(
      const backend::ChatPrompt& prompt) const override {
    auto p = inner_->text()->chat_parser(prompt);
    if (!p.ok()) return p;
    return std::unique_ptr<backend::ChatOutputParser>(std::make_unique<FaultParser>(std::move(*p)));
  }
  Result<backend::RerankResult> rerank(std::string_view query, std::span<const std::string> documents,
                                       const backend::CancelCheck& cancelled) override {
    if (g_fault.load() == Fault::kRun) injected("rerank");
    return inner_->text()->rerank(query, documents, cancelled);
  }

 private:
  std::unique_ptr<backend::Model> inner_;
};

using FaultBackend = testutil::WrappingBackend<FaultModel>;

struct Answer {
  int status = 0;
  std::string body;
};

Answer post(uint16_t port, const std::string& target, const std::string& body) {
  namespace net = boost::asio;
  namespace http = boost::beast::http;
  net::io_context io;
  net::ip::tcp::socket socket(io);
  net::ip::tcp::resolver resolver(io);
  net::connect(socket, resolver.resolve("127.0.0.1", std::to_string(port)));
  http::request<http::string_body> req(http::verb::post, target, 11);
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  http::write(socket, req);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  boost::system::error_code ec;
  http::read(socket, buffer, res, ec);
  EXPECT_TRUE(!ec || ec == http::error::end_of_stream) << target << ": " << ec.message();
  return {static_cast<int>(res.result_int()), res.body()};
}

const fs::path kModels = fs::path(GANTRY_DEPS_DIR) / "models";
constexpr char kChat[] = "tiny-qwen25-tools";
constexpr char kRanker[] = "tiny-reranker";
constexpr char kMlp[] = "mlp_64_128_10";

class RequestFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* f : {"tiny-qwen25-tools.gguf", "tiny-reranker.gguf", "mlp_64_128_10.onnx"})
      ASSERT_TRUE(fs::exists(kModels / f)) << (kModels / f) << " missing: run make setup";
    runtime::RuntimeOptions ro;
    ro.verdict_cache_dir = "none";
    ro.keep_alive_timer = false;
    ro.backends.push_back(std::make_unique<FaultBackend>(onnx::make_onnx_backend()));
    ro.backends.push_back(std::make_unique<FaultBackend>(llama::make_llama_backend()));
    auto rt = runtime::Runtime::create(std::move(ro));
    ASSERT_TRUE(rt.ok()) << rt.status().message();
    rt_ = std::move(*rt);
    ServeOptions o;
    o.models = {(kModels / "tiny-qwen25-tools.gguf").string(), (kModels / "tiny-reranker.gguf").string(),
                (kModels / "mlp_64_128_10.onnx").string()};
    o.port = 0;
    o.grpc_port = 0;
    o.max_queue = 3;
    auto srv = Server::start(*rt_, std::move(o));
    ASSERT_TRUE(srv.ok()) << srv.status().message();
    srv_ = std::move(*srv);
  }
  void TearDown() override { g_fault = Fault::kNone; }

  // Every place of the model's queue can be taken, and not one more.
  void expect_full_capacity(const std::string& model) {
    auto h = rt_->get(model);
    ASSERT_TRUE(h.ok()) << h.status().message();
    runtime::ModelQueue& q = h->queue();
    EXPECT_EQ(q.outstanding(), 0u) << model << ": a place leaked";
    std::vector<runtime::ModelQueue::Ticket> held;
    for (size_t i = 0; i < q.capacity() + q.max_queue(); ++i) {
      auto t = q.admit();
      ASSERT_TRUE(t.ok()) << model << ", place " << i << ": " << t.status().message();
      held.push_back(std::move(*t));
    }
    EXPECT_FALSE(q.admit().ok()) << model << ": more places than its capacity";
  }

  std::unique_ptr<runtime::Runtime> rt_;
  std::unique_ptr<Server> srv_;
};

struct Case {
  const char* what;
  const char* path;
  std::string body;
  std::vector<Fault> faults;
};

std::string chat_body(bool stream) {
  return std::string(R"({"model":")") + kChat + R"(","max_tokens":4,"stream":)" +
         (stream ? "true" : "false") + R"(,"messages":[{"role":"user","content":"hi"}]})";
}

TEST_F(RequestFaults, AThrowAfterAdmissionOnAnyProtocolLeaksNoPlace) {
  const std::vector<Fault> chat_faults = {Fault::kTemplate, Fault::kParser, Fault::kStart,
                                          Fault::kStreamPiece};
  const std::vector<Fault> text_faults = {Fault::kStart, Fault::kStreamPiece};
  const std::string m = kChat;
  const std::vector<Case> cases = {
      {"OpenAI chat", "/v1/chat/completions", chat_body(false), chat_faults},
      {"OpenAI chat, streamed", "/v1/chat/completions", chat_body(true), chat_faults},
      {"OpenAI completions", "/v1/completions", R"({"model":")" + m + R"(","max_tokens":4,"prompt":"hi"})",
       text_faults},
      {"OpenAI completions, streamed", "/v1/completions",
       R"({"model":")" + m + R"(","max_tokens":4,"stream":true,"prompt":"hi"})", text_faults},
      {"OpenAI embeddings", "/v1/embeddings", R"({"model":")" + m + R"(","input":["a","b"]})", {Fault::kRun}},
      {"Responses", "/v1/responses", R"({"model":")" + m + R"(","max_output_tokens":4,"input":"hi"})",
       chat_faults},
      {"Responses, streamed", "/v1/responses",
       R"({"model":")" + m + R"(","max_output_tokens":4,"stream":true,"input":"hi"})", chat_faults},
      {"Anthropic", "/v1/messages",
       R"({"model":")" + m + R"(","max_tokens":4,"messages":[{"role":"user","content":"hi"}]})", chat_faults},
      {"Anthropic, streamed", "/v1/messages",
       R"({"model":")" + m + R"(","max_tokens":4,"stream":true,"messages":[{"role":"user","content":"hi"}]})",
       chat_faults},
      {"Ollama chat", "/api/chat",
       R"({"model":")" + m +
           R"(","stream":false,"options":{"num_predict":4},"messages":[{"role":"user","content":"hi"}]})",
       chat_faults},
      {"Ollama chat, streamed", "/api/chat",
       R"({"model":")" + m + R"(","options":{"num_predict":4},"messages":[{"role":"user","content":"hi"}]})",
       chat_faults},
      {"Ollama generate",
       "/api/generate",
       R"({"model":")" + m + R"(","stream":false,"options":{"num_predict":4},"prompt":"hi"})",
       {Fault::kTemplate, Fault::kStart, Fault::kStreamPiece}},
      {"Ollama embed", "/api/embed", R"({"model":")" + m + R"(","input":["a","b"]})", {Fault::kRun}},
      {"rerank",
       "/v1/rerank",
       std::string(R"({"model":")") + kRanker + R"(","query":"q","documents":["a","b"]})",
       {Fault::kRun}},
      {"KServe infer",
       "/v2/models/mlp_64_128_10/infer",
       R"({"inputs":[{"name":"input","datatype":"FP32","shape":[1,64],"data":[)" +
           [] {
             std::string d;
             for (int i = 0; i < 64; ++i) d += (i ? ",0." : "0.") + std::to_string(i % 10);
             return d;
           }() +
           "]}]}",
       {Fault::kRun}},
  };
  const uint16_t port = srv_->port();
  for (const Case& c : cases) {
    g_fault = Fault::kNone;
    Answer fine = post(port, c.path, c.body);
    ASSERT_EQ(fine.status, 200) << c.what << " without a fault: " << fine.body;
    for (Fault f : c.faults) {
      g_fault = f;
      Answer a = post(port, c.path, c.body);
      // Answered, with an error: its status, or (a stream that had begun) an error in the stream.
      const bool error_status = a.status >= 400;
      const bool error_in_stream = a.status == 200 && a.body.find("error") != std::string::npos;
      EXPECT_TRUE(error_status || error_in_stream)
          << c.what << ", fault " << static_cast<int>(f) << ": " << a.status << " " << a.body.substr(0, 300);
    }
  }
  g_fault = Fault::kNone;
  for (const char* model : {kChat, kRanker, kMlp}) expect_full_capacity(model);
}

TEST_F(RequestFaults, AThrowOnTheGrpcInferPathLeaksNoPlace) {
  auto stub = inference::GRPCInferenceService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(srv_->grpc_port()), grpc::InsecureChannelCredentials()));
  auto infer = [&] {
    inference::ModelInferRequest req;
    req.set_model_name(kMlp);
    auto* in = req.add_inputs();
    in->set_name("input");
    in->set_datatype("FP32");
    in->add_shape(1);
    in->add_shape(64);
    for (int i = 0; i < 64; ++i) in->mutable_contents()->add_fp32_contents(0.01f * static_cast<float>(i));
    grpc::ClientContext ctx;
    inference::ModelInferResponse resp;
    return stub->ModelInfer(&ctx, req, &resp);
  };
  ASSERT_TRUE(infer().ok());
  g_fault = Fault::kRun;
  for (int i = 0; i < 10; ++i) {
    grpc::Status st = infer();
    EXPECT_FALSE(st.ok()) << "round " << i;
    EXPECT_NE(st.error_message().find("injected fault"), std::string::npos) << st.error_message();
  }
  g_fault = Fault::kNone;
  EXPECT_TRUE(infer().ok());
  expect_full_capacity(kMlp);
}

}  // namespace
}  // namespace gantry::server

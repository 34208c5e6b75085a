// The protocol codecs (gantry/protocol/, one namespace each) by their short names inside the server.
#pragma once

namespace gantry::protocol {
namespace anthropic {}
namespace kserve {}
namespace ollama {}
namespace openai {}
namespace rerank {}
namespace responses {}
}  // namespace gantry::protocol

namespace gantry::server {
namespace anthropic = protocol::anthropic;
namespace kserve = protocol::kserve;
namespace ollama = protocol::ollama;
namespace openai = protocol::openai;
namespace rerank = protocol::rerank;
namespace responses = protocol::responses;
}  // namespace gantry::server

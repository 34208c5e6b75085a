// llama-server's command line for `gantry serve`: a user switching from llama.cpp's llama-server keeps
// the command line. respell_llama_server_args() rewrites the arguments after `serve` before CLI11 parses
// them, flag by flag, following llama.cpp's common/arg.cpp (the pinned source):
//   - flags Gantry spells the same (--port, -c/--ctx-size, -np/--parallel, -b, -ub, -ngl, -fa, -t,
//     --no-mmap, --api-key-file, --chat-template-file, --reasoning-format, -cram, -kvu, --rpc, -md,
//     --draft-max, --spec-type, ...) pass unchanged;
//   - flags with a Gantry equivalent are respelled: -m/--model FILE and -mu/--model-url URL become the
//     model argument (and turn on --any-model-name: llama-server serves its one model under any name),
//     -a/--alias, --api-key, -n/--n-predict (--max-tokens), --temp, --seed, --top-k, ... (Gantry's
//     sampling defaults), -ctk/-ctv (--kv-type), --cors-origins, --threads-http, --pooling, --reasoning,
//     --no-webui (--no-dashboard), --host LIST;
//   - flags whose meaning Gantry already has are dropped: --jinja and --no-jinja (Gantry always renders
//     the model's Jinja template with llama.cpp's chat layer), --embedding(s), --rerank(ing) (any model
//     embeds or ranks as its pooling allows), --metrics (/metrics is always served), --cont-batching,
//     --no-slots, --offline, --no-context-shift, --cache-prompt, --warmup, --no-mmproj, ...;
//   - every other llama-server flag is refused by name with a one-line reason (InvalidArgument).
// Anything else (Gantry's own flags, positional models) passes unchanged, so Gantry's spelling keeps
// working; `--flag=value` is read as `--flag value`.
#pragma once

#include <string>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::cli {

Result<std::vector<std::string>> respell_llama_server_args(const std::vector<std::string>& args);

}  // namespace gantry::cli

#include "cli/run_gguf.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "gantry/core/log.h"

namespace gantry::cli {

void add_run_gguf_flags(CLI::App& cmd, RunGgufOptions& o) {
  auto* prompt =
      cmd.add_option("--prompt,-p", o.prompt, "Text to continue (or the user message with --chat)");
  cmd.add_option(
         "--prompt-file", o.prompt_file,
         "Read the prompt from FILE (- = standard input); for prompts longer than a command line holds")
      ->excludes(prompt);
  cmd.add_option("--max-tokens,-n", o.max_tokens, "Most tokens to generate")->capture_default_str();
  cmd.add_option("--temperature", o.sampling.temperature, "Sampling temperature; 0 = greedy")
      ->capture_default_str();
  cmd.add_option("--top-k", o.sampling.top_k, "Keep the k most likely tokens; 0 = off")
      ->capture_default_str();
  cmd.add_option("--top-p", o.sampling.top_p, "Nucleus sampling mass in (0,1]; 1 = off")
      ->capture_default_str();
  cmd.add_option("--min-p", o.sampling.min_p, "Drop tokens below min-p x the best one's probability; 0 = off")
      ->capture_default_str();
  cmd.add_option("--repeat-penalty", o.sampling.repeat_penalty, "Penalty for repeated tokens; 1 = off")
      ->capture_default_str();
  cmd.add_option("--seed", o.seed, "Sampling seed; -1 = random")->capture_default_str();
  cmd.add_flag("--chat", o.chat, "Format the prompt with the model's chat template");
  cmd.add_option("--system", o.system, "System message (with --chat)");
  cmd.add_option("--stop", o.stop, "Stop before this text (repeatable)");
  add_llama_flags(cmd, o.llama, kRunLlamaFlags);
  note_default(cmd, "--ctx", "the package's, else 2048");
  note_default(cmd, "--threads", "all");
  note_default(cmd, "--n-gpu-layers", "as many as the planner says fit");
}

namespace {
// The prompt from FILE or, for "-", standard input. A pipe or FIFO is fine here (`--prompt-file <(...)`):
// the user named it; the read is bounded so a endless stream ends in an error, not in exhausted memory.
Result<std::string> read_prompt_file(const std::string& path) {
  constexpr size_t kMaxPromptBytes = 64u << 20;
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
      return InvalidArgument("--prompt-file " + path + " is a directory");
    file.open(path, std::ios::binary);
    if (!file) return NotFound("--prompt-file " + path + ": cannot open it (" + std::strerror(errno) + ")");
    in = &file;
  }
  std::string text;
  char buf[65536];
  while (in->read(buf, sizeof buf) || in->gcount() > 0) {
    text.append(buf, static_cast<size_t>(in->gcount()));
    if (text.size() > kMaxPromptBytes) {
      return InvalidArgument("--prompt-file " + path +
                             " holds more than 64 MiB; no context takes that much text");
    }
  }
  if (in->bad()) return IoError("--prompt-file " + path + ": read failed");
  return text;
}
}  // namespace

Status validate_run_gguf_flags(const RunGgufOptions& o) {
  if (o.seed < -1 || o.seed > 0xFFFFFFFELL) return InvalidArgument("--seed must be -1 or in 0..4294967294");
  if (o.llama.threads < 0) return InvalidArgument("--threads must be >= 0");
  if (o.max_tokens < 1) return InvalidArgument("--max-tokens must be >= 1");
  if (o.llama.ctx && *o.llama.ctx < 1) return InvalidArgument("--ctx must be >= 1");
  return backend::validate(o.sampling);
}

int run_generation(backend::Model& model, const RunGgufOptions& o, std::ostream& out) {
  auto fail = [](const Status& st) {
    std::cerr << "gantry run: error: " << st.message() << "\n";
    return st.code() == StatusCode::kInvalidArgument ? 2 : 1;
  };
  std::string prompt = o.prompt;
  if (!o.prompt_file.empty()) {
    auto text = read_prompt_file(o.prompt_file);
    if (!text.ok()) return fail(text.status());
    prompt = std::move(*text);
  }
  if (prompt.empty()) {
    return fail(
        InvalidArgument("a text-generation model needs a prompt: --prompt TEXT or --prompt-file FILE"));
  }
  if (Status st = validate_run_gguf_flags(o); !st.ok()) return fail(st);
  backend::GenerationRequest req;
  req.max_tokens = o.max_tokens;
  req.stop = o.stop;
  req.sampling = o.sampling;
  req.sampling.seed = o.seed < 0 ? 0xFFFFFFFFu : static_cast<uint32_t>(o.seed);
  if (o.chat) {
    std::vector<backend::ChatMessage> msgs;
    if (!o.system.empty()) msgs.push_back({"system", o.system});
    msgs.push_back({"user", prompt});
    auto text = model.format_chat(msgs, true);
    if (!text.ok()) return fail(text.status());
    req.prompt = *text;
  } else {
    req.prompt = prompt;
  }
  req.on_text = [&out](std::string_view t) {
    out << t;
    out.flush();
    return static_cast<bool>(out);
  };
  auto result = model.generate(std::move(req));
  if (&out == &std::cout && isatty(STDOUT_FILENO)) out << "\n";
  if (!result.ok()) return fail(result.status());
  const double tps =
      result->generation_ms > 0 ? 1000.0 * (result->tokens.size() - 1) / result->generation_ms : 0;
  GANTRY_LOG_INFO("{} prompt tokens in {:.1f} ms; {} tokens generated ({:.1f} t/s); finish: {}",
                  result->n_prompt_tokens, result->prompt_ms, result->tokens.size(), tps,
                  backend::finish_reason_name(result->finish));
  return 0;
}

}  // namespace gantry::cli

#!/usr/bin/env python3
"""Generates tiny GGUF models that carry real model families' Jinja chat templates (for tool calling).

Usage: gguf_chat_templates.py <models-dir> <cache-dir>
  tiny-qwen25-tools.gguf   tiny-llama's shape, Qwen2's tokenizer and Qwen2.5-Instruct's template
                           (Hermes-style <tool_call> JSON calls)
  tiny-llama31-tools.gguf  the same with Llama 3's tokenizer and Llama-3.1-Instruct's template
The templates are the bundle's own (llama.cpp's models/templates/), so llama.cpp's chat layer renders and
parses each family's native tool-call format. Same bytes on every run.
"""
import importlib.util
import subprocess
import sys
from pathlib import Path

MODELS = Path(sys.argv[1])
CACHE = Path(sys.argv[2])
TEMPLATES = CACHE / "llama/src/models/templates"
HERE = Path(__file__).resolve().parent

# The tiny model's writer (gguf_llama.py reads the same argv).
spec = importlib.util.spec_from_file_location("gguf_llama", HERE / "gguf_llama.py")
gguf_llama = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gguf_llama)

# Each family's template with its real tokenizer (the bundle's vocab-only GGUFs), so special tokens such as
# <|im_start|> and <tool_call> are single tokens as in the real model and the chat layer's grammar and parser
# see a call's markers as that model writes them.
MODELS_AND_TEMPLATES = {
    "tiny-qwen25-tools.gguf": ("Qwen-Qwen2.5-7B-Instruct.jinja", "ggml-vocab-qwen2.gguf"),
    "tiny-llama31-tools.gguf": ("meta-llama-Llama-3.1-8B-Instruct.jinja", "ggml-vocab-llama-bpe.gguf"),
}


def main() -> None:
    MODELS.mkdir(parents=True, exist_ok=True)
    tool = gguf_llama.build_tool()
    for name, (template, vocab) in MODELS_AND_TEMPLATES.items():
        gguf_llama.CHATML = (TEMPLATES / template).read_text()
        gguf_llama.VOCAB = CACHE / "llama/src/models" / vocab
        out = MODELS / name
        tmp = out.with_suffix(".tmp")
        gguf_llama.write_llama(tmp, "gantry-" + out.stem, 1234, n_layer=2, n_embd=64, n_head=4, n_head_kv=2,
                               n_ff=128, n_ctx=2048)
        tmp.replace(out)
        subprocess.run([str(tool), "check", str(out)], check=True)


if __name__ == "__main__":
    main()

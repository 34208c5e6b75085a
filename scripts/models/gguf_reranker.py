#!/usr/bin/env python3
"""Generates a tiny GGUF reranker (pooling `rank`, random weights, fixed seed).

Usage: gguf_reranker.py <models-dir> <cache-dir>
  tiny-reranker.gguf  qwen3 arch laid out as llama.cpp's converter writes a Qwen3 reranker: pooling_type 4
                      (rank), a classifier head `cls.output.weight` with the labels ["yes", "no"] (llama.cpp
                      pools the last token, applies the head and a softmax; the score is P(yes)), a
                      `tokenizer.chat_template.rerank` prompt with {query} and {document}, and a default
                      ChatML template. 2 layers, n_embd 64, 4 heads / 2 KV heads, n_ff 128, ctx 2048, F16,
                      output tied to token_embd; the llama SPM tokenizer (32000 tokens) from the bundle.
  tiny-pooling-none.gguf the same without the head and the rerank prompt, declaring pooling_type 0 (none):
                      a model with no vector per text, which /v1/embeddings refuses as llama-server does.
qwen3 is the smallest decoder whose classifier head llama.cpp loads (bert-family rerankers need a WPM
vocabulary and token types). Loaded with llama_model_load_from_file as a check. Same bytes on every run.
"""
import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np

MODELS = Path(sys.argv[1])
HERE = Path(__file__).resolve().parent

# The tiny model's writer (gguf_llama.py reads the same argv): its tokenizer copy and check tool.
spec = importlib.util.spec_from_file_location("gguf_llama", HERE / "gguf_llama.py")
gguf_llama = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gguf_llama)
gguf = gguf_llama.gguf
import gguf_write  # noqa: E402  (scripts/lib, on sys.path since gguf_llama.py)

# Qwen3-Reranker's prompt, as llama.cpp's converter stores it (conversion/qwen.py).
RERANK = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
          "Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
          "<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that answer the "
          "query\n<Query>: {query}\n<Document>: {document}<|im_end|>\n"
          "<|im_start|>assistant\n<think>\n\n</think>\n\n")


def write_reranker(path: Path, seed: int, n_layer: int, n_embd: int, n_head: int, n_head_kv: int, n_ff: int,
                   n_ctx: int, rank: bool = True) -> None:
    rng = np.random.default_rng(seed)
    hd = n_embd // n_head
    w = gguf.GGUFWriter(str(path), "qwen3")
    gguf_write.add_shape(w, "gantry-tiny-reranker" if rank else "gantry-tiny-pooling-none",
                         gguf.LlamaFileType.MOSTLY_F16, n_ctx, n_embd, n_layer, n_ff, n_head, n_head_kv)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1000000.0)
    w.add_pooling_type(gguf.PoolingType.RANK if rank else gguf.PoolingType.NONE)
    if rank:
        w.add_classifier_output_labels(["yes", "no"])
    n_vocab = gguf_llama.copy_tokenizer(w)
    w.add_vocab_size(n_vocab)
    templates = [{"name": "default", "template": gguf_llama.CHATML}]
    if rank:
        templates.append({"name": "rerank", "template": RERANK})
    w.add_chat_template(templates)

    # Larger than tiny-llama's 0.02 so that different documents give visibly different scores.
    def mat(rows: int, cols: int, scale: float = 0.1) -> np.ndarray:
        return gguf_write.f16_matrix(rng, rows, cols, scale)

    def norm(n: int) -> np.ndarray:
        return gguf_write.norm_vector(rng, n)

    w.add_tensor("token_embd.weight", mat(n_vocab, n_embd, 0.5))
    for i in range(n_layer):
        for name, t in gguf_write.llama_layer(f"blk.{i}.", mat, norm, n_embd, n_head, n_head_kv, n_ff,
                                              qk_norm=True):
            w.add_tensor(name, t)
    w.add_tensor("output_norm.weight", norm(n_embd))
    # The rows of "yes" and "no" of a reranker's LM head; here random, small enough that P(yes) stays
    # well inside (0, 1).
    if rank:
        w.add_tensor("cls.output.weight", mat(2, n_embd, 0.05))
    gguf_write.write_and_close(w)


def main() -> None:
    MODELS.mkdir(parents=True, exist_ok=True)
    tool = gguf_llama.build_tool()
    for name, rank in (("tiny-reranker.gguf", True), ("tiny-pooling-none.gguf", False)):
        out = MODELS / name
        tmp = out.with_suffix(".tmp")
        write_reranker(tmp, 2468, n_layer=2, n_embd=64, n_head=4, n_head_kv=2, n_ff=128, n_ctx=2048, rank=rank)
        tmp.replace(out)
        subprocess.run([str(tool), "check", str(out)], check=True)


if __name__ == "__main__":
    main()

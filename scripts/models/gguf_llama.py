#!/usr/bin/env python3
"""Generates the deterministic GGUF test/benchmark models (random weights, fixed seeds).

Usage: gguf_llama.py <models-dir> <cache-dir>
  tiny-llama.gguf          llama arch, 2 layers, n_embd 64, 4 heads / 2 KV heads, n_ff 128, ctx 2048, F16
  bench-100m-q8_0.gguf     12 layers, n_embd 768, 12 heads / 4 KV heads, n_ff 2048, ctx 8192,
  bench-100m-q4_0.gguf     written in F16 and quantised with llama.cpp's own llama_model_quantize
The tokenizer (llama SPM, 32000 tokens) is copied from the bundle's models/ggml-vocab-llama-spm.gguf.
Each model is then loaded with llama_model_load_from_file as a check. Same bytes on every run.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "lib"))
import gguf_write  # noqa: E402

MODELS = Path(sys.argv[1])
CACHE = Path(sys.argv[2])
gguf = gguf_write.import_gguf(CACHE)

VOCAB = CACHE / "llama/src/models/ggml-vocab-llama-spm.gguf"
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def copy_tokenizer(w: "gguf.GGUFWriter") -> int:
    return gguf_write.copy_tokenizer(w, VOCAB)


def build_tool() -> Path:
    return gguf_write.build_quantize_tool(CACHE)


def write_llama(path: Path, name: str, seed: int, n_layer: int, n_embd: int, n_head: int, n_head_kv: int,
                n_ff: int, n_ctx: int) -> None:
    """VOCAB's tokenizer and the CHATML template, read when called (gguf_chat_templates.py sets others)."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "llama")
    n_vocab = gguf_write.add_llama_header(w, name, gguf.LlamaFileType.MOSTLY_F16, n_ctx, n_embd, n_layer, n_ff,
                                          n_head, n_head_kv, VOCAB, CHATML)

    def mat(rows: int, cols: int) -> np.ndarray:
        return gguf_write.f16_matrix(rng, rows, cols, 0.02)

    def norm(n: int) -> np.ndarray:
        return gguf_write.norm_vector(rng, n)

    w.add_tensor("token_embd.weight", mat(n_vocab, n_embd))
    for i in range(n_layer):
        for tname, t in gguf_write.llama_layer(f"blk.{i}.", mat, norm, n_embd, n_head, n_head_kv, n_ff):
            w.add_tensor(tname, t)
    w.add_tensor("output_norm.weight", norm(n_embd))
    w.add_tensor("output.weight", mat(n_vocab, n_embd))
    gguf_write.write_and_close(w)


def main() -> None:
    MODELS.mkdir(parents=True, exist_ok=True)
    tool = build_tool()
    threads = str(min(2, os.cpu_count() or 1))

    tiny = MODELS / "tiny-llama.gguf"
    tmp = tiny.with_suffix(".tmp")
    write_llama(tmp, "gantry-tiny-llama", 1234, n_layer=2, n_embd=64, n_head=4, n_head_kv=2, n_ff=128, n_ctx=2048)
    tmp.replace(tiny)

    f16 = MODELS / "bench-100m-f16.gguf.tmp"
    write_llama(f16, "gantry-bench-100m", 4321, n_layer=12, n_embd=768, n_head=12, n_head_kv=4, n_ff=2048,
                n_ctx=8192)
    for qtype in ("q8_0", "q4_0"):
        out = MODELS / f"bench-100m-{qtype}.gguf"
        tmp = out.with_suffix(".tmp")
        subprocess.run([str(tool), "quantize", str(f16), str(tmp), qtype, threads], check=True)
        tmp.replace(out)
    f16.unlink()

    for m in ("tiny-llama.gguf", "bench-100m-q8_0.gguf", "bench-100m-q4_0.gguf"):
        subprocess.run([str(tool), "check", str(MODELS / m)], check=True)


if __name__ == "__main__":
    main()

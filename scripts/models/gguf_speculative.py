#!/usr/bin/env python3
"""Generates the deterministic models of the speculative-decoding tests and benchmarks.

Usage: gguf_speculative.py <models-dir> <cache-dir>
  tiny-llama-q8_0.gguf     tiny-llama.gguf (gguf_llama.py, same seed and shape) quantised to Q8_0 with
                           llama.cpp's llama_model_quantize: a draft that agrees with tiny-llama often.
  spec-target-f32.gguf     a target for the speculative benchmarks: llama arch, 12 layers, n_embd 768,
                           12 heads / 4 KV heads, n_ff 2048 (bench-100m's shape), F32 (F16 values), so
                           that on a CPU it is limited by memory bandwidth as large models are (and a
                           batch of a few tokens costs about what one token does: the regime where
                           speculative decoding pays); the writes of layers 2..11 into the residual
                           stream (attn_output, ffn_down) are scaled by DEEP_SCALE, so what it predicts
                           is mostly decided by its first two layers.
  spec-draft-q8_0.gguf     its draft: those first two layers with the same embeddings, norms and output
                           head, nothing else, Q8_0 (an eighth of the target's bytes).
Random weights, fixed seeds, the bundle's llama SPM tokenizer (gguf_llama.py's helpers); same bytes on
every run. Each model is loaded with llama_model_load_from_file as a check.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gguf_llama  # noqa: E402  (its own argv handling reads the same two arguments)
from gguf_llama import MODELS, build_tool, gguf, write_llama  # noqa: E402
import gguf_write  # noqa: E402  (scripts/lib, on sys.path since gguf_llama.py)

DEEP_SCALE = 0.003    # the target's layers 2..11 barely move the residual stream: the draft agrees ~90%
OUTPUT_SCALE = 0.15  # a sharper output head than gguf_llama's 0.02: fewer near-ties between tokens


def write_stack(path: Path, name: str, seed: int, n_layer: int, keep: int, n_embd: int, n_head: int, n_head_kv: int,
                n_ff: int, n_ctx: int, f32: bool = False) -> None:
    """Writes the first `keep` of `n_layer` generated layers (all of them when keep == n_layer)."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "llama")
    file_type = gguf.LlamaFileType.ALL_F32 if f32 else gguf.LlamaFileType.MOSTLY_F16
    n_vocab = gguf_write.add_llama_header(w, name, file_type, n_ctx, n_embd, keep, n_ff, n_head, n_head_kv,
                                          gguf_llama.VOCAB, gguf_llama.CHATML)

    def mat(rows: int, cols: int, scale: float = 0.02) -> np.ndarray:
        m = gguf_write.f16_matrix(rng, rows, cols, scale)
        return m.astype(np.float32) if f32 else m  # the F32 target holds the F16 values exactly

    def norm(n: int) -> np.ndarray:
        return gguf_write.norm_vector(rng, n)

    # Every tensor is drawn in the same order for the target and the draft, so the draft's are the
    # target's; layers past `keep` are drawn (to keep the stream aligned) and left out.
    tensors = [("token_embd.weight", mat(n_vocab, n_embd))]
    for i in range(n_layer):
        s = 0.02 if i < 2 else 0.02 * DEEP_SCALE
        layer = gguf_write.llama_layer(f"blk.{i}.", mat, norm, n_embd, n_head, n_head_kv, n_ff,
                                       out=lambda rows, cols, s=s: mat(rows, cols, s))
        if i < keep:
            tensors += layer
    tensors += [("output_norm.weight", norm(n_embd)), ("output.weight", mat(n_vocab, n_embd, OUTPUT_SCALE))]
    for name_, t in tensors:
        w.add_tensor(name_, t)
    gguf_write.write_and_close(w)


def quantise(tool: Path, src: Path, out: Path, qtype: str, threads: str) -> None:
    tmp = out.with_suffix(".tmp")
    subprocess.run([str(tool), "quantize", str(src), str(tmp), qtype, threads], check=True)
    tmp.replace(out)


def main() -> None:
    MODELS.mkdir(parents=True, exist_ok=True)
    tool = build_tool()
    threads = str(min(2, os.cpu_count() or 1))

    # tiny-llama.gguf's exact bytes (gguf_llama.py's seed and shape), then Q8_0.
    f16 = MODELS / "tiny-llama-spec-f16.gguf.tmp"
    write_llama(f16, "gantry-tiny-llama", 1234, n_layer=2, n_embd=64, n_head=4, n_head_kv=2, n_ff=128, n_ctx=2048)
    quantise(tool, f16, MODELS / "tiny-llama-q8_0.gguf", "q8_0", threads)
    f16.unlink()

    shape = dict(n_layer=12, n_embd=768, n_head=12, n_head_kv=4, n_ff=2048, n_ctx=8192)
    for out, keep in (("spec-target-f32.gguf", 12), ("spec-draft-q8_0.gguf", 2)):
        f16 = MODELS / (out + ".f16.tmp")
        write_stack(f16, "gantry-spec-" + ("target" if keep == 12 else "draft"), 2468, keep=keep,
                    f32=out.endswith("-f32.gguf"), **shape)
        if out.endswith("-f32.gguf"):
            f16.replace(MODELS / out)
        else:
            quantise(tool, f16, MODELS / out, "q8_0", threads)
            f16.unlink()

    for m in ("tiny-llama-q8_0.gguf", "spec-target-f32.gguf", "spec-draft-q8_0.gguf"):
        subprocess.run([str(tool), "check", str(MODELS / m)], check=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Generates the deterministic GGUF test/benchmark models (random weights, fixed seeds).

Usage: gguf_llama.py <models-dir> <cache-dir>
  tiny-llama.gguf          llama arch, 2 layers, n_embd 64, 4 heads / 2 KV heads, n_ff 128, ctx 2048, F16
  bench-100m-q8_0.gguf     12 layers, n_embd 768, 12 heads / 4 KV heads, n_ff 2048, ctx 8192,
  bench-100m-q4_0.gguf     written in F16 and quantised with llama.cpp's own llama_model_quantize
The tokenizer (llama SPM, 32000 tokens) is copied from the bundle's models/ggml-vocab-llama-spm.gguf.
Each model is then loaded with llama_model_load_from_file as a check. Same bytes on every run.
"""
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

MODELS = Path(sys.argv[1])
CACHE = Path(sys.argv[2])
sys.path.insert(0, str(CACHE / "llama/src/gguf-py"))
import gguf  # noqa: E402

VOCAB = CACHE / "llama/src/models/ggml-vocab-llama-spm.gguf"
LLAMA = CACHE / "llama/install"
HERE = Path(__file__).resolve().parent
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def copy_tokenizer(w: "gguf.GGUFWriter") -> int:
    r = gguf.GGUFReader(VOCAB)
    n_vocab = 0
    for key, f in r.fields.items():
        if not key.startswith("tokenizer."):
            continue
        main = f.types[0]
        if main == gguf.GGUFValueType.ARRAY:
            sub = f.types[-1]
            vals = f.contents()
            if key == "tokenizer.ggml.tokens":
                n_vocab = len(vals)
            w.add_key_value(key, vals, main, sub_type=sub)
        else:
            w.add_key_value(key, f.contents(), main)
    return n_vocab


def write_llama(path: Path, name: str, seed: int, n_layer: int, n_embd: int, n_head: int, n_head_kv: int,
                n_ff: int, n_ctx: int) -> None:
    rng = np.random.default_rng(seed)
    hd = n_embd // n_head
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(name)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(10000.0)
    n_vocab = copy_tokenizer(w)
    w.add_vocab_size(n_vocab)
    w.add_chat_template(CHATML)

    def mat(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    def norm(n: int) -> np.ndarray:
        return (1.0 + rng.standard_normal(n, dtype=np.float32) * 0.01).astype(np.float32)

    # numpy shape is (ne1, ne0): rows x row-length.
    w.add_tensor("token_embd.weight", mat(n_vocab, n_embd))
    for i in range(n_layer):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm(n_embd))
        w.add_tensor(p + "attn_q.weight", mat(n_head * hd, n_embd))
        w.add_tensor(p + "attn_k.weight", mat(n_head_kv * hd, n_embd))
        w.add_tensor(p + "attn_v.weight", mat(n_head_kv * hd, n_embd))
        w.add_tensor(p + "attn_output.weight", mat(n_embd, n_head * hd))
        w.add_tensor(p + "ffn_norm.weight", norm(n_embd))
        w.add_tensor(p + "ffn_gate.weight", mat(n_ff, n_embd))
        w.add_tensor(p + "ffn_up.weight", mat(n_ff, n_embd))
        w.add_tensor(p + "ffn_down.weight", mat(n_embd, n_ff))
    w.add_tensor("output_norm.weight", norm(n_embd))
    w.add_tensor("output.weight", mat(n_vocab, n_embd))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def build_tool() -> Path:
    src = HERE / "gguf_quantize.cpp"
    tool_dir = CACHE / "gguf-tools"
    tool_dir.mkdir(parents=True, exist_ok=True)
    exe = tool_dir / "gguf_quantize"
    stamp = tool_dir / "gguf_quantize.sha256"
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    if not (exe.exists() and stamp.exists() and stamp.read_text() == digest):
        subprocess.run(["g++", "-std=c++17", "-O2", "-o", str(exe), str(src), f"-I{LLAMA}/include",
                        f"-L{LLAMA}/lib", f"-Wl,-rpath,{LLAMA}/lib", "-lllama", "-lggml", "-lggml-base"], check=True)
        stamp.write_text(digest)
    return exe


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

"""GGUF writing shared by the model generators in scripts/models/ (gguf_llama.py, gguf_reranker.py,
gguf_speculative.py, gguf_chat_templates.py, hf_checkpoints.py).

Not a generator itself: make-models.sh runs every scripts/models/*.py, so this lives in scripts/lib/ and
the generators import it (sys.path.insert of scripts/lib relative to their own file). make-models.sh
counts scripts/lib/*.py in every generator's stamp, so a change here regenerates the models.
Everything here is deterministic: the same arguments write the same bytes.

import_gguf(cache) must come first: it puts the bundle's gguf-py on sys.path, where the rest imports it.
"""
import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np

SCRIPTS = Path(__file__).resolve().parent.parent


def import_gguf(cache: Path):
    """The bundle's gguf-py (CACHE/llama/src/gguf-py), which the generators write with."""
    sys.path.insert(0, str(cache / "llama/src/gguf-py"))
    import gguf
    return gguf


def copy_tokenizer(w, vocab: Path) -> int:
    """Copies every tokenizer.* key of the GGUF file `vocab` (the bundle's vocab-only models) into `w`, in
    that file's order; returns the vocabulary size (the number of tokenizer.ggml.tokens)."""
    import gguf
    r = gguf.GGUFReader(vocab)
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


def add_shape(w, name: str, file_type, n_ctx: int, n_embd: int, n_layer: int, n_ff: int, n_head: int,
              n_head_kv: int) -> None:
    """The first keys of a decoder's header, in the order the generators write them."""
    w.add_name(name)
    w.add_file_type(file_type)
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)


def add_llama_header(w, name: str, file_type, n_ctx: int, n_embd: int, n_layer: int, n_ff: int, n_head: int,
                     n_head_kv: int, vocab: Path, chat_template) -> int:
    """A llama-arch header: the shape, RMS norm eps 1e-5, RoPE over the whole head (base 10000), the
    tokenizer of `vocab`, the vocabulary size and the chat template. Returns the vocabulary size."""
    add_shape(w, name, file_type, n_ctx, n_embd, n_layer, n_ff, n_head, n_head_kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_rope_freq_base(10000.0)
    n_vocab = copy_tokenizer(w, vocab)
    w.add_vocab_size(n_vocab)
    w.add_chat_template(chat_template)
    return n_vocab


def f16_matrix(rng: np.random.Generator, rows: int, cols: int, scale: float) -> np.ndarray:
    """rows x cols normal values times `scale`, as F16 (numpy shape (ne1, ne0): rows x row-length)."""
    return (rng.standard_normal((rows, cols), dtype=np.float32) * scale).astype(np.float16)


def norm_vector(rng: np.random.Generator, n: int) -> np.ndarray:
    """A norm's weights: 1 plus small noise, F32."""
    return (1.0 + rng.standard_normal(n, dtype=np.float32) * 0.01).astype(np.float32)


def llama_layer(prefix: str, mat, norm, n_embd: int, n_head: int, n_head_kv: int, n_ff: int, out=None,
                qk_norm: bool = False) -> list:
    """One llama-style block's (name, array) pairs, drawn in this order from mat(rows, cols) and norm(n):
    attention norm, q, k, v, (q and k norms when qk_norm: qwen3), attention output, FFN norm, gate, up,
    down. `out` (default: mat) draws the two projections that write into the residual stream (attention
    output and FFN down)."""
    out = out or mat
    hd = n_embd // n_head
    layer = [(prefix + "attn_norm.weight", norm(n_embd)),
             (prefix + "attn_q.weight", mat(n_head * hd, n_embd)),
             (prefix + "attn_k.weight", mat(n_head_kv * hd, n_embd)),
             (prefix + "attn_v.weight", mat(n_head_kv * hd, n_embd))]
    if qk_norm:
        layer += [(prefix + "attn_q_norm.weight", norm(hd)), (prefix + "attn_k_norm.weight", norm(hd))]
    layer += [(prefix + "attn_output.weight", out(n_embd, n_head * hd)),
              (prefix + "ffn_norm.weight", norm(n_embd)),
              (prefix + "ffn_gate.weight", mat(n_ff, n_embd)),
              (prefix + "ffn_up.weight", mat(n_ff, n_embd)),
              (prefix + "ffn_down.weight", out(n_embd, n_ff))]
    return layer


def write_and_close(w) -> None:
    """Writes the header, the key/values and the tensors added to `w`, and closes the file."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def build_quantize_tool(cache: Path) -> Path:
    """scripts/models/gguf_quantize.cpp built against the bundle's llama.cpp install into
    CACHE/gguf-tools (rebuilt only when its source changed): `quantize SRC DST TYPE THREADS` with
    llama.cpp's own llama_model_quantize, and `check FILE` (llama_model_load_from_file)."""
    llama = cache / "llama/install"
    src = SCRIPTS / "models/gguf_quantize.cpp"
    tool_dir = cache / "gguf-tools"
    tool_dir.mkdir(parents=True, exist_ok=True)
    exe = tool_dir / "gguf_quantize"
    stamp = tool_dir / "gguf_quantize.sha256"
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    if not (exe.exists() and stamp.exists() and stamp.read_text() == digest):
        subprocess.run(["g++", "-std=c++17", "-O2", "-o", str(exe), str(src), f"-I{llama}/include",
                        f"-L{llama}/lib", f"-Wl,-rpath,{llama}/lib", "-lllama", "-lggml", "-lggml-base"], check=True)
        stamp.write_text(digest)
    return exe

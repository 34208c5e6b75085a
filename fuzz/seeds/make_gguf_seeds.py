#!/usr/bin/env python3
"""Writes seed GGUF files for the gguf and gguf_hparams fuzz targets: one small, valid llama model (2 layers,
every hyperparameter llama.cpp reads, tensors whose shapes agree) and copies of it with one field changed
to a value llama.cpp would assert on, so the fuzzer starts at the validator's semantic checks rather than
at the magic.   usage: make_gguf_seeds.py OUT_DIR
"""
import math
import struct
import sys
from pathlib import Path

U32, F32, STRING, ARRAY = 4, 6, 8, 9
F32_TENSOR = 0


def s(text):
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value):
    out = s(key) + struct.pack("<I", vtype)
    if vtype == U32:
        return out + struct.pack("<I", value)
    if vtype == F32:
        return out + struct.pack("<f", value)
    if vtype == STRING:
        return out + s(value)
    elem, items = value  # ARRAY
    out += struct.pack("<IQ", elem, len(items))
    for item in items:
        out += s(item) if elem == STRING else struct.pack("<I" if elem == U32 else "<f", item)
    return out


def model(overrides):
    n_layer, n_embd, n_head, n_head_kv, n_ff, n_vocab = 2, 16, 4, 2, 32, 8
    head = n_embd // n_head
    meta = {
        "general.architecture": (STRING, "llama"),
        "general.name": (STRING, "seed"),
        "llama.block_count": (U32, n_layer),
        "llama.context_length": (U32, 64),
        "llama.embedding_length": (U32, n_embd),
        "llama.feed_forward_length": (U32, n_ff),
        "llama.attention.head_count": (U32, n_head),
        "llama.attention.head_count_kv": (U32, n_head_kv),
        "llama.attention.layer_norm_rms_epsilon": (F32, 1e-5),
        "llama.rope.freq_base": (F32, 10000.0),
        "tokenizer.ggml.model": (STRING, "llama"),
        "tokenizer.ggml.tokens": (ARRAY, (STRING, [f"t{i}" for i in range(n_vocab)])),
        "tokenizer.ggml.scores": (ARRAY, (F32, [0.0] * n_vocab)),
    }
    meta.update(overrides)
    tensors = [("token_embd.weight", [n_embd, n_vocab]), ("output_norm.weight", [n_embd]),
               ("output.weight", [n_embd, n_vocab])]
    for il in range(n_layer):
        b = f"blk.{il}."
        tensors += [(b + "attn_norm.weight", [n_embd]), (b + "attn_q.weight", [n_embd, n_head * head]),
                    (b + "attn_k.weight", [n_embd, n_head_kv * head]),
                    (b + "attn_v.weight", [n_embd, n_head_kv * head]), (b + "attn_output.weight", [n_embd, n_embd]),
                    (b + "ffn_norm.weight", [n_embd]), (b + "ffn_gate.weight", [n_embd, n_ff]),
                    (b + "ffn_up.weight", [n_embd, n_ff]), (b + "ffn_down.weight", [n_ff, n_embd])]
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta))
    for key, (vtype, value) in meta.items():
        out += kv(key, vtype, value)
    offset, infos = 0, b""
    for name, dims in tensors:
        infos += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", F32_TENSOR, offset)
        size = 4 * math.prod(dims)
        offset += (size + 31) // 32 * 32
    out += infos
    out += b"\0" * ((32 - len(out) % 32) % 32)
    return out + b"\0" * offset


SEEDS = {
    "valid": {},
    "block_count_0": {"llama.block_count": (U32, 0)},
    "block_count_max": {"llama.block_count": (U32, 0xFFFFFFFF)},
    "head_count_kv_0": {"llama.attention.head_count_kv": (U32, 0)},
    "head_count_kv_3": {"llama.attention.head_count_kv": (U32, 3)},
    "rms_eps_nan": {"llama.attention.layer_norm_rms_epsilon": (F32, float("nan"))},
    "embedding_0": {"llama.embedding_length": (U32, 0)},
    "context_0": {"llama.context_length": (U32, 0)},
    "per_layer_heads": {"llama.attention.head_count": (ARRAY, (U32, [4, 4]))},
    "rope_scaling_bad": {"llama.rope.scaling.type": (STRING, "sideways")},
    "experts_used_no_experts": {"llama.expert_used_count": (U32, 2)},
}

if __name__ == "__main__":
    out_dir = Path(sys.argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, overrides in SEEDS.items():
        (out_dir / f"{name}.gguf").write_bytes(model(overrides))
    print(f"wrote {len(SEEDS)} GGUF seeds to {out_dir}")

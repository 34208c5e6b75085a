#!/usr/bin/env python3
"""Small Hugging Face checkpoints of several architectures, and the GGUF files llama.cpp makes of them.

Usage: hf_checkpoints.py <models-dir> <cache-dir>

For each architecture below, <models-dir>/hf/<arch>/ holds a checkpoint laid out as the published ones are:
config.json (the transformers fields each family uses) and bf16 safetensors (model.safetensors, or shards with
model.safetensors.index.json), random weights from a fixed seed. It is then converted to GGUF as
llama.cpp's convert_hf_to_gguf.py would (that script needs torch, which no registry here offers, so the
conversion is redone here with the bundle's gguf-py and the converter's own rules: gguf-py's TensorNameMap
for the names, LlamaModel's q/k permutation, experts stacked into 3-D tensors, norms and 1-D tensors and
expert routers in f32, the rest in bf16 as `--outtype auto` picks for a bf16 checkpoint, Gemma's norm + 1),
and that file is quantised with llama.cpp's own llama_model_quantize (scripts/models/gguf_quantize.cpp) to
every type in QUANTS: <models-dir>/hf/<arch>-<type>.gguf. The tokenizer is the bundle's llama SPM
vocabulary (32000 tokens) for every family: memory does not depend on it beyond the vocabulary size.
Each GGUF is loaded once with llama_model_load_from_file as a check. Same bytes on every run.
"""
import json
import os
import shutil
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
OUT = MODELS / "hf"

# bf16 first: every type is written by llama_model_quantize, so every file has llama.cpp's tensor order.
QUANTS = ["bf16", "f16", "q8_0", "q6_k", "q5_k_m", "q5_1", "q4_k_m", "q4_k_s", "q4_0", "q3_k_m", "q2_k"]

N_VOCAB = 32000

# name: (HF architecture, model_type, config fields). hidden 256 = one K-quant super-block per row; qwen2's
# feed-forward of 640 is not a multiple of 256, so its ffn_down takes llama.cpp's fallback types.
ARCHS = {
    "llama": ("LlamaForCausalLM", "llama", dict(
        hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=768, max_position_embeddings=4096, rope_theta=500000.0, rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                          original_max_position_embeddings=2048))),
    "mistral": ("MistralForCausalLM", "mistral", dict(
        hidden_size=256, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
        intermediate_size=512, max_position_embeddings=8192, rope_theta=1000000.0, rms_norm_eps=1e-5,
        sliding_window=None, head_dim=32, tie_word_embeddings=False)),
    "qwen2": ("Qwen2ForCausalLM", "qwen2", dict(
        hidden_size=256, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=640, max_position_embeddings=4096, rope_theta=1000000.0, rms_norm_eps=1e-6,
        sliding_window=4096, use_sliding_window=False, max_window_layers=21, tie_word_embeddings=True)),
    "qwen3": ("Qwen3ForCausalLM", "qwen3", dict(
        hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=128,
        intermediate_size=768, max_position_embeddings=4096, rope_theta=1000000.0, rms_norm_eps=1e-6,
        tie_word_embeddings=False)),
    "gemma": ("GemmaForCausalLM", "gemma", dict(
        hidden_size=256, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=256,
        intermediate_size=1024, max_position_embeddings=8192, rope_theta=10000.0, rms_norm_eps=1e-6,
        hidden_act="gelu_pytorch_tanh", tie_word_embeddings=True)),
    "gemma2": ("Gemma2ForCausalLM", "gemma2", dict(
        hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        intermediate_size=512, max_position_embeddings=8192, rope_theta=10000.0, rms_norm_eps=1e-6,
        attn_logit_softcapping=50.0, final_logit_softcapping=30.0, sliding_window=1024,
        query_pre_attn_scalar=64, hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True)),
    "mixtral": ("MixtralForCausalLM", "mixtral", dict(
        hidden_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=512, max_position_embeddings=4096, rope_theta=1000000.0, rms_norm_eps=1e-5,
        num_local_experts=4, num_experts_per_tok=2, sliding_window=None, tie_word_embeddings=False)),
    "qwen2moe": ("Qwen2MoeForCausalLM", "qwen2_moe", dict(
        hidden_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=768, moe_intermediate_size=256, shared_expert_intermediate_size=512,
        num_experts=4, num_experts_per_tok=2, max_position_embeddings=4096, rope_theta=1000000.0,
        rms_norm_eps=1e-6, decoder_sparse_step=1, norm_topk_prob=False, tie_word_embeddings=False)),
}
# Published in shards with an index (the others as one model.safetensors).
SHARDED = {"mistral", "mixtral"}

GGUF_ARCH = {"LlamaForCausalLM": gguf.MODEL_ARCH.LLAMA, "MistralForCausalLM": gguf.MODEL_ARCH.LLAMA,
             "MixtralForCausalLM": gguf.MODEL_ARCH.LLAMA, "Qwen2ForCausalLM": gguf.MODEL_ARCH.QWEN2,
             "Qwen3ForCausalLM": gguf.MODEL_ARCH.QWEN3, "GemmaForCausalLM": gguf.MODEL_ARCH.GEMMA,
             "Gemma2ForCausalLM": gguf.MODEL_ARCH.GEMMA2, "Qwen2MoeForCausalLM": gguf.MODEL_ARCH.QWEN2MOE}


def bf16_bytes(a: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns (uint16), round to nearest even as torch does."""
    u = a.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_to_f32(b: np.ndarray) -> np.ndarray:
    return (b.astype(np.uint32) << 16).view(np.float32)


def checkpoint_tensors(cfg: dict, rng: np.random.Generator) -> dict:
    """The HF tensors of a family (name -> bf16 array), in the modules' order."""
    arch = cfg["architectures"][0]
    h, nl = cfg["hidden_size"], cfg["num_hidden_layers"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or h // nh
    ff = cfg["intermediate_size"]
    t = {}

    def w(name, *shape, norm=False):
        a = (1.0 + rng.standard_normal(shape, dtype=np.float32) * 0.01) if norm else \
            rng.standard_normal(shape, dtype=np.float32) * 0.02
        t[name] = bf16_bytes(a)

    w("model.embed_tokens.weight", cfg["vocab_size"], h)
    for i in range(nl):
        p = f"model.layers.{i}."
        w(p + "input_layernorm.weight", h, norm=True)
        w(p + "self_attn.q_proj.weight", nh * hd, h)
        w(p + "self_attn.k_proj.weight", nkv * hd, h)
        w(p + "self_attn.v_proj.weight", nkv * hd, h)
        if arch in ("Qwen2ForCausalLM", "Qwen2MoeForCausalLM"):
            w(p + "self_attn.q_proj.bias", nh * hd)
            w(p + "self_attn.k_proj.bias", nkv * hd)
            w(p + "self_attn.v_proj.bias", nkv * hd)
        if arch == "Qwen3ForCausalLM":
            w(p + "self_attn.q_norm.weight", hd, norm=True)
            w(p + "self_attn.k_norm.weight", hd, norm=True)
        w(p + "self_attn.o_proj.weight", h, nh * hd)
        w(p + "post_attention_layernorm.weight", h, norm=True)
        if arch == "Gemma2ForCausalLM":
            w(p + "pre_feedforward_layernorm.weight", h, norm=True)
            w(p + "post_feedforward_layernorm.weight", h, norm=True)
        if arch == "MixtralForCausalLM":
            w(p + "block_sparse_moe.gate.weight", cfg["num_local_experts"], h)
            for x in range(cfg["num_local_experts"]):
                e = p + f"block_sparse_moe.experts.{x}."
                w(e + "w1.weight", ff, h)
                w(e + "w2.weight", h, ff)
                w(e + "w3.weight", ff, h)
        elif arch == "Qwen2MoeForCausalLM":
            mff, sff = cfg["moe_intermediate_size"], cfg["shared_expert_intermediate_size"]
            w(p + "mlp.gate.weight", cfg["num_experts"], h)
            for x in range(cfg["num_experts"]):
                e = p + f"mlp.experts.{x}."
                w(e + "gate_proj.weight", mff, h)
                w(e + "up_proj.weight", mff, h)
                w(e + "down_proj.weight", h, mff)
            w(p + "mlp.shared_expert.gate_proj.weight", sff, h)
            w(p + "mlp.shared_expert.up_proj.weight", sff, h)
            w(p + "mlp.shared_expert.down_proj.weight", h, sff)
            w(p + "mlp.shared_expert_gate.weight", 1, h)
        else:
            w(p + "mlp.gate_proj.weight", ff, h)
            w(p + "mlp.up_proj.weight", ff, h)
            w(p + "mlp.down_proj.weight", h, ff)
    w("model.norm.weight", h, norm=True)
    if not cfg.get("tie_word_embeddings", False):
        w("lm_head.weight", cfg["vocab_size"], h)
    return t


def write_safetensors(path: Path, tensors: dict, names: list) -> None:
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for n in names:
        a = tensors[n]
        header[n] = {"dtype": "BF16", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for n in names:
            f.write(tensors[n].tobytes())


def write_checkpoint(d: Path, name: str, cfg: dict, tensors: dict) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    names = list(tensors)
    if name not in SHARDED:
        write_safetensors(d / "model.safetensors", tensors, names)
        return
    half = len(names) // 2
    parts = [names[:half], names[half:]]
    weight_map = {}
    for i, part in enumerate(parts):
        shard = f"model-{i + 1:05d}-of-{len(parts):05d}.safetensors"
        write_safetensors(d / shard, tensors, part)
        weight_map.update({n: shard for n in part})
    total = sum(tensors[n].nbytes for n in names)
    (d / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2) + "\n")


def permute(a: np.ndarray, n_head: int) -> np.ndarray:
    """LlamaModel.permute: q/k rows from HF's rotary layout to GGML's (shape unchanged)."""
    return a.reshape(n_head, 2, a.shape[0] // n_head // 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)


def converted_tensors(cfg: dict, tensors: dict):
    """(GGUF name, f32 data, keep-f32) as the converter's modify_tensors yields them."""
    arch = cfg["architectures"][0]
    tmap = gguf.get_tensor_name_map(GGUF_ARCH[arch], cfg["num_hidden_layers"])
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    f32 = {n: bf16_to_f32(a) for n, a in tensors.items()}
    out = []

    def emit(hf_name, data):
        new = tmap.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if new is None:
            raise ValueError(f"{arch}: cannot map {hf_name}")
        keep_f32 = data.ndim <= 1 or new.endswith("_norm.weight") or \
            any(k in new for k in ("ffn_gate_inp.", "ffn_gate_inp_shexp.")) or \
            new[-7:] not in (".weight", ".lora_a", ".lora_b")
        out.append((new, data, keep_f32))

    experts = {}
    for n, a in f32.items():
        if arch in ("GemmaForCausalLM", "Gemma2ForCausalLM") and n.endswith("norm.weight"):
            a = a + 1
        if arch in ("LlamaForCausalLM", "MistralForCausalLM", "MixtralForCausalLM"):
            if n.endswith(("q_proj.weight", "q_proj.bias")):
                a = permute(a, nh)
            if n.endswith(("k_proj.weight", "k_proj.bias")):
                a = permute(a, nkv)
        if ".experts." in n:  # stacked per layer once all of its experts are seen
            bid = int(n.split(".")[2])
            experts.setdefault(bid, {})[n] = a
            n_exp = cfg.get("num_local_experts") or cfg["num_experts"]
            if len(experts[bid]) < 3 * n_exp:
                continue
            if arch == "MixtralForCausalLM":
                for wid in ("w1", "w2", "w3"):
                    stack = np.stack([experts[bid][f"model.layers.{bid}.block_sparse_moe.experts.{x}.{wid}.weight"]
                                      for x in range(n_exp)])
                    emit(f"layers.{bid}.feed_forward.experts.{wid}.weight", stack)
            else:
                for wn in ("down_proj", "gate_proj", "up_proj"):
                    stack = np.stack([experts[bid][f"model.layers.{bid}.mlp.experts.{x}.{wn}.weight"]
                                      for x in range(n_exp)])
                    emit(f"model.layers.{bid}.mlp.experts.{wn}.weight", stack)
            continue
        emit(n, a)
    if (rs := cfg.get("rope_scaling")) and rs.get("rope_type") == "llama3":  # LlamaModel.generate_extra_tensors
        dim = cfg.get("head_dim") or cfg["hidden_size"] // nh
        base = cfg.get("rope_theta", 10000.0)
        freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
        lo, hi = rs["original_max_position_embeddings"] / rs["low_freq_factor"], \
            rs["original_max_position_embeddings"] / rs["high_freq_factor"]
        factors = []
        for f in freqs:
            wl = 2 * np.pi / f
            if wl < hi:
                factors.append(1.0)
            elif wl > lo:
                factors.append(rs["factor"])
            else:
                s = (rs["original_max_position_embeddings"] / wl - rs["low_freq_factor"]) / \
                    (rs["high_freq_factor"] - rs["low_freq_factor"])
                factors.append(1 / ((1 - s) / rs["factor"] + s))
        out.insert(0, ("rope_freqs.weight", np.array(factors, dtype=np.float32), True))
    return out


def write_gguf(path: Path, name: str, cfg: dict, tensors: dict) -> None:
    arch = cfg["architectures"][0]
    g = GGUF_ARCH[arch]
    w = gguf.GGUFWriter(str(path), gguf.MODEL_ARCH_NAMES[g])
    w.add_name(f"gantry-hf-{name}")
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    if (n_exp := cfg.get("num_local_experts") or cfg.get("num_experts")) is not None:
        w.add_expert_count(n_exp)
        w.add_expert_used_count(cfg["num_experts_per_tok"])
    if (hd := cfg.get("head_dim")) is not None:
        w.add_key_length(hd)
        w.add_value_length(hd)
    if g == gguf.MODEL_ARCH.LLAMA:
        w.add_vocab_size(cfg["vocab_size"])
        w.add_rope_dimension_count(cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])
    if g == gguf.MODEL_ARCH.QWEN2MOE:
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
    if g == gguf.MODEL_ARCH.GEMMA2:
        w.add_attn_logit_softcapping(cfg["attn_logit_softcapping"])
        w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
        w.add_sliding_window(cfg["sliding_window"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    gguf_write.copy_tokenizer(w, VOCAB)
    for new, data, keep_f32 in converted_tensors(cfg, tensors):
        qtype = gguf.GGMLQuantizationType.F32 if keep_f32 else gguf.GGMLQuantizationType.BF16
        w.add_tensor(new, gguf.quants.quantize(data.astype(np.float32), qtype), raw_dtype=qtype)
    gguf_write.write_and_close(w)


def main() -> None:
    tool = gguf_write.build_quantize_tool(CACHE)
    threads = str(min(2, os.cpu_count() or 1))
    tmp_root = OUT.with_name("hf.tmp")
    shutil.rmtree(tmp_root, ignore_errors=True)
    tmp_root.mkdir(parents=True)
    for i, (name, (hf_arch, model_type, fields)) in enumerate(ARCHS.items()):
        cfg = {"architectures": [hf_arch], "model_type": model_type, "vocab_size": N_VOCAB,
               "torch_dtype": "bfloat16", **fields}
        tensors = checkpoint_tensors(cfg, np.random.default_rng(7000 + i))
        write_checkpoint(tmp_root / name, name, cfg, tensors)
        converted = tmp_root / f"{name}.converted.gguf"
        write_gguf(converted, name, cfg, tensors)
        for q in QUANTS:
            out = tmp_root / f"{name}-{q}.gguf"
            subprocess.run([str(tool), "quantize", str(converted), str(out), q, threads], check=True,
                           stdout=subprocess.DEVNULL)
            subprocess.run([str(tool), "check", str(out)], check=True)
        converted.unlink()
    shutil.rmtree(OUT, ignore_errors=True)
    tmp_root.replace(OUT)


if __name__ == "__main__":
    main()

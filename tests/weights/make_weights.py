#!/usr/bin/env python3
"""Writes weight files for the weights tests, independently of Gantry: safetensors by the published
layout (8-byte little-endian header length, JSON header, data section), numpy's own .npy/.npz writers,
the onnx package (external data) and llama.cpp's gguf-py (incl. quantised types).

Usage: make_weights.py OUT_DIR GGUF_PY_DIR. Next to every file it writes expected/<file>/<tensor>.bin
(the exact element bytes) and expected/<file>.json ({name: [type, shape]})."""
import json
import os
import struct
import sys

import numpy as np

out = sys.argv[1]
sys.path.insert(0, sys.argv[2])
rng = np.random.default_rng(7)
os.makedirs(out, exist_ok=True)


def expect(file, tensors):
    d = os.path.join(out, "expected", file)
    os.makedirs(d, exist_ok=True)
    meta = {}
    for name, (type_name, shape, raw) in tensors.items():
        with open(os.path.join(d, name.replace("/", "_") + ".bin"), "wb") as f:
            f.write(raw)
        meta[name] = [type_name, list(shape)]
    with open(os.path.join(out, "expected", file + ".json"), "w") as f:
        json.dump(meta, f)


def write_safetensors(path, tensors, metadata=None):
    """tensors: name -> (ST dtype, shape, raw bytes). The layout of safetensors' reference writer."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, (_, _, raw) in tensors.items():
            f.write(raw)


ST_TO_GANTRY = {"F64": "f64", "F32": "f32", "F16": "f16", "BF16": "bf16", "F8_E4M3": "f8e4m3",
                "F8_E5M2": "f8e5m2", "BOOL": "bool", "U8": "u8", "I8": "i8", "U16": "u16", "I16": "i16",
                "U32": "u32", "I32": "i32", "U64": "u64", "I64": "i64"}


def all_dtypes():
    f = rng.standard_normal((3, 5)).astype(np.float32)
    t = {
        "f64": ("F64", (2, 3), rng.standard_normal((2, 3)).tobytes()),
        "f32": ("F32", (3, 5), f.tobytes()),
        "f16": ("F16", (4,), rng.standard_normal(4).astype(np.float16).tobytes()),
        # bf16: the upper halves of f32 values (any 16-bit pattern is a valid bf16)
        "bf16": ("BF16", (2, 2), (f.reshape(-1)[:4].view(np.uint32) >> 16).astype(np.uint16).tobytes()),
        "f8_e4m3": ("F8_E4M3", (6,), bytes([0x00, 0x38, 0xB8, 0x7E, 0x01, 0x40])),
        "f8_e5m2": ("F8_E5M2", (2, 3), bytes([0x00, 0x3C, 0xBC, 0x7B, 0x7C, 0x01])),
        "bool": ("BOOL", (5,), np.array([1, 0, 1, 1, 0], dtype=np.bool_).tobytes()),
        "u8": ("U8", (7,), np.arange(7, dtype=np.uint8).tobytes()),
        "i8": ("I8", (7,), np.arange(-3, 4, dtype=np.int8).tobytes()),
        "u16": ("U16", (3,), np.array([1, 300, 65535], dtype=np.uint16).tobytes()),
        "i16": ("I16", (3,), np.array([-32768, 0, 32767], dtype=np.int16).tobytes()),
        "u32": ("U32", (2,), np.array([7, 4000000000], dtype=np.uint32).tobytes()),
        "i32": ("I32", (2, 1), np.array([[-5], [123456]], dtype=np.int32).tobytes()),
        "u64": ("U64", (1,), np.array([2**63 + 5], dtype=np.uint64).tobytes()),
        "i64": ("I64", (2,), np.array([-(2**62), 42], dtype=np.int64).tobytes()),
        "scalar": ("F32", (), np.array(2.5, dtype=np.float32).tobytes()),
        "empty": ("F32", (0, 4), b""),
    }
    return t


# 1. One file with every dtype of the format, plus metadata.
st = all_dtypes()
write_safetensors(os.path.join(out, "all.safetensors"), st, {"format": "pt", "note": "written by numpy"})
expect("all.safetensors", {k: (ST_TO_GANTRY[v[0]], v[1], v[2]) for k, v in st.items()})

# 1b. A 1 MiB tensor behind a small header (listing a remote file must not download it).
bigt = {"big": ("F32", (512, 512), rng.standard_normal((512, 512)).astype(np.float32).tobytes())}
write_safetensors(os.path.join(out, "big.safetensors"), bigt)
expect("big.safetensors", {"big": ("f32", (512, 512), bigt["big"][2])})

# 2. A checkpoint directory: index + two shards + config.json.
ck = os.path.join(out, "ckpt")
os.makedirs(ck, exist_ok=True)
a = {"embed.weight": ("F32", (4, 3), rng.standard_normal((4, 3)).astype(np.float32).tobytes()),
     "layer.0.w": ("F16", (2, 2), rng.standard_normal((2, 2)).astype(np.float16).tobytes())}
b = {"layer.1.w": ("F32", (3,), rng.standard_normal(3).astype(np.float32).tobytes()),
     "lm_head.weight": ("BF16", (2,), np.array([0x3F80, 0xC000], dtype=np.uint16).tobytes())}
write_safetensors(os.path.join(ck, "model-00001-of-00002.safetensors"), a)
write_safetensors(os.path.join(ck, "model-00002-of-00002.safetensors"), b)
wm = {k: "model-00001-of-00002.safetensors" for k in a}
wm.update({k: "model-00002-of-00002.safetensors" for k in b})
with open(os.path.join(ck, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {"total_size": sum(len(v[2]) for v in list(a.values()) + list(b.values()))},
               "weight_map": wm}, f)
with open(os.path.join(ck, "config.json"), "w") as f:
    json.dump({"architectures": ["TinyModel"], "hidden_size": 3}, f)
expect("ckpt", {k: (ST_TO_GANTRY[v[0]], v[1], v[2]) for k, v in {**a, **b}.items()})

# 3. NumPy: .npy, .npz stored and deflated.
arrs = {"w": rng.standard_normal((3, 4)).astype(np.float32), "ids": np.arange(10, dtype=np.int64),
        "mask": np.array([True, False, True]), "h": rng.standard_normal(5).astype(np.float16),
        "big": rng.standard_normal((64, 64)).astype(np.float64)}
np.save(os.path.join(out, "single.npy"), arrs["w"])
np.savez(os.path.join(out, "stored.npz"), **arrs)
np.savez_compressed(os.path.join(out, "deflated.npz"), **arrs)
np_names = {np.float32: "f32", np.int64: "i64", np.bool_: "bool", np.float16: "f16", np.float64: "f64"}
exp = {k: (np_names[v.dtype.type], v.shape, v.tobytes()) for k, v in arrs.items()}
expect("stored.npz", exp)
expect("deflated.npz", exp)
expect("single.npy", {"single": ("f32", arrs["w"].shape, arrs["w"].tobytes())})

# 4. ONNX with external data (one file, offsets), one inline raw initializer and one typed-field one.
try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    od = os.path.join(out, "onnx")
    os.makedirs(od, exist_ok=True)
    w1 = rng.standard_normal((8, 4)).astype(np.float32)
    w2 = rng.integers(-100, 100, (16,)).astype(np.int64)
    small = np.array([1.5, -2.0], dtype=np.float32)
    typed = helper.make_tensor("typed", TensorProto.FLOAT, [3], [0.25, 0.5, -1.0], raw=False)
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "small"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
         numpy_helper.from_array(small, "small"), typed])
    model = helper.make_model(graph, producer_name="make_weights")
    onnx.external_data_helper.convert_model_to_external_data(
        model, all_tensors_to_one_file=True, location="weights.bin", size_threshold=100)
    onnx.save_model(model, os.path.join(od, "model.onnx"))
    expect("model.onnx", {"w1": ("f32", w1.shape, w1.tobytes()), "w2": ("i64", w2.shape, w2.tobytes()),
                          "small": ("f32", small.shape, small.tobytes()),
                          "typed": ("f32", (3,), np.array([0.25, 0.5, -1.0], dtype=np.float32).tobytes())})
except ImportError:
    pass

# 5. GGUF through gguf-py: plain and quantised tensors.
import gguf
from gguf import quants
gw = gguf.GGUFWriter(os.path.join(out, "tiny.gguf"), "llama")
gw.add_name("tiny")
g = {}
x = rng.standard_normal((4, 64)).astype(np.float32)
gw.add_tensor("f32", x)
g["f32"] = ("f32", (4, 64), x.tobytes())
h = rng.standard_normal((2, 32)).astype(np.float16)
gw.add_tensor("f16", h)
g["f16"] = ("f16", (2, 32), h.tobytes())
for qt, name in [(gguf.GGMLQuantizationType.Q8_0, "q8_0"), (gguf.GGMLQuantizationType.Q4_0, "q4_0"),
                 (gguf.GGMLQuantizationType.Q6_K, "q6_K")]:
    src = rng.standard_normal((2, 256)).astype(np.float32)
    if qt == gguf.GGMLQuantizationType.Q6_K:  # gguf-py cannot quantise Q6_K: random blocks, sane scales
        q = rng.integers(0, 256, (2, 210), dtype=np.uint8)
        q[:, 208:210] = np.frombuffer(np.array([0.01], dtype=np.float16).tobytes(), dtype=np.uint8)
    else:
        q = quants.quantize(src, qt)
    gw.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qt)
    g[name] = (name, (2, 256), q.tobytes())
    deq = quants.dequantize(q, qt).astype(np.float32)
    g[name + ".f32"] = ("f32", (2, 256), deq.tobytes())
gw.write_header_to_file()
gw.write_kv_data_to_file()
gw.write_tensors_to_file()
gw.close()
expect("tiny.gguf", g)

# 6. A PyTorch-style pickle zip and a bare pickle (never executed by Gantry).
import pickle
import zipfile
with zipfile.ZipFile(os.path.join(out, "torch.pt"), "w") as z:
    z.writestr("archive/data.pkl", pickle.dumps({"a": 1}, protocol=2))
with open(os.path.join(out, "bare.pickle-data"), "wb") as f:
    f.write(pickle.dumps({"a": 1}, protocol=4))
with zipfile.ZipFile(os.path.join(out, "renamed.npz"), "w") as z:
    z.writestr("archive/data.pkl", pickle.dumps({"a": 1}, protocol=2))
print("ok")

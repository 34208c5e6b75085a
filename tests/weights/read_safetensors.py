#!/usr/bin/env python3
"""Independent safetensors reader for the writer tests, written from the published layout
(https://huggingface.co/docs/safetensors): u64 little-endian header size N, N bytes of UTF-8 JSON, then
the byte buffer. Checks the layout rules and prints, as JSON, the metadata and every tensor's dtype,
shape, offsets, bytes (hex) and, for dtypes numpy has, its values (floats as float.hex, exact).

usage: read_safetensors.py FILE
"""
import json
import struct
import sys

import numpy as np

NUMPY = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
         "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}
SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8, "I32": 4, "I16": 2,
        "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1}


def value(v):
    if isinstance(v, float):
        return v.hex()
    if isinstance(v, bool):
        return int(v)
    return v


def main():
    data = open(sys.argv[1], "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    raw = data[8:8 + n]
    assert (8 + n) % 8 == 0, "data section not 8-byte aligned"
    text = raw.decode("utf-8")
    assert text.rstrip(" ").endswith("}"), "the header is JSON padded with spaces only"
    header = json.loads(text)
    buf = data[8 + n:]
    out = {"metadata": header.pop("__metadata__", None), "tensors": {}, "order": [], "header_order": [],
           "header_len": n}
    spans = []
    for name, info in header.items():
        assert set(info) == {"dtype", "shape", "data_offsets"}, info
        begin, end = info["data_offsets"]
        count = int(np.prod(info["shape"], dtype=np.int64)) if info["shape"] else 1
        assert end - begin == count * SIZE[info["dtype"]], name
        spans.append((begin, end, name))
        b = buf[begin:end]
        t = {"dtype": info["dtype"], "shape": info["shape"], "offsets": [begin, end], "hex": b.hex()}
        if info["dtype"] in NUMPY:
            arr = np.frombuffer(b, dtype=np.dtype(NUMPY[info["dtype"]])).reshape(info["shape"])
            t["values"] = [value(v) for v in arr.reshape(-1).tolist()]
        elif info["dtype"] == "BF16":
            bits = np.frombuffer(b, dtype="<u2").astype(np.uint32) << 16
            t["values"] = [value(v) for v in bits.view(np.float32).astype(np.float64).tolist()]
        out["tensors"][name] = t
        out["header_order"].append(name)
        assert begin % SIZE[info["dtype"]] == 0, name + " is not aligned to its element size"
    spans.sort()
    pos = 0
    for begin, end, name in spans:  # the buffer is entirely indexed: no holes, no overlaps
        assert begin == pos, "hole or overlap before " + name
        pos = end
    assert pos == len(buf), "trailing bytes after the last tensor"
    out["order"] = [name for _, _, name in spans]
    print(json.dumps(out))


if __name__ == "__main__":
    main()

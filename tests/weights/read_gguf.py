#!/usr/bin/env python3
"""Reads a GGUF file with llama.cpp's gguf-py (GGUFReader, the reference reader) for the writer tests and
prints, as JSON: version, alignment, every key/value (strings decoded) and every tensor's name, ggml type
id, ggml dims, byte count, data offset and bytes (hex).

usage: PYTHONPATH=<llama.cpp>/gguf-py read_gguf.py FILE
"""
import json
import sys

from gguf import GGUFReader
from gguf.constants import GGUFValueType


def main():
    r = GGUFReader(sys.argv[1])
    fields = {}
    for name, f in r.fields.items():
        if name.startswith("GGUF."):
            continue
        if f.types and f.types[0] == GGUFValueType.STRING:
            fields[name] = bytes(f.parts[f.data[0]]).decode("utf-8")
        else:
            fields[name] = [int(x) for x in f.parts[f.data[0]]]
    tensors = []
    for t in r.tensors:
        tensors.append({
            "name": t.name,
            "type": int(t.tensor_type),
            "ne": [int(x) for x in t.shape],
            "n_bytes": int(t.n_bytes),
            "data_offset": int(t.data_offset),
            "hex": bytes(t.data.tobytes()).hex(),
        })
    version = int(r.fields["GGUF.version"].parts[-1][0])
    print(json.dumps({"version": version, "alignment": int(r.alignment), "data_offset": int(r.data_offset),
                      "fields": fields, "tensors": tensors}))


if __name__ == "__main__":
    main()

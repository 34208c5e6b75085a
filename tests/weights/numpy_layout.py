#!/usr/bin/env python3
"""Independent oracle for the layout transformations: reads a raw row-major array, applies numpy's own
transpose / slicing / reshape, writes the result's raw bytes and prints its shape as JSON.

usage: numpy_layout.py DTYPE SHAPE OP ARG IN OUT
  DTYPE: a numpy dtype name (float32, uint16, ...); SHAPE: "2,3,4"
  OP: transpose (ARG "2,0,1"), slice (ARG numpy syntax "1:,::2"), reshape (ARG "4,-1")
"""
import json
import sys

import numpy as np


def parse_slice(text):
    parts = []
    for part in text.split(","):
        fields = [int(f) if f.strip() else None for f in part.split(":")]
        parts.append(slice(*fields))
    return tuple(parts)


def main():
    dtype, shape, op, arg, src, dst = sys.argv[1:7]
    dims = tuple(int(d) for d in shape.split(",")) if shape else ()
    a = np.fromfile(src, dtype=np.dtype(dtype)).reshape(dims)
    if op == "transpose":
        out = np.transpose(a, [int(p) for p in arg.split(",")])
    elif op == "slice":
        out = a[parse_slice(arg)]
    elif op == "reshape":
        out = a.reshape([int(d) for d in arg.split(",")])
    else:
        raise SystemExit("unknown op " + op)
    np.ascontiguousarray(out).tofile(dst)
    print(json.dumps({"shape": list(out.shape)}))


if __name__ == "__main__":
    main()

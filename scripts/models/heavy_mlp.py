"""Writes models/heavy_mlp_1024.onnx: a 1024 -> 4096 -> 4096 -> 1024 MLP (ReLU between, dynamic batch
dim), ~25M parameters. The serving benchmark's model: heavy enough that compute, not HTTP, dominates a
request, as in Triton's dynamic-batching example. Weights from a fixed seed (same bytes every run).
Called by scripts/make-models.sh as: heavy_mlp.py <models-dir> <cache-dir>.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DIMS = [1024, 4096, 4096, 1024]


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(20261124)
    nodes, inits = [], []
    x = "input"
    for i, (a, b) in enumerate(zip(DIMS, DIMS[1:])):
        w = (rng.standard_normal((a, b), dtype=np.float32) * (1.0 / np.sqrt(a))).astype(np.float32)
        bias = np.zeros(b, dtype=np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(bias, f"b{i}")]
        y = "output" if i == len(DIMS) - 2 else f"h{i}"
        gemm_out = y if i == len(DIMS) - 2 else f"g{i}"
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [gemm_out], name=f"fc{i}"))
        if i != len(DIMS) - 2:
            nodes.append(helper.make_node("Relu", [gemm_out], [y], name=f"relu{i}"))
        x = y
    graph = helper.make_graph(
        nodes, "heavy_mlp_1024",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", DIMS[0]])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", DIMS[-1]])],
        initializer=inits)
    model = helper.make_model(graph, producer_name="gantry-scripts", opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = os.path.join(out_dir, "heavy_mlp_1024.onnx")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(model.SerializeToString())
    os.replace(tmp, path)


if __name__ == "__main__":
    main()

"""Writes models/mlp_64_128_10.onnx: a 64 -> 128 (ReLU) -> 10 MLP with a dynamic batch dim.

Weights come from a fixed seed, so the bytes are the same on every run. Called by
scripts/make-models.sh as: mlp.py <models-dir> <cache-dir>.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(20240611)
    w1 = (rng.standard_normal((64, 128)) * 0.1).astype(np.float32)
    b1 = (rng.standard_normal(128) * 0.01).astype(np.float32)
    w2 = (rng.standard_normal((128, 10)) * 0.1).astype(np.float32)
    b2 = (rng.standard_normal(10) * 0.01).astype(np.float32)
    nodes = [
        helper.make_node("Gemm", ["input", "w1", "b1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["hr"], name="relu"),
        helper.make_node("Gemm", ["hr", "w2", "b2"], ["logits"], name="fc2"),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp_64_128_10",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        initializer=[numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))],
    )
    model = helper.make_model(graph, producer_name="gantry-scripts", opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = os.path.join(out_dir, "mlp_64_128_10.onnx")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(model.SerializeToString())
    os.replace(tmp, path)


if __name__ == "__main__":
    main()

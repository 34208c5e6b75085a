"""Writes models/slow_chain_256.onnx: a long chain of small steps (MatMul by a fixed 256x256 matrix, then
Tanh, 1500 times) over a float [64, 256] input: a few hundred milliseconds of one CPU thread, in 3000
nodes of well under a millisecond each. ONNX Runtime checks a run's terminate flag between nodes, so this
is the model on which cancelling a run midway is tested and timed (tests/backend/onnx/onnx_cancel_test.cpp,
bench/onnx_cancel_bench.cpp). Weights from a fixed seed (same bytes every run).
Called by scripts/make-models.sh as: slow_chain.py <models-dir> <cache-dir>.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WIDTH = 256
ROWS = 64
STEPS = 1500


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(20261202)
    # An orthogonal matrix keeps the values' scale through the chain (Tanh keeps them bounded anyway).
    q, _ = np.linalg.qr(rng.standard_normal((WIDTH, WIDTH)))
    w = q.astype(np.float32)
    nodes = []
    x = "input"
    for i in range(STEPS):
        m = f"m{i}"
        y = "output" if i == STEPS - 1 else f"t{i}"
        nodes.append(helper.make_node("MatMul", [x, "w"], [m], name=f"matmul{i}"))
        nodes.append(helper.make_node("Tanh", [m], [y], name=f"tanh{i}"))
        x = y
    graph = helper.make_graph(
        nodes, "slow_chain_256",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [ROWS, WIDTH])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [ROWS, WIDTH])],
        initializer=[numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, producer_name="gantry-scripts", opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = os.path.join(out_dir, "slow_chain_256.onnx")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(model.SerializeToString())
    os.replace(tmp, path)


if __name__ == "__main__":
    main()

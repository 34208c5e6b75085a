// A tiny, valid ONNX model (Identity on a float [N,4] tensor) made in memory for package tests.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

namespace gantry::test_util {

inline std::string tiny_onnx_bytes() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("gantry-test");
  m.set_producer_version("1.0");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("tiny");
  auto* n = g->add_node();
  n->set_op_type("Identity");
  n->add_input("x");
  n->add_output("y");
  for (auto* v : {g->add_input(), g->add_output()}) {
    v->set_name(v == &g->input(0) ? "x" : "y");
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_param("batch");
    t->mutable_shape()->add_dim()->set_dim_value(4);
  }
  std::string out;
  m.SerializeToString(&out);
  return out;
}

}  // namespace gantry::test_util

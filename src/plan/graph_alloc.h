// ggml's graph allocator (ggml/src/ggml-alloc.c at llama.cpp commit de3ff815), replayed on a description of a
// compute graph: which tensors a graph holds, in which order its nodes run, which are views and which ops
// may overwrite their input. ggml_gallocr sizes a backend's compute buffer as the high-water mark of a
// best-fit allocator that frees every tensor after its last use and lets in-place ops (add, mul, rms_norm,
// rope, soft_max, ...) reuse a parent's memory; the buffer is therefore not the largest single step but
// depends on where each tensor landed. Replaying the same decisions gives the same number, byte for byte.
//
// Internal to the planner (src/plan/compute_graph.cpp builds the graphs llama.cpp reserves).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace gantry::plan::graph {

// What ggml_are_same_layout compares: element type and the four dimensions (all tensors here are contiguous).
struct Layout {
  int type = 0;  // 0 f32, 1 f16, 2 i32, 3 i64
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  bool operator==(const Layout&) const = default;
};
Layout f32(int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1);
Layout f16(int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1);
Layout i32(int64_t ne0);
Layout i64(int64_t ne0);
uint64_t bytes_of(const Layout& l);

class Graph {
 public:
  // A tensor the graph reads but does not allocate: weights, the KV cache and views of it.
  int external(std::string name);
  // A graph input (token ids, positions, masks): allocated before any node, in the order declared.
  int input(std::string name, Layout layout);
  // A view (reshape, permute, view): no memory of its own; keeps `src` alive while it is used.
  int view(std::string name, int src, Layout layout);
  // A computed tensor; `inplace`: the op may reuse a parent's memory (ggml_op_can_inplace).
  int node(std::string name, bool inplace, Layout layout, std::vector<int> src);
  // A node whose result lives outside the compute buffer (set_rows into the KV cache): it only reads `src`.
  int effect(std::string name, std::vector<int> src);
  // Marks a tensor as a graph output: never freed, never reused.
  void output(int t);

  // ggml_gallocr_alloc_graph_impl + ggml_dyn_tallocr with `alignment`: the buffer size. With `trace`, one
  // line per allocation and free ("alloc NAME BYTES @OFFSET", "free NAME @OFFSET").
  uint64_t allocate(uint64_t alignment, std::vector<std::string>* trace = nullptr) const;

  size_t size() const { return tensors_.size(); }

 private:
  enum class Kind { kExternal, kInput, kView, kNode };
  struct Tensor {
    std::string name;
    Kind kind;
    Layout layout;
    bool inplace = false;
    bool output = false;
    int view_src = -1;
    std::vector<int> src;
  };
  int add(Tensor t);
  std::vector<Tensor> tensors_;
  std::vector<int> order_;  // nodes and views in execution order
};

}  // namespace gantry::plan::graph

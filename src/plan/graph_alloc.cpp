#include "plan/graph_alloc.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace gantry::plan::graph {
namespace {

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// ggml_dyn_tallocr with one chunk (a CPU buffer type has no maximum size).
class DynAllocator {
 public:
  explicit DynAllocator(uint64_t alignment) : alignment_(alignment) {
    blocks_.push_back({0, std::numeric_limits<uint64_t>::max() / 2});
  }

  uint64_t alloc(uint64_t size) {
    size = align_up(size, alignment_);
    // The best-fitting free block besides the last; else the last (which grows the buffer).
    int best = -1;
    uint64_t best_size = std::numeric_limits<uint64_t>::max();
    for (int i = 0; i + 1 < static_cast<int>(blocks_.size()); ++i) {
      if (blocks_[i].size >= size && blocks_[i].size <= best_size) {
        best = i;
        best_size = blocks_[i].size;
      }
    }
    if (best == -1) best = static_cast<int>(blocks_.size()) - 1;
    Block& b = blocks_[best];
    const uint64_t at = b.offset;
    b.offset += size;
    b.size -= size;
    if (b.size == 0) blocks_.erase(blocks_.begin() + best);
    max_size_ = std::max(max_size_, at + size);
    return at;
  }

  // ggml_dyn_tallocr_free_bytes: merges with the block before or after, else inserts in address order.
  void free(uint64_t offset, uint64_t size) {
    size = align_up(size, alignment_);
    for (size_t i = 0; i < blocks_.size(); ++i) {
      Block& b = blocks_[i];
      if (b.offset + b.size == offset) {
        b.size += size;
        if (i + 1 < blocks_.size() && b.offset + b.size == blocks_[i + 1].offset) {
          b.size += blocks_[i + 1].size;
          blocks_.erase(blocks_.begin() + static_cast<long>(i) + 1);
        }
        return;
      }
      if (offset + size == b.offset) {
        b.offset = offset;
        b.size += size;
        if (i > 0 && blocks_[i - 1].offset + blocks_[i - 1].size == b.offset) {
          blocks_[i - 1].size += b.size;
          blocks_.erase(blocks_.begin() + static_cast<long>(i));
        }
        return;
      }
    }
    size_t pos = 0;
    while (pos < blocks_.size() && blocks_[pos].offset < offset) ++pos;
    blocks_.insert(blocks_.begin() + static_cast<long>(pos), Block{offset, size});
  }

  uint64_t max_size() const { return max_size_; }
  uint64_t alignment() const { return alignment_; }

 private:
  struct Block {
    uint64_t offset, size;
  };
  uint64_t alignment_;
  std::vector<Block> blocks_;
  uint64_t max_size_ = 0;
};

}  // namespace

Layout f32(int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) { return {0, {ne0, ne1, ne2, ne3}}; }
Layout f16(int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) { return {1, {ne0, ne1, ne2, ne3}}; }
Layout i32(int64_t ne0) { return {2, {ne0, 1, 1, 1}}; }
Layout i64(int64_t ne0) { return {3, {ne0, 1, 1, 1}}; }

uint64_t bytes_of(const Layout& l) {
  static constexpr uint64_t kSize[] = {4, 2, 4, 8};
  uint64_t n = kSize[l.type];
  for (int64_t d : l.ne) n *= static_cast<uint64_t>(d);
  return n;
}

int Graph::add(Tensor t) {
  tensors_.push_back(std::move(t));
  return static_cast<int>(tensors_.size()) - 1;
}

int Graph::external(std::string name) {
  return add({std::move(name), Kind::kExternal, {}, false, false, -1, {}});
}

int Graph::input(std::string name, Layout layout) {
  return add({std::move(name), Kind::kInput, layout, false, false, -1, {}});
}

int Graph::view(std::string name, int src, Layout layout) {
  // ggml points every view at the tensor that owns the memory, never at another view.
  const int root = tensors_[src].kind == Kind::kView ? tensors_[src].view_src : src;
  const int id = add({std::move(name), Kind::kView, layout, false, false, root, {src}});
  order_.push_back(id);
  return id;
}

int Graph::node(std::string name, bool inplace, Layout layout, std::vector<int> src) {
  const int id = add({std::move(name), Kind::kNode, layout, inplace, false, -1, std::move(src)});
  order_.push_back(id);
  return id;
}

void Graph::output(int t) { tensors_[t].output = true; }

int Graph::effect(std::string name, std::vector<int> src) {
  const int id = add({std::move(name), Kind::kExternal, {}, false, false, -1, std::move(src)});
  order_.push_back(id);
  return id;
}

uint64_t Graph::allocate(uint64_t alignment, std::vector<std::string>* trace) const {
  struct State {
    int n_children = 0, n_views = 0;
    bool allocated = false;
    uint64_t offset = 0;
  };
  std::vector<State> st(tensors_.size());
  DynAllocator alloc(alignment);

  auto free_tensor = [&](int t) {
    if (tensors_[t].output) return;
    alloc.free(st[t].offset, bytes_of(tensors_[t].layout));
    st[t].allocated = false;
    if (trace) trace->push_back(fmt::format("free {} @{}", tensors_[t].name, st[t].offset));
  };
  // ggml_gallocr_allocate_node.
  auto allocate_node = [&](int t) {
    const Tensor& n = tensors_[t];
    if (n.kind == Kind::kExternal || n.kind == Kind::kView || st[t].allocated) return;
    st[t].allocated = true;
    if (n.inplace) {
      for (int p : n.src) {
        const Tensor& parent = tensors_[p];
        if (!st[p].allocated || parent.kind == Kind::kExternal || parent.kind == Kind::kView) continue;
        if (parent.output) continue;
        if (!(parent.layout == n.layout)) continue;
        if (st[p].n_children != 1 || st[p].n_views != 0) continue;
        st[t].offset = st[p].offset;
        st[p].allocated = false;  // the child owns the memory now
        const uint64_t ps = align_up(bytes_of(parent.layout), alignment);
        const uint64_t ns = align_up(bytes_of(n.layout), alignment);
        if (ps > ns) alloc.free(st[p].offset + ns, ps - ns);
        if (trace) trace->push_back(fmt::format("reuse {} for {}", parent.name, n.name));
        return;
      }
    }
    st[t].offset = alloc.alloc(bytes_of(n.layout));
    if (trace) trace->push_back(fmt::format("alloc {} {} @{}", n.name, bytes_of(n.layout), st[t].offset));
  };

  for (size_t t = 0; t < tensors_.size(); ++t)
    if (tensors_[t].kind == Kind::kInput) allocate_node(static_cast<int>(t));
  for (int t : order_) {
    if (tensors_[t].kind == Kind::kView) ++st[tensors_[t].view_src].n_views;
    for (int p : tensors_[t].src) ++st[p].n_children;
  }
  for (int t : order_) {
    for (int p : tensors_[t].src) allocate_node(p);
    allocate_node(t);
    for (int p : tensors_[t].src) {
      State& ps = st[p];
      --ps.n_children;
      if (ps.n_children != 0 || ps.n_views != 0) continue;
      if (tensors_[p].kind == Kind::kView) {
        const int vs = tensors_[p].view_src;
        --st[vs].n_views;
        if (st[vs].n_views == 0 && st[vs].n_children == 0 && st[vs].allocated) free_tensor(vs);
      } else if (ps.allocated) {
        free_tensor(p);
      }
    }
  }
  return alloc.max_size();
}

}  // namespace gantry::plan::graph

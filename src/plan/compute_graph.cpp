// The graphs below follow llama.cpp's builders op by op, in the order ggml_build_forward_expand leaves the
// nodes (checked against ggml-alloc's own allocation trace for every architecture listed in `kArchs`):
// llm_build_llama (llama, mistral, mixtral), llm_build_qwen2, llm_build_qwen3, llm_build_qwen2moe,
// llm_build_gemma, llm_build_gemma2_iswa, with llm_graph_context::build_attn (flash attention or
// mul_mat + soft_max), build_ffn (SwiGLU / GeGLU) and build_moe_ffn (softmax gating, top-k by argsort).
#include "plan/compute_graph.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include "plan/graph_alloc.h"

namespace gantry::plan {
namespace {

using graph::f16;
using graph::f32;
using graph::Graph;
using graph::i32;
using graph::i64;
using graph::Layout;

struct Arch {
  std::string_view name;
  bool embd_scale = false;  // gemma: inp_scaled = embd * sqrt(n_embd)
  bool qkv_bias = false;    // qwen2: q/k/v projections with a bias
  bool qk_norm = false;     // qwen3: RMS norm of q and k per head before rope
  bool q_scale = false;     // gemma: q scaled after rope
  bool k_before_v = false;  // gemma2 projects k before v
  bool post_norms = false;  // gemma2: norms after attention and after the feed-forward
  bool geglu = false;       // gemma: GELU-gated feed-forward
  bool softcap = false;     // gemma2: logits (and attention without flash attention) soft-capped
  bool iswa = false;        // gemma2: a second KV cache for the sliding-window layers, with its own inputs
  bool moe_norm_w = false;  // mixtral: the top-k weights renormalised (sum, clamp, div)
};

constexpr Arch kArchs[] = {
    {"llama", false, false, false, false, false, false, false, false, false, true},
    {"qwen2", false, true},
    {"qwen3", false, false, true},
    {"qwen2moe", false, true},
    {"gemma", true, false, false, true, false, false, true},
    {"gemma2", true, false, false, true, true, true, true, true, true},
};

const Arch* find_arch(std::string_view name) {
  for (const auto& a : kArchs)
    if (a.name == name) return &a;
  return nullptr;
}

struct KvInputs {
  int k_idxs = -1, v_idxs = -1, mask = -1;
  int k_rot = -1, v_rot = -1;  // Hadamard matrices of a quantised cache (-1: none)
};

class Builder {
 public:
  Builder(const ModelProfile& m, const GraphShape& s, const Arch& a) : m_(m), s_(s), a_(a) {}

  Graph build() {
    const int64_t E = m_.n_embd, T = s_.n_tokens, O = s_.n_outputs;
    const int tokens = g_.input("inp_tokens", i32(T));
    g_.input("inp_embd", f32(E, T));
    // Inputs are allocated in the order the graph first reaches them (ggml's leaf order): positions at the
    // first rope, a KV cache's indices and mask at the first layer using that cache, the output rows last.
    w_ = g_.external("weights");
    cache_ = g_.external("kv_cache");

    int inp = g_.node("embd", false, f32(E, T), {w_, tokens});
    if (a_.embd_scale) inp = g_.node("inp_scaled", true, f32(E, T), {inp});
    for (uint32_t il = 0; il < m_.n_layer(); ++il) inp = layer(il, inp);
    const int norm = g_.node("norm", true, f32(E, O), {inp});
    const int result_norm = g_.node("result_norm", true, f32(E, O), {norm, w_});
    g_.output(result_norm);
    int logits = g_.node("result_output", false, f32(m_.n_vocab, O), {w_, result_norm});
    if (a_.softcap) logits = softcap(logits, f32(m_.n_vocab, O));
    g_.output(logits);
    return std::move(g_);
  }

 private:
  // The rotation llama_kv_cache builds for a quantised cache: k by the largest power of two from 64 that
  // divides the head width, v by 64 (when the widths are multiples of 64).
  int64_t k_rot_size() const {
    const int64_t hk = m_.layers[0].n_embd_head_k;
    if (!s_.kv_quantised || hk % 64 != 0) return 0;
    int64_t n = 64;
    while (hk % (n * 2) == 0) n *= 2;
    return n;
  }
  int64_t v_rot_size() const { return s_.kv_quantised && m_.layers[0].n_embd_head_v % 64 == 0 ? 64 : 0; }

  // llama_mul_mat_hadamard: x as rows of `rot`'s width, multiplied, viewed back.
  int hadamard(int x, int rot, int64_t n, const Layout& shape, bool contiguous) {
    const int64_t rows = static_cast<int64_t>(graph::bytes_of(shape) / 4) / n;
    const int r =
        contiguous ? g_.view("rot_in", x, f32(n, rows)) : g_.node("rot_in", false, f32(n, rows), {x});
    const int mm = g_.node("rot", false, f32(n, rows), {rot, r});
    return g_.view("rot_out", mm, shape);
  }

  KvInputs kv_inputs(uint32_t n_kv, KvInputs k) {
    const int64_t T = s_.n_tokens;
    uint32_t v_max = 0;
    for (const auto& l : m_.layers) v_max = std::max(v_max, l.n_head_kv * l.n_embd_head_v);
    k.k_idxs = g_.input("attn_inp_k_idxs", i64(T));
    k.v_idxs = g_.input("attn_inp_v_idxs", i64(s_.flash_attn ? T : T * v_max));
    const Layout mask = s_.flash_attn ? f16(n_kv, T / s_.n_stream, 1, s_.n_stream)
                                      : f32(n_kv, T / s_.n_stream, 1, s_.n_stream);
    k.mask = g_.input("attn_inp_kq_mask", mask);
    return k;
  }

  int rms_mul(const char* name, int x, const Layout& l) {
    const int n = g_.node("norm", true, l, {x});
    return g_.node(name, true, l, {n, w_});
  }

  int softcap(int x, const Layout& l) {
    x = g_.node("softcap_scale", true, l, {x});
    x = g_.node("softcap_tanh", true, l, {x});
    return g_.node("softcap_unscale", true, l, {x});
  }

  // A projection of `in` to `rows` per token (+ bias), as the [width, heads, T] view attention reads.
  std::pair<int, int> project(const char* name, int in, int64_t width, int64_t heads, int64_t T) {
    int t = g_.node(name, false, f32(width * heads, T), {w_, in});
    if (a_.qkv_bias) t = g_.node(name, true, f32(width * heads, T), {t, w_});
    const int r = g_.view(name, t, f32(width, heads, T));
    return {t, r};
  }

  int layer(uint32_t il, int inp) {
    const LayerProfile& L = m_.layers[il];
    const int64_t E = m_.n_embd, T = s_.n_tokens, O = s_.n_outputs;
    const int64_t nh = L.n_head, nkv = L.n_head_kv, hk = L.n_embd_head_k, hv = L.n_embd_head_v;
    const bool swa = a_.iswa && L.sliding_window;
    // Inputs in the order the graph reaches them: q's chain (its rotation matrix, then the positions at its
    // rope), v's rotation, then the cache indices and the mask.
    KvInputs& rot = swa ? swa_rot_ : base_rot_;
    const int64_t nk_rot = k_rot_size(), nv_rot = v_rot_size();
    if (nk_rot > 0 && rot.k_rot < 0) rot.k_rot = g_.input("attn_inp_k_rot", f32(nk_rot, nk_rot));
    if (pos_ < 0) pos_ = g_.input("inp_pos", i32(T));
    const int64_t n_kv = swa ? s_.n_kv_swa : s_.n_kv;
    const bool last = il + 1 == m_.n_layer();

    const int attn_norm = rms_mul("attn_norm", inp, f32(E, T));
    auto [q_raw, q] = project("Qcur", attn_norm, hk, nh, T);
    (void)q_raw;
    if (a_.qk_norm) q = rms_mul("Qcur_normed", q, f32(hk, nh, T));
    q = g_.node("Qcur_rope", true, f32(hk, nh, T), {q, pos_});
    if (a_.q_scale) q = g_.node("Qcur_scaled", true, f32(hk, nh, T), {q});
    if (nk_rot > 0) q = hadamard(q, rot.k_rot, nk_rot, f32(hk, nh, T), true);
    int k = -1, v = -1;
    auto make_k = [&] {
      k = project("Kcur", attn_norm, hk, nkv, T).second;
      if (a_.qk_norm) k = rms_mul("Kcur_normed", k, f32(hk, nkv, T));
      k = g_.node("Kcur_rope", true, f32(hk, nkv, T), {k, pos_});
      if (nk_rot > 0) k = hadamard(k, rot.k_rot, nk_rot, f32(hk, nkv, T), true);
    };
    auto make_v = [&] {
      v = project("Vcur", attn_norm, hv, nkv, T).second;
      if (nv_rot > 0) {
        if (rot.v_rot < 0) rot.v_rot = g_.input("attn_inp_v_rot", f32(nv_rot, nv_rot));
        v = hadamard(v, rot.v_rot, nv_rot, f32(hv, nkv, T), true);
      }
    };
    if (a_.k_before_v) {  // the iSWA attention expands q, k, v; the other q, v, k
      make_k();
      make_v();
    } else {
      make_v();
      make_k();
    }
    std::optional<KvInputs>& kv_slot = swa ? swa_ : base_;
    if (!kv_slot) kv_slot = kv_inputs(swa ? s_.n_kv_swa : s_.n_kv, rot);
    const KvInputs& kv = *kv_slot;
    // Store K and V in the cache (set_rows writes there, not into the compute buffer).
    g_.effect("set_rows_k", {g_.view("Kcur_view", k, f32(hk * nkv, T)), kv.k_idxs, cache_});
    int kqv_out;
    if (s_.flash_attn) {
      g_.effect("set_rows_v", {g_.view("Vcur_view", v, f32(hv * nkv, T)), kv.v_idxs, cache_});
      const int qp = g_.view("Qcur_perm", g_.view("Qcur_view", q, f32(hk, nh, T)), f32(hk, T, nh));
      const int kp =
          g_.view("cache_k_perm", g_.view("cache_k_view", cache_, f16(hk, nkv, n_kv)), f16(hk, n_kv, nkv));
      const int vp =
          g_.view("cache_v_perm", g_.view("cache_v_view", cache_, f16(hv, nkv, n_kv)), f16(hv, n_kv, nkv));
      const int fa = g_.node("fattn", false, f32(hv, nh, T), {qp, kp, vp, kv.mask});
      kqv_out = g_.view("kqv_out", fa, f32(hv * nh, T));
    } else {
      const int vr =
          g_.view("Vcur_reshaped", g_.view("Vcur_reshaped", v, f32(hv * nkv, T)), f32(1, hv * nkv * T));
      g_.effect("set_rows_v", {vr, kv.v_idxs, g_.view("cache_v_reshaped", cache_, f16(1, hv * nkv * n_kv))});
      const int vp =
          g_.view("cache_v_perm", g_.view("cache_v_view", cache_, f16(n_kv, hv, nkv)), f16(n_kv, hv, nkv));
      const int kp =
          g_.view("cache_k_perm", g_.view("cache_k_view", cache_, f16(hk, nkv, n_kv)), f16(hk, n_kv, nkv));
      const int qp = g_.view("Qcur_perm", g_.view("Qcur_view", q, f32(hk, nh, T)), f32(hk, T, nh));
      int kq = g_.node("kq", false, f32(n_kv, T, nh), {kp, qp});
      if (a_.softcap) kq = softcap(kq, f32(n_kv, T, nh));
      const int sm = g_.node("kq_soft_max", true, f32(n_kv, T, nh), {kq, kv.mask});
      const int kqv = g_.node("kqv", false, f32(hv, T, nh), {vp, sm});
      kqv_out = g_.node("kqv_out", false, f32(hv * nh, T), {g_.view("kqv_perm", kqv, f32(hv, nh, T))});
    }
    if (nv_rot > 0) kqv_out = hadamard(kqv_out, rot.v_rot, nv_rot, f32(hv * nh, T), true);
    int attn_out = g_.node("attn_out", false, f32(E, T), {w_, kqv_out});
    const int64_t To = last ? O : T;
    if (last) out_ids_ = g_.input("out_ids", i32(O));
    int residual = inp;
    if (a_.post_norms) {
      if (last) attn_out = g_.node("attn_out_rows", false, f32(E, O), {attn_out, out_ids_});
      attn_out = rms_mul("attn_post_norm", attn_out, f32(E, To));
      if (last) residual = g_.node("inp_rows", false, f32(E, O), {inp, out_ids_});
    } else if (last) {
      attn_out = g_.node("attn_out_rows", false, f32(E, O), {attn_out, out_ids_});
      residual = g_.node("inp_rows", false, f32(E, O), {inp, out_ids_});
    }
    const int ffn_inp = g_.node("ffn_inp", true, f32(E, To), {attn_out, residual});
    const int ffn_norm = rms_mul("ffn_norm", ffn_inp, f32(E, To));
    int ffn_out = m_.n_expert > 0 ? moe(ffn_norm, To) : dense(ffn_norm, L.n_ff, To);
    if (a_.post_norms) ffn_out = rms_mul("ffn_post_norm", ffn_out, f32(E, To));
    return g_.node("l_out", true, f32(E, To), {ffn_out, ffn_inp});
  }

  int dense(int x, int64_t ff, int64_t T) {
    const int64_t E = m_.n_embd;
    const int gate = g_.node("ffn_gate", false, f32(ff, T), {w_, x});
    const int up = g_.node("ffn_up", false, f32(ff, T), {w_, x});
    const int act = g_.node(a_.geglu ? "ffn_geglu" : "ffn_swiglu", false, f32(ff, T), {gate, up});
    return g_.node("ffn_out", false, f32(E, T), {w_, act});
  }

  int moe(int x, int64_t T) {
    const int64_t E = m_.n_embd, ne = m_.n_expert, nu = m_.n_expert_used, ff = m_.n_ff_exp;
    const int logits = g_.node("ffn_moe_logits", false, f32(ne, T), {w_, x});
    const int probs = g_.node("ffn_moe_probs", true, f32(ne, T), {logits});
    const int probs_r = g_.view("ffn_moe_probs_r", probs, f32(1, ne, T));
    const int argsort = g_.node("ffn_moe_argsort", false, Layout{2, {ne, T, 1, 1}}, {probs});
    const int topk = g_.view("ffn_moe_topk", argsort, Layout{2, {nu, T, 1, 1}});
    int weights = g_.node("ffn_moe_weights", false, f32(1, nu, T), {probs_r, topk});
    if (a_.moe_norm_w) {
      const int wr = g_.view("ffn_moe_weights_r", weights, f32(nu, T));
      const int sum = g_.node("ffn_moe_weights_sum", false, f32(1, T), {wr});
      const int clamped = g_.node("ffn_moe_weights_sum_clamped", true, f32(1, T), {sum});
      const int normed = g_.node("ffn_moe_weights_norm", true, f32(nu, T), {wr, clamped});
      weights = g_.view("ffn_moe_weights_norm_r", normed, f32(1, nu, T));
    }
    const int xr = g_.view("ffn_norm_r", x, f32(E, 1, T));
    const int gate = g_.node("ffn_moe_gate", false, f32(ff, nu, T), {w_, xr, topk});
    const int up = g_.node("ffn_moe_up", false, f32(ff, nu, T), {w_, xr, topk});
    const int act = g_.node("ffn_moe_swiglu", false, f32(ff, nu, T), {gate, up});
    const int down = g_.node("ffn_moe_down", false, f32(E, nu, T), {w_, act, topk});
    const int weighted = g_.node("ffn_moe_weighted", true, f32(E, nu, T), {down, weights});
    std::vector<int> views;
    for (int64_t i = 0; i < nu; ++i) views.push_back(g_.view("ffn_moe_expert", weighted, f32(E, T)));
    int out = views[0];
    for (size_t i = 1; i < views.size(); ++i) out = g_.node("ffn_moe_out", true, f32(E, T), {out, views[i]});
    if (views.size() == 1) out = g_.node("ffn_moe_out", false, f32(E, T), {out});
    if (m_.n_ff_shexp > 0) {
      const int shexp = dense(x, m_.n_ff_shexp, T);
      const int gi = g_.node("ffn_shexp_gate_inp", false, f32(1, T), {w_, x});
      const int silu = g_.node("shexp_silu", true, f32(1, T), {gi});
      const int gate_sh = g_.node("ffn_shexp_gate", true, f32(1, T), {silu, gi});
      const int sh_out = g_.node("ffn_shexp_out", true, f32(E, T), {shexp, gate_sh});
      out = g_.node("ffn_out", true, f32(E, T), {out, sh_out});
    }
    return out;
  }

  const ModelProfile& m_;
  const GraphShape& s_;
  const Arch& a_;
  Graph g_;
  int pos_ = -1, out_ids_ = -1, w_ = -1, cache_ = -1;
  std::optional<KvInputs> base_, swa_;
  KvInputs base_rot_, swa_rot_;
};

}  // namespace

std::optional<uint64_t> simulated_compute_bytes(const ModelProfile& m, const GraphShape& s,
                                                std::vector<std::string>* trace) {
  const Arch* a = find_arch(m.architecture);
  if (a == nullptr || s.n_stream != 1 || s.n_tokens == 0 || m.layers.empty()) {
    return std::nullopt;
  }
  if (m.n_expert > 0 && (m.n_expert_used == 0 || m.n_ff_exp == 0)) return std::nullopt;
  Builder b(m, s, *a);
  const Graph g = b.build();
  constexpr uint64_t kCpuAlignment = 32;  // ggml-cpu's TENSOR_ALIGNMENT
  return g.allocate(kCpuAlignment, trace);
}

}  // namespace gantry::plan

#include "models/layer.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <set>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lowerings/attention/geometry.h"  // AttentionReadsDense
#include "lowerings/registry.h"
#include "lowerings/rows/row_norms.h"  // HeadIsItem
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/tables_rows_common.h"  // WholeTiles
#include "spatial/status_macros.h"
#include "spatial/tensor_data.h"

namespace spatial {
namespace {

proto::OpSpec Spec(const std::string& out, std::initializer_list<const char*> operands) {
  proto::OpSpec s;
  s.set_out(out);
  for (const char* o : operands) s.add_operands()->set_name(o);
  return s;
}

// `dense_heads`: a per-head norm over dense token rows of that many heads (FusedRowSpec.dense_heads); 0, flat.
proto::OpSpec Norm(const std::string& out, const char* in, const char* w, int64_t rows, int64_t cols, double eps,
                   bool per_head, int64_t dense_heads = 0) {
  proto::OpSpec s = Spec(out, {in, w});
  auto* f = s.mutable_fused_row();
  f->set_rows(rows);
  f->set_cols(cols);
  f->set_reduce(proto::FusedRowSpec::RMS_NORM);
  f->set_weight(true);
  f->set_eps(eps);
  f->set_per_head(per_head);
  f->set_dense_heads(dense_heads);
  return s;
}

proto::OpSpec Matmul(const std::string& out, const char* in, const char* w, int64_t m_rows, int64_t k, int64_t n,
                     proto::Precision weight_format) {
  proto::OpSpec s = Spec(out, {in, w});
  auto* m = s.mutable_matmul();
  m->set_m(m_rows);
  m->set_k(k);
  m->set_n(n);
  m->set_in1_format(weight_format);
  return s;
}

// A pointwise op over `rows` token rows of n: one row is the flat 1 x n, more the rows x n matrix.
proto::OpSpec Pointwise(proto::OpSpec s, int64_t rows, int64_t n) {
  if (rows > 1) {
    s.set_shape_rows(rows);
    s.set_shape_cols(n);
  }
  return s;
}

// C = A op B over rows x n; `broadcast`: B is one row of n, added to every row (a bias).
proto::OpSpec Binary(const std::string& out, const char* a, const char* b, proto::BinarySpec::Op op, int64_t rows,
                     int64_t n, bool broadcast = false) {
  proto::OpSpec s = Spec(out, {a, b});
  s.mutable_binary()->set_op(op);
  s.mutable_binary()->set_n(rows > 1 ? rows * n : n);
  s.mutable_binary()->set_broadcast(broadcast && rows > 1);
  return Pointwise(std::move(s), rows, n);
}

// RoPE of `rows` token rows of `heads` heads each, the first at the position named pos.
// `hd` is the head's width, of which RoPE turns the first RotaryDim() (a partial rotary leaves the rest).
proto::OpSpec Rope(const std::string& out, const char* in, int64_t heads, int64_t hd, int64_t rows,
                   const ModelConfig& c, int64_t cache) {
  proto::OpSpec s = Spec(out, {in, "rope_cos", "rope_sin", "pos"});
  auto* r = s.mutable_rope();
  r->set_h(heads * rows);
  r->set_hd(hd);
  r->set_half(c.RotaryDim() / 2);
  r->set_rows(rows);
  r->mutable_from()->set_named("pos");
  r->set_cache(cache);
  // A scaled RoPE (llama3) is not theta^(-i/half): the spec's theta 0 says the angles are the tables' own
  // (ModelConfig::RopeInvFreq fills them), which the op reference then reads instead of computing its own.
  r->set_theta(c.rope_scaling.type.empty() ? c.rope_theta : 0.0);
  return s;
}

proto::OpSpec CacheWrite(const char* cache, const char* row, int64_t rows, int64_t cols, int64_t count, bool dense) {
  proto::OpSpec s = Spec(cache, {cache, row, "pos"});
  auto* w = s.mutable_set_row();
  w->set_rows(rows);
  w->set_cols(cols);
  w->set_count(count);
  w->mutable_index()->set_named("pos");
  w->set_float_(true);
  w->set_dense(dense);  // as the attention reads it (geometry.h, AttentionReadsDense)
  return s;
}

// ★ A PREFILL'S SLICES AND JOINS STAY ON THE MATRIX. A projection leaves its T rows as a T x n matrix; slicing or
// joining its heads over the flat 1 x T*n form first moves it to flat rows, a tile holding one token row (32 times
// the DRAM bytes of the values), and back. The dense forms (HeadSliceSpec.rows, JoinSpec.dense) move 32-row tiles
// where every part is whole tiles of `target` (DeepSeek-V3's q path at prefill 128: 17.7 of 24.6 ms before). A
// decode's one row is the same either way.
bool Dense(int64_t T, std::initializer_list<int64_t> widths, const Target& target) {
  return T > 1 && WholeTiles(widths, target);
}

proto::OpSpec HeadSlice(const std::string& out, const char* in, int64_t every, int64_t from, int64_t width, int64_t T,
                        int64_t n, const Target& target) {
  proto::OpSpec s = Spec(out, {in});
  auto* h = s.mutable_head_slice();
  h->set_every(every);
  h->set_from(from);
  h->set_width(width);
  h->set_n(n);
  if (Dense(T, {every, from, width}, target)) h->set_rows(T);
  return s;
}

// Per head: its wa of A, then its wb of B (JoinSpec's widths are the totals over the heads).
proto::OpSpec Join(const std::string& out, const char* a, const char* b, int64_t heads, int64_t wa, int64_t wb,
                   int64_t rows, const Target& target) {
  proto::OpSpec s = Spec(out, {a, b});
  auto* j = s.mutable_join();
  j->set_rows(rows);
  j->set_heads(heads);
  j->set_wa(heads * wa);
  j->set_wb(heads * wb);
  if (wa > 0 && wb > 0 && Dense(rows, {wa, wb}, target)) j->set_dense(true);
  return s;
}

// ★ DEEPSEEK-V3'S LATENT ATTENTION, A DECODE STEP OR A PREFILL'S ROWS (modeling_deepseek_v3.py, absorbed as the
// MLA op has it): q through its low-rank bottleneck (q_a_proj, RMSNorm, q_b_proj), each head's rope part rotated and
// joined back after its nope part; the one latent row c (kv_a_proj_with_mqa's first kv_rank, RMSNorm'd) and the
// shared rope key (its last rope, rotated) joined and written into the latent cache; the MLA op over that cache;
// o_proj. The transformers model rotates interleaved pairs (rope_interleave): a fixed permutation of q_b_proj's and
// kv_a_proj's rope columns turns that into the half split RoPE here, so the two cost the same. A prefill's T rows
// go through every op as rows, and the MLA op takes them as query rows from position 1 (lowerings/attention/mla.h).
absl::Status AddLatentAttention(const ModelConfig& c, int64_t T, int64_t cache, const WeightFormats& wf,
                                const Target& target, LayerPlan* p) {
  const LatentAttention& m = c.mla;
  const int64_t d = c.hidden, qk = m.nope + m.rope, kv_row = m.kv_rank + m.rope;
  auto add = [&](const char* label, proto::OpSpec spec) { p->ops.push_back({label, std::move(spec)}); };
  add("q_a_proj", Matmul("q_a", "h", "wq_a", T, d, m.q_rank, wf.attention));
  add("q_a_norm", Norm("q_a_n", "q_a", "q_a_norm_w", T, m.q_rank, c.eps, false));
  add("q_b_proj", Matmul("q", "q_a_n", "wq_b", T, m.q_rank, c.heads * qk, wf.attention));
  add("q_nope", HeadSlice("q_nope", "q", qk, 0, m.nope, T, T * c.heads * qk, target));
  add("q_pe", HeadSlice("q_pe", "q", qk, m.nope, m.rope, T, T * c.heads * qk, target));
  add("q_rope", Rope("q_pe_rot", "q_pe", c.heads, m.rope, T, c, cache));
  add("q_join", Join("q_mla", "q_nope", "q_pe_rot", c.heads, m.nope, m.rope, T, target));
  add("kv_a_proj", Matmul("kv_a", "h", "wkv_a", T, d, kv_row, wf.attention));
  add("c_kv", HeadSlice("c_kv", "kv_a", kv_row, 0, m.kv_rank, T, T * kv_row, target));
  add("k_pe", HeadSlice("k_pe", "kv_a", kv_row, m.kv_rank, m.rope, T, T * kv_row, target));
  add("kv_a_norm", Norm("c_kv_n", "c_kv", "kv_a_norm_w", T, m.kv_rank, c.eps, false));
  add("k_rope", Rope("k_pe_rot", "k_pe", 1, m.rope, T, c, cache));
  add("kv_join", Join("kv_row", "c_kv_n", "k_pe_rot", 1, m.kv_rank, m.rope, T, target));
  add("kv_cache_write", CacheWrite("kv_cache", "kv_row", cache, kv_row, T, true));
  {
    // A prefill from position 1 names its bound literally (as the attention's, BuildLayer); a decode step reads P.
    proto::OpSpec s = T > 1 ? Spec("ctx", {"q_mla", "w_uk", "kv_cache", "w_uv"})
                            : Spec("ctx", {"q_mla", "w_uk", "kv_cache", "w_uv", "pos"});
    auto* a = s.mutable_mla();
    a->set_heads(c.heads);
    a->set_nope(m.nope);
    a->set_rope(m.rope);
    a->set_rank(m.kv_rank);
    a->set_vd(m.vd);
    a->set_l(cache);
    if (T > 1) {
      a->set_rows(T);
      a->mutable_pos()->set_literal(1);
    } else {
      a->mutable_pos()->set_named("pos");
    }
    // DeepseekV3Attention: qk_head_dim^-0.5, times yarn's mscale(factor, mscale_all_dim) squared.
    const double ms = c.rope_scaling.mscale_all_dim > 0 ? c.YarnMscale(c.rope_scaling.mscale_all_dim) : 1.0;
    a->set_scale(ms * ms / std::sqrt(static_cast<double>(qk)));
    add("attention", std::move(s));
  }
  add("o_proj", Matmul("attn_out", "ctx", "wo", T, c.heads * m.vd, d, wf.attention));
  p->weights.insert(p->weights.end(), {"wq_a", "q_a_norm_w", "wq_b", "wkv_a", "kv_a_norm_w", "w_uk", "w_uv", "wo"});
  p->state = {"kv_cache"};
  return absl::OkStatus();
}

// ★ QWEN3-NEXT'S LINEAR ATTENTION, A DECODE STEP OR A PREFILL'S ROWS (modeling_qwen3_next.py, Qwen3NextGatedDeltaNet):
// in_proj_qkvz and in_proj_ba; the depthwise causal conv over q, k and v (its ring is carried state) and SiLU; q and k
// l2-normalized per head; beta = sigmoid(b); the decay alpha = exp(-exp(A_log) * softplus(a + dt_bias)) (the decay op,
// its rate -exp(A_log) a weight); the gated delta rule over the carried memory, with the gated RMSNorm (weight,
// silu(z)) of its output; out_proj. The checkpoint groups in_proj_qkvz's and in_proj_ba's columns by key head and maps
// value head h to key head h / (hv / hk); a fixed permutation of those columns, of the value heads' weights and of
// out_proj's rows turns that into the contiguous q | k | v | z and b | a here and the gated delta op's value head h
// reading key head h mod hk, so the two cost the same.
absl::Status AddGatedDeltaNet(const ModelConfig& c, int64_t T, const WeightFormats& wf, const Target& target,
                              LayerPlan* p) {
  const LinearAttention& g = c.gdn;
  if (g.k_dim != g.v_dim) {
    return NotLowered(absl::StrCat("a Gated DeltaNet of key heads ", g.k_dim, " and value heads ", g.v_dim,
                                   " wide: the gated delta op takes one head width"));
  }
  // A prefill's T tokens are T rows of every op: the conv and the gated delta rule carry their state across them
  // (their block forms, lowerings/carried), the rest is row by row.
  const int64_t d = c.hidden, key = g.k_heads * g.k_dim, val = g.v_heads * g.v_dim, conv = 2 * key + val;
  auto add = [&](const char* label, proto::OpSpec spec) { p->ops.push_back({label, std::move(spec)}); };
  add("qkvz_proj", Matmul("qkvz", "h", "w_qkvz", T, d, conv + val, wf.attention));
  add("qkv_part", HeadSlice("mixed_qkv", "qkvz", conv + val, 0, conv, T, T * (conv + val), target));
  add("z_part", HeadSlice("z", "qkvz", conv + val, conv, val, T, T * (conv + val), target));
  add("ba_proj", Matmul("ba", "h", "w_ba", T, d, 2 * g.v_heads, wf.attention));
  add("b_part", HeadSlice("b", "ba", 2 * g.v_heads, 0, g.v_heads, T, T * 2 * g.v_heads, target));
  add("a_part", HeadSlice("a", "ba", 2 * g.v_heads, g.v_heads, g.v_heads, T, T * 2 * g.v_heads, target));
  {
    proto::OpSpec s = Spec("conv_out", {"mixed_qkv", "conv_w", "conv_state"});
    s.mutable_causal_conv()->set_taps(g.conv);
    s.mutable_causal_conv()->set_chan(conv);
    s.mutable_causal_conv()->set_rows(T);
    add("causal_conv", std::move(s));
  }
  {
    proto::OpSpec s = Spec("qkv_act", {"conv_out"});
    s.mutable_silu()->set_n(T * conv);
    add("conv_silu", Pointwise(std::move(s), T, conv));
  }
  add("q_part", HeadSlice("q_lin", "qkv_act", conv, 0, key, T, T * conv, target));
  add("k_part", HeadSlice("k_lin", "qkv_act", conv, key, key, T, T * conv, target));
  add("v_part", HeadSlice("v_lin", "qkv_act", conv, 2 * key, val, T, T * conv, target));
  for (const auto& [label, out, in] : {std::tuple{"q_l2norm", "q_l2", "q_lin"}, {"k_l2norm", "k_l2", "k_lin"}}) {
    proto::OpSpec s = Spec(out, {in});
    s.mutable_l2norm()->set_rows(T * g.k_heads);
    s.mutable_l2norm()->set_cols(g.k_dim);
    s.mutable_l2norm()->set_eps(1e-6);  // transformers' l2norm (and fla's) default
    add(label, std::move(s));
  }
  {
    proto::OpSpec s = Spec("beta", {"b"});
    s.mutable_sigmoid()->set_n(T * g.v_heads);
    add("beta", Pointwise(std::move(s), T, g.v_heads));
  }
  {
    proto::OpSpec s = Spec("alpha", {"a", "dt_bias", "a_rate"});
    s.mutable_decay()->set_rows(T);
    s.mutable_decay()->set_n(T * g.v_heads);
    add("decay", std::move(s));
  }
  {
    proto::OpSpec s = Spec("core", {"q_l2", "k_l2", "v_lin", "z", "beta", "alpha", "gdn_state", "gdn_norm_w"});
    auto* gd = s.mutable_gated_delta();
    gd->set_hv(g.v_heads);
    gd->set_hk(g.k_heads);
    gd->set_d(g.k_dim);
    gd->set_rows(T);
    gd->set_eps(c.eps);
    gd->set_gate(proto::GatedDeltaSpec::SILU);
    add("gated_delta", std::move(s));
  }
  add("out_proj", Matmul("attn_out", "core", "w_out", T, val, d, wf.attention));
  p->weights.insert(p->weights.end(), {"w_qkvz", "w_ba", "conv_w", "dt_bias", "a_rate", "gdn_norm_w", "w_out"});
  p->state = {"conv_state", "gdn_state"};
  return absl::OkStatus();
}

// The ops of one layer over `rows` token rows whose first sits at the position named pos, over caches of `cache`
// rows: a decode step is one row, a prefill T rows from position 1.
absl::StatusOr<LayerPlan> BuildLayer(const ModelConfig& c, int64_t layer, int64_t rows, int64_t cache,
                                     const WeightFormats& wf, const std::string& name, const Target& target) {
  const int64_t T = rows, d = c.hidden, hd = c.head_dim, qw = c.heads * hd, kvw = c.kv_heads * hd;
  const int64_t ff = c.intermediate;
  LayerPlan p;
  p.name = name;
  auto add = [&](const char* label, proto::OpSpec spec) { p.ops.push_back({label, std::move(spec)}); };
  add("attn_norm", Norm("h", "x", "attn_norm_w", T, d, c.eps, false));
  p.weights = {"attn_norm_w"};
  // A projection, then its bias where the model has one (gpt-oss): out = in @ w (+ b).
  auto project = [&](const char* label, const std::string& out, const char* in, const char* w, const char* bias,
                     int64_t k, int64_t n) {
    const std::string mm = c.attention_bias ? out + "_mm" : out;
    add(label, Matmul(mm, in, w, T, k, n, wf.attention));
    p.weights.push_back(w);
    if (c.attention_bias) {
      p.ops.push_back(
          {std::string(label) + "_bias", Binary(out, mm.c_str(), bias, proto::BinarySpec::ADD, T, n, true)});
      p.weights.push_back(bias);
    }
  };
  if (c.IsLinearLayer(layer)) {
    RETURN_IF_ERROR(AddGatedDeltaNet(c, T, wf, target, &p));
  } else if (c.mla.on()) {
    RETURN_IF_ERROR(AddLatentAttention(c, T, cache, wf, target, &p));
  } else {
    if (c.output_gate) {
      // Qwen3NextAttention: q_proj writes each head's query and then its output gate, 2 x head_dim a head.
      project("q_proj", "q_and_gate", "h", "wq", "bq", d, 2 * qw);
      add("q_part", HeadSlice("q", "q_and_gate", 2 * hd, 0, hd, T, T * 2 * qw, target));
      add("gate_part", HeadSlice("attn_gate", "q_and_gate", 2 * hd, hd, hd, T, T * 2 * qw, target));
    } else {
      project("q_proj", "q", "h", "wq", "bq", d, qw);
    }
    project("k_proj", "k", "h", "wk", "bk", d, kvw);
    project("v_proj", "v", "h", "wv", "bv", d, kvw);
    std::string q_in = "q", k_in = "k";
    if (c.qk_norm) {
      // ★ A PREFILL'S HEADS ARE NORMALIZED WHERE THE PROJECTION PUT THEM: dense token rows, a tile row of tokens a
      // head at a time (issue #15: the flat per-head form and its relayouts were 46% of Qwen3-8B's prefill layer).
      // A decode step's one row is the flat form already; heads that are not whole tiles stay flat.
      const bool dense = T > 1 && HeadIsItem(hd, target);
      add("q_norm", Norm("q_n", q_in.c_str(), "q_norm_w", T * c.heads, hd, c.eps, true, dense ? c.heads : 0));
      add("k_norm", Norm("k_n", k_in.c_str(), "k_norm_w", T * c.kv_heads, hd, c.eps, true, dense ? c.kv_heads : 0));
      p.weights.insert(p.weights.end(), {"q_norm_w", "k_norm_w"});
      q_in = "q_n";
      k_in = "k_n";
    }
    add("q_rope", Rope("q_rot", q_in.c_str(), c.heads, hd, T, c, cache));
    add("k_rope", Rope("k_rot", k_in.c_str(), c.kv_heads, hd, T, c, cache));
    const std::string k_rows = "k_rot", q_att = "q_rot";
    // ★ A CACHE IS WRITTEN IN THE LAYOUT ITS ATTENTION READS: dense tiles for the flash form, flat rows otherwise
    // (heads narrower than a tile); the two ops share the table, so they must agree on its shape.
    const bool dense = AttentionReadsDense(c.heads, c.kv_heads, hd, hd, target);
    add("k_cache_write", CacheWrite("k_cache", k_rows.c_str(), cache, kvw, T, dense));
    add("v_cache_write", CacheWrite("v_cache", "v", cache, kvw, T, dense));
    {
      // A prefill from position 1 names its bound: P = 1 is known, so the attention folds exactly the blocks each
      // query range sees (flash_prefill.h); a decode step reads P at run time.
      proto::OpSpec s = T > 1 ? Spec("ctx", {q_att.c_str(), "k_cache", "v_cache"})
                              : Spec("ctx", {q_att.c_str(), "k_cache", "v_cache", "pos"});
      if (c.sinks) {
        s.add_operands()->set_name("sinks");
        p.weights.push_back("sinks");
      }
      auto* a = s.mutable_attention();
      a->set_sinks(c.sinks);
      if (c.IsSlidingLayer(layer)) a->mutable_window()->set_sliding(c.sliding_window);
      a->set_h(c.heads);
      a->set_kv(c.kv_heads);
      a->set_hd(hd);
      a->set_vd(hd);
      a->set_l(cache);
      a->set_rows(T);
      if (T > 1) {
        a->mutable_pos()->set_literal(1);
      } else {
        a->mutable_pos()->set_named("pos");
      }
      add("attention", std::move(s));
    }
    std::string ctx = "ctx";
    if (c.output_gate) {
      // The attention times sigmoid(gate), per element, before o_proj.
      proto::OpSpec g = Spec("attn_gate_s", {"attn_gate"});
      g.mutable_sigmoid()->set_n(T * qw);
      add("gate_sigmoid", Pointwise(std::move(g), T, qw));
      add("output_gate", Binary("ctx_gated", "ctx", "attn_gate_s", proto::BinarySpec::MUL, T, qw));
      ctx = "ctx_gated";
    }
    project("o_proj", "attn_out", ctx.c_str(), "wo", "bo", qw, d);
  }
  add("attn_residual", Binary("h1", "x", "attn_out", proto::BinarySpec::ADD, T, d));
  add("mlp_norm", Norm("h2", "h1", "mlp_norm_w", T, d, c.eps, false));
  p.weights.push_back("mlp_norm_w");
  if (c.IsMoeLayer(layer)) {
    // Qwen3MoeSparseMoeBlock: softmax over every expert's router logit, the top k kept (renormalized when
    // norm_topk_prob), each chosen expert's SwiGLU weighed by its score. gpt-oss (GptOssMLP): the router and every
    // expert table with a bias, the softmax of the top k logits (= the top k renormalized), the clamped SwiGLU. The
    // MoE lowering gathers only the chosen experts' tables at a decode; at a prefill every expert runs every token
    // (lowerings/moe/moe_prefill.h).
    proto::OpSpec s = Spec("mlp_out", {"h2", "router", "experts_gate", "experts_up", "experts_down"});
    p.weights.insert(p.weights.end(), {"router", "experts_gate", "experts_up", "experts_down"});
    auto* m = s.mutable_moe();
    m->set_d(d);
    m->set_dff(c.moe_intermediate);
    m->set_ne(c.experts);
    m->set_k(c.experts_per_token);
    if (T > 1) m->set_tokens(T);  // a prefill: every token routed on its own (lowerings/moe/moe_prefill.h)
    m->set_score(proto::MoeSpec::SOFTMAX);
    m->set_renormalize(c.norm_topk);
    m->set_act(c.swiglu_limit > 0 ? proto::MoeSpec::CLAMPED_SWIGLU : proto::MoeSpec::SWIGLU);
    if (c.swiglu_limit > 0) {
      m->set_clamp_limit(c.swiglu_limit);
      m->set_clamp_slope(c.swiglu_alpha);
    }
    if (c.sigmoid) m->set_score(proto::MoeSpec::SIGMOID);
    if (c.groups > 0) {
      m->set_group_count(c.groups);
      m->set_group_kept(c.groups_kept);
    }
    if (c.routed_scale > 0) m->set_scale(c.routed_scale);
    if (c.moe_biases) {
      m->set_router_bias(true);
      m->set_gate_bias(true);
      m->set_up_bias(true);
      m->set_down_bias(true);
      for (const char* b : {"router_bias", "experts_gate_bias", "experts_up_bias", "experts_down_bias"}) {
        s.add_operands()->set_name(b);
        p.weights.push_back(b);
      }
    }
    // DeepSeek-V3: the selection bias (e_score_correction_bias), then the shared expert's gate, up and down.
    if (c.selection_bias) {
      m->set_selection_bias(true);
      s.add_operands()->set_name("selection_bias");
      p.weights.push_back("selection_bias");
    }
    if (c.shared_dff > 0) {
      m->set_shared_dff(c.shared_dff);
      for (const char* w : {"shared_gate", "shared_up", "shared_down"}) {
        s.add_operands()->set_name(w);
        p.weights.push_back(w);
      }
    }
    // Qwen3-Next: the shared expert weighed by sigmoid(h2 . shared_expert_gate).
    if (c.shared_gate) {
      m->set_shared_gate(true);
      s.add_operands()->set_name("shared_expert_gate");
      p.weights.push_back("shared_expert_gate");
    }
    add("moe", std::move(s));
  } else {
    add("gate_proj", Matmul("gate", "h2", "w_gate", T, d, ff, wf.gate_up));
    add("up_proj", Matmul("up", "h2", "w_up", T, d, ff, wf.gate_up));
    {
      proto::OpSpec s = Spec("act", {"gate"});
      s.mutable_silu()->set_n(T > 1 ? T * ff : ff);
      add("silu", Pointwise(std::move(s), T, ff));
    }
    add("swiglu_mul", Binary("prod", "act", "up", proto::BinarySpec::MUL, T, ff));
    add("down_proj", Matmul("mlp_out", "prod", "w_down", T, ff, d, wf.down));
    p.weights.insert(p.weights.end(), {"w_gate", "w_up", "w_down"});
  }
  add("mlp_residual", Binary("x_out", "h1", "mlp_out", proto::BinarySpec::ADD, T, d));
  if (!c.mla.on() && !c.IsLinearLayer(layer)) p.state = {"k_cache", "v_cache"};
  return p;
}

absl::Status CheckLayerAndCache(const ModelConfig& c, int64_t layer, int64_t cache) {
  if (layer < 0 || layer >= c.layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " is outside the model's ", c.layers, " layers (0..", c.layers - 1, ")"));
  }
  if (cache < 1 || cache > c.max_positions) {
    return absl::InvalidArgumentError(absl::StrCat("a cache of ", cache, " rows: it must be 1..", c.max_positions,
                                                   " (max_position_embeddings)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LayerPlan> DecodeLayerPlan(const ModelConfig& c, int64_t layer, const DecodePhase& phase,
                                          const Target& target) {
  RETURN_IF_ERROR(CheckLayerAndCache(c, layer, phase.cache));
  if (phase.position < 1 || phase.position > phase.cache) {
    return absl::InvalidArgumentError(
        absl::StrCat("decode position ", phase.position, " is outside the cache's rows 1..", phase.cache));
  }
  return BuildLayer(c, layer, 1, phase.cache, phase.weights,
                    absl::StrCat(c.architecture, "_layer", layer, "_decode_p", phase.position, "_l", phase.cache),
                    target);
}

absl::StatusOr<LayerPlan> PrefillLayerPlan(const ModelConfig& c, int64_t layer, const PrefillPhase& phase,
                                           const Target& target) {
  RETURN_IF_ERROR(CheckLayerAndCache(c, layer, phase.cache));
  if (phase.tokens < 1 || phase.tokens > phase.cache) {
    return absl::InvalidArgumentError(
        absl::StrCat("a prefill of ", phase.tokens, " tokens: it must be 1..", phase.cache, " (the cache's rows)"));
  }
  return BuildLayer(c, layer, phase.tokens, phase.cache, phase.weights,
                    absl::StrCat(c.architecture, "_layer", layer, "_prefill_t", phase.tokens, "_l", phase.cache),
                    target);
}

bool WeightRecipe(const std::string& name, WeightFormats* out) {
  auto all = [&](proto::Precision p) { *out = WeightFormats{p, p, p, p}; };
  if (name == "default") {
    *out = WeightFormats{};
  } else if (name == "bf16") {
    all(proto::BF16);
  } else if (name == "bfp8_b") {
    all(proto::BFP8_B);
  } else if (name == "bfp4_b") {
    all(proto::BFP4_B);
  } else if (name == "ff13_bfp4" || name == "performance") {
    *out = WeightFormats{proto::BFP8_B, proto::BFP4_B, proto::BFP8_B, proto::BFP8_B};
  } else if (name == "mlp_bfp4") {
    *out = WeightFormats{proto::BFP8_B, proto::BFP4_B, proto::BFP4_B, proto::BFP8_B};
  } else {
    return false;
  }
  return true;
}

LayerPlan HeadPlan(const ModelConfig& c, const WeightFormats& formats) {
  LayerPlan p;
  p.name = absl::StrCat(c.architecture, "_head");
  p.ops.push_back({"final_norm", Norm("x_n", "x", "final_norm_w", 1, c.hidden, c.eps, false)});
  p.ops.push_back({"lm_head", Matmul("logits", "x_n", "lm_head", 1, c.hidden, c.vocab, formats.lm_head)});
  p.weights = {"final_norm_w", "lm_head"};
  return p;
}

std::vector<LayerKind> LayerKinds(const ModelConfig& c) {
  std::vector<LayerKind> kinds;
  for (int64_t l = 0; l < c.layers; ++l) {
    const LayerKind kind = KindOf(c, l);
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const LayerKind& k) { return SameKind(k, kind); });
    if (it == kinds.end()) {
      kinds.push_back(LayerKind{l, 1, kind.moe, kind.sliding, kind.linear});
    } else {
      ++it->count;
    }
  }
  return kinds;
}

LayerKind KindOf(const ModelConfig& c, int64_t layer) {
  return LayerKind{layer, 0, c.IsMoeLayer(layer), c.IsSlidingLayer(layer), c.IsLinearLayer(layer)};
}

std::string LayerKindName(const LayerKind& k) {
  return absl::StrCat(k.linear ? "Gated DeltaNet, " : "", k.sliding ? "sliding attention, " : "",
                      k.moe ? "mixture of experts" : "dense MLP");
}

TensorMap LayerRunInputs(const Composition& program, const ModelConfig& config, int64_t position, uint64_t seed) {
  const int64_t half = config.RotaryDim() / 2;
  uint64_t state = seed;
  auto uniform = [&state](double lo, double hi) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * static_cast<double>(state >> 11) * 0x1.0p-53;
  };
  TensorMap inputs;
  for (const Tensor& t : CompositionInputs(program)) {
    TensorData d{t.rows, t.cols, t.precision, std::vector<double>(static_cast<size_t>(t.rows * t.cols))};
    const int64_t n = t.rows * t.cols;
    const bool expert = absl::StartsWith(t.name, "experts_") && !absl::EndsWith(t.name, "_bias");
    if (t.name == "pos") {
      d.values[0] = static_cast<double>(position);
    } else if (t.name == "rope_cos" || t.name == "rope_sin") {
      for (int64_t e = 0; e < n; ++e) {
        const double angle = static_cast<double>(e / half) * config.RopeInvFreq(e % half);
        d.values[e] = config.RopeTableScale() * (t.name == "rope_cos" ? std::cos(angle) : std::sin(angle));
      }
    } else if (absl::EndsWith(t.name, "norm_w")) {
      for (double& v : d.values) v = uniform(0.8, 1.2);
    } else if (t.name == "sinks") {
      for (double& v : d.values) v = uniform(-2, 2);
    } else if (t.name == "a_rate") {
      // -exp(A_log), A_log = log U(0, 16) at initialization: a decay rate in (-16, 0); the smaller half of it.
      for (double& v : d.values) v = uniform(-8, -0.05);
    } else if (t.name == "conv_w") {
      // Conv1d's default bound 1/sqrt(fan_in), the fan-in a depthwise channel's taps.
      const double bound = 1.0 / std::sqrt(static_cast<double>(config.gdn.conv));
      for (double& v : d.values) v = uniform(-bound, bound);
    } else if (t.name == "shared_expert_gate") {
      const double bound = 1.0 / std::sqrt(static_cast<double>(n));
      for (double& v : d.values) v = uniform(-bound, bound);
    } else if (t.name[0] == 'w' || t.name == "router" || absl::StartsWith(t.name, "shared_") || expert) {
      // The mixture's expert tables are PyTorch's out x in per expert: their fan-in is the columns.
      const double fan_in = static_cast<double>(expert ? t.cols : t.rows);
      const double bound = 1.0 / std::sqrt(fan_in);
      for (double& v : d.values) v = uniform(-bound, bound);
    } else {
      for (double& v : d.values) v = uniform(-1, 1);
    }
    inputs[t.name] = std::move(d);
  }
  return inputs;
}

absl::StatusOr<LoweredLayer> LowerLayer(const LayerPlan& plan, const Target& target) {
  std::set<std::string> given{"x", "pos", "rope_cos", "rope_sin"};
  for (const std::string& w : plan.weights) given.insert(w);
  for (const std::string& s : plan.state) given.insert(s);
  std::vector<GraphOp> ops;
  ops.reserve(plan.ops.size());
  for (const LayerOp& op : plan.ops) ops.push_back({op.label, op.spec});
  return LowerGraph(plan.name, ops, &given, target);
}

}  // namespace spatial

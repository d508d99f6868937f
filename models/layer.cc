#include "models/layer.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash.h"     // ComposeSections
#include "lowerings/attention/geometry.h"  // AttentionReadsDense
#include "lowerings/registry.h"
#include "passes/handles.h"
#include "spatial/status_macros.h"
#include "spatial/validate.h"

namespace spatial {
namespace {

proto::OpSpec Spec(const std::string& out, std::initializer_list<const char*> operands) {
  proto::OpSpec s;
  s.set_out(out);
  for (const char* o : operands) s.add_operands()->set_name(o);
  return s;
}

proto::OpSpec Norm(const std::string& out, const char* in, const char* w, int64_t rows, int64_t cols, double eps,
                   bool per_head) {
  proto::OpSpec s = Spec(out, {in, w});
  auto* f = s.mutable_fused_row();
  f->set_rows(rows);
  f->set_cols(cols);
  f->set_reduce(proto::FusedRowSpec::RMS_NORM);
  f->set_weight(true);
  f->set_eps(eps);
  f->set_per_head(per_head);
  return s;
}

proto::OpSpec Matmul(const std::string& out, const char* in, const char* w, int64_t k, int64_t n,
                     proto::Precision weight_format) {
  proto::OpSpec s = Spec(out, {in, w});
  auto* m = s.mutable_matmul();
  m->set_m(1);
  m->set_k(k);
  m->set_n(n);
  m->set_in1_format(weight_format);
  return s;
}

proto::OpSpec Binary(const std::string& out, const char* a, const char* b, proto::BinarySpec::Op op, int64_t n) {
  proto::OpSpec s = Spec(out, {a, b});
  s.mutable_binary()->set_op(op);
  s.mutable_binary()->set_n(n);
  return s;
}

proto::OpSpec Rope(const std::string& out, const char* in, int64_t heads, const ModelConfig& c, int64_t cache) {
  proto::OpSpec s = Spec(out, {in, "rope_cos", "rope_sin", "pos"});
  auto* r = s.mutable_rope();
  r->set_h(heads);
  r->set_hd(c.head_dim);
  r->set_half(c.head_dim / 2);
  r->set_rows(1);
  r->mutable_from()->set_named("pos");
  r->set_cache(cache);
  // A scaled RoPE (llama3) is not theta^(-i/half): the spec's theta 0 says the angles are the tables' own
  // (ModelConfig::RopeInvFreq fills them), which the op reference then reads instead of computing its own.
  r->set_theta(c.rope_scaling.type.empty() ? c.rope_theta : 0.0);
  return s;
}

proto::OpSpec CacheWrite(const char* cache, const char* row, int64_t rows, int64_t cols, bool dense) {
  proto::OpSpec s = Spec(cache, {cache, row, "pos"});
  auto* w = s.mutable_set_row();
  w->set_rows(rows);
  w->set_cols(cols);
  w->set_count(1);
  w->mutable_index()->set_named("pos");
  w->set_float_(true);
  w->set_dense(dense);  // as the attention reads it (geometry.h, AttentionReadsDense)
  return s;
}

}  // namespace

absl::StatusOr<LayerPlan> DecodeLayerPlan(const ModelConfig& c, int64_t layer, const DecodePhase& phase,
                                          const Target& target) {
  if (layer < 0 || layer >= c.layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " is outside the model's ", c.layers, " layers (0..", c.layers - 1, ")"));
  }
  if (phase.cache < 1 || phase.cache > c.max_positions) {
    return absl::InvalidArgumentError(absl::StrCat("a cache of ", phase.cache, " rows: it must be 1..",
                                                   c.max_positions, " (max_position_embeddings)"));
  }
  if (phase.position < 1 || phase.position > phase.cache) {
    return absl::InvalidArgumentError(
        absl::StrCat("decode position ", phase.position, " is outside the cache's rows 1..", phase.cache));
  }
  const int64_t d = c.hidden, hd = c.head_dim, qw = c.heads * hd, kvw = c.kv_heads * hd, ff = c.intermediate;
  const WeightFormats& wf = phase.weights;
  LayerPlan p;
  p.name = absl::StrCat(c.architecture, "_layer", layer, "_decode_p", phase.position, "_l", phase.cache);
  auto add = [&](const char* label, proto::OpSpec spec) { p.ops.push_back({label, std::move(spec)}); };
  add("attn_norm", Norm("h", "x", "attn_norm_w", 1, d, c.eps, false));
  p.weights = {"attn_norm_w"};
  // A projection, then its bias where the model has one (gpt-oss): out = in @ w (+ b).
  auto project = [&](const char* label, const std::string& out, const char* in, const char* w, const char* bias,
                     int64_t k, int64_t n) {
    const std::string mm = c.attention_bias ? out + "_mm" : out;
    add(label, Matmul(mm, in, w, k, n, wf.attention));
    p.weights.push_back(w);
    if (c.attention_bias) {
      p.ops.push_back({std::string(label) + "_bias", Binary(out, mm.c_str(), bias, proto::BinarySpec::ADD, n)});
      p.weights.push_back(bias);
    }
  };
  project("q_proj", "q", "h", "wq", "bq", d, qw);
  project("k_proj", "k", "h", "wk", "bk", d, kvw);
  project("v_proj", "v", "h", "wv", "bv", d, kvw);
  const char* q_in = "q";
  const char* k_in = "k";
  if (c.qk_norm) {
    add("q_norm", Norm("q_n", "q", "q_norm_w", c.heads, hd, c.eps, true));
    add("k_norm", Norm("k_n", "k", "k_norm_w", c.kv_heads, hd, c.eps, true));
    p.weights.insert(p.weights.end(), {"q_norm_w", "k_norm_w"});
    q_in = "q_n";
    k_in = "k_n";
  }
  add("q_rope", Rope("q_rot", q_in, c.heads, c, phase.cache));
  add("k_rope", Rope("k_rot", k_in, c.kv_heads, c, phase.cache));
  // ★ A CACHE IS WRITTEN IN THE LAYOUT ITS ATTENTION READS: dense tiles for the flash form, flat rows otherwise
  // (heads narrower than a tile); the two ops share the table, so they must agree on its shape.
  const bool dense = AttentionReadsDense(c.heads, c.kv_heads, hd, hd, target);
  add("k_cache_write", CacheWrite("k_cache", "k_rot", phase.cache, kvw, dense));
  add("v_cache_write", CacheWrite("v_cache", "v", phase.cache, kvw, dense));
  {
    proto::OpSpec s = Spec("ctx", {"q_rot", "k_cache", "v_cache", "pos"});
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
    a->set_l(phase.cache);
    a->set_rows(1);
    a->mutable_pos()->set_named("pos");
    add("attention", std::move(s));
  }
  project("o_proj", "attn_out", "ctx", "wo", "bo", qw, d);
  add("attn_residual", Binary("h1", "x", "attn_out", proto::BinarySpec::ADD, d));
  add("mlp_norm", Norm("h2", "h1", "mlp_norm_w", 1, d, c.eps, false));
  p.weights.push_back("mlp_norm_w");
  if (c.IsMoeLayer(layer)) {
    // Qwen3MoeSparseMoeBlock: softmax over every expert's router logit, the top k kept (renormalized when
    // norm_topk_prob), each chosen expert's SwiGLU weighed by its score. gpt-oss (GptOssMLP): the router and every
    // expert table with a bias, the softmax of the top k logits (= the top k renormalized), the clamped SwiGLU. The
    // MoE lowering gathers only the chosen experts' tables.
    proto::OpSpec s = Spec("mlp_out", {"h2", "router", "experts_gate", "experts_up", "experts_down"});
    p.weights.insert(p.weights.end(), {"router", "experts_gate", "experts_up", "experts_down"});
    auto* m = s.mutable_moe();
    m->set_d(d);
    m->set_dff(c.moe_intermediate);
    m->set_ne(c.experts);
    m->set_k(c.experts_per_token);
    m->set_score(proto::MoeSpec::SOFTMAX);
    m->set_renormalize(c.norm_topk);
    m->set_act(c.swiglu_limit > 0 ? proto::MoeSpec::CLAMPED_SWIGLU : proto::MoeSpec::SWIGLU);
    if (c.swiglu_limit > 0) {
      m->set_clamp_limit(c.swiglu_limit);
      m->set_clamp_slope(c.swiglu_alpha);
    }
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
    add("moe", std::move(s));
  } else {
    add("gate_proj", Matmul("gate", "h2", "w_gate", d, ff, wf.gate_up));
    add("up_proj", Matmul("up", "h2", "w_up", d, ff, wf.gate_up));
    {
      proto::OpSpec s = Spec("act", {"gate"});
      s.mutable_silu()->set_n(ff);
      add("silu", std::move(s));
    }
    add("swiglu_mul", Binary("prod", "act", "up", proto::BinarySpec::MUL, ff));
    add("down_proj", Matmul("mlp_out", "prod", "w_down", ff, d, wf.down));
    p.weights.insert(p.weights.end(), {"w_gate", "w_up", "w_down"});
  }
  add("mlp_residual", Binary("x_out", "h1", "mlp_out", proto::BinarySpec::ADD, d));
  p.state = {"k_cache", "v_cache"};
  return p;
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
  p.ops.push_back({"lm_head", Matmul("logits", "x_n", "lm_head", c.hidden, c.vocab, formats.lm_head)});
  p.weights = {"final_norm_w", "lm_head"};
  return p;
}

std::vector<LayerKind> LayerKinds(const ModelConfig& c) {
  std::vector<LayerKind> kinds;
  for (int64_t l = 0; l < c.layers; ++l) {
    const bool moe = c.IsMoeLayer(l), sliding = c.IsSlidingLayer(l);
    auto it = std::find_if(kinds.begin(), kinds.end(),
                           [&](const LayerKind& k) { return k.moe == moe && k.sliding == sliding; });
    if (it == kinds.end()) {
      kinds.push_back({l, 1, moe, sliding});
    } else {
      ++it->count;
    }
  }
  return kinds;
}

std::string LayerKindName(const LayerKind& k) {
  return absl::StrCat(k.sliding ? "sliding attention, " : "", k.moe ? "mixture of experts" : "dense MLP");
}

absl::StatusOr<LoweredLayer> LowerLayer(const LayerPlan& plan, const Target& target) {
  LoweredLayer out;
  std::vector<Composition> parts;
  std::set<std::string> given{"x", "pos", "rope_cos", "rope_sin"};
  for (const std::string& w : plan.weights) given.insert(w);
  for (const std::string& s : plan.state) given.insert(s);
  int first = 0;
  for (const LayerOp& op : plan.ops) {
    absl::StatusOr<Composition> c = Lower(op.spec, target);
    if (!c.ok()) {
      return absl::Status(c.status().code(), absl::StrCat("layer op '", op.label, "': ", c.status().message()));
    }
    const int n = static_cast<int>(c->sections.size());
    out.op_sections.emplace_back(first, first + n);
    first += n;
    parts.push_back(*std::move(c));
  }
  out.program = ComposeSections(plan.name, std::move(parts), target);
  // ★ THE OPS MEET THROUGH TYPED HANDLES: every name an op reads is produced by an earlier op or given to the run,
  // and holds one shape and precision in every section.
  if (absl::Status st = CheckHandles(out.program, &given); !st.ok()) {
    return absl::InternalError(absl::StrCat("layer '", plan.name, "': ", st.message()));
  }
  if (absl::Status st = ValidateComposition(out.program, target.tile_rows(), target.tile_cols()); !st.ok()) {
    return absl::InternalError(absl::StrCat("layer '", plan.name, "': ", st.message()));
  }
  return out;
}

}  // namespace spatial

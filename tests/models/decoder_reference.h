// A decoder layer's decode step in plain f64 loops, written from transformers' modeling_qwen3.py,
// modeling_qwen3_moe.py and modeling_llama.py, not from the lowerings (issue #15: the VM's
// layer against a reference that shares none of the op references' code). RMSNorm is x / sqrt(mean(x^2) + eps) * w;
// Qwen3 norms each q and k head so; RoPE is the NeoX half split with inv_freq theta^(-i/half) (Llama 3.1's llama3
// bands when the config scales it) at the token's 0-based position P-1; attention is softmax(q.k / sqrt(hd)) over
// cache rows 0..P-1 after row P-1 holds this token's k and v, query head h reading K/V head h / (heads / kv_heads);
// the MLP is down(silu(gate) * up), or the mixture: softmax over the router's logits, the top k (renormalized when
// norm_topk_prob), each chosen expert's SwiGLU weighed by its score. gpt-oss (modeling_gpt_oss.py) adds biases
// to q, k, v, o, the router and the experts, a sink logit per head in the softmax, sliding layers that see their
// last W positions, yarn's RoPE (its frequencies, and cos and sin times 0.1 ln(factor) + 1), and the clamped
// SwiGLU. Qwen3-Next (modeling_qwen3_next.py): attention layers whose q_proj also writes a gate per head (the
// attention times its sigmoid), RoPE over the first partial_rotary_factor of each head; linear layers that are a
// Gated DeltaNet (in_proj_qkvz, in_proj_ba, the depthwise causal conv and SiLU over q|k|v, l2-normalized q and k,
// beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias), the recurrent delta rule, the gated RMSNorm, out_proj);
// the mixture's shared expert weighed by sigmoid(x . shared_expert_gate). Written in the model's own layouts (the
// conv's state and weight channel-major, the memory S[h][k][v]) and read from the layer's at the boundary; value
// head h reads key head h mod hk, the layer's fixed permutation of the checkpoint's h / (hv / hk).
#ifndef TESTS_MODELS_DECODER_REFERENCE_H_
#define TESTS_MODELS_DECODER_REFERENCE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "models/model_config.h"

namespace spatial::testing {

struct DecoderWeights {
  // Row-major, dense matmul weights as k x n (the layer's convention, models/layer.h); q/k norms only for Qwen3.
  std::vector<double> attn_norm_w, wq, wk, wv, q_norm_w, k_norm_w, wo, mlp_norm_w, w_gate, w_up, w_down;
  // The mixture: router d x ne; expert e's gate and up rows (out) at (e*dff + o)*d, its down rows at (e*d + j)*dff,
  // PyTorch's out x in per expert (lowerings/moe/moe.h's layout).
  std::vector<double> router, experts_gate, experts_up, experts_down;
  // gpt-oss: the projections' biases, a sink logit per query head, the router's and the experts' biases (expert e's
  // gate and up at e*dff, down at e*d).
  std::vector<double> bq, bk, bv, bo, sinks, router_bias, experts_gate_bias, experts_up_bias, experts_down_bias;
  // DeepSeek-V3: latent attention's projections (k x n), its two norms, kv_b_proj's key rows W_uk (head h's nope
  // row e over the latent at (h*nope + e)*rank) and value rows W_uv (head h's latent row r at (h*rank + r)*vd); the
  // mixture's selection bias and its shared expert (gate, up d x dff, down dff x d).
  std::vector<double> wq_a, q_a_norm_w, wq_b, wkv_a, kv_a_norm_w, w_uk, w_uv, selection_bias, shared_gate, shared_up,
      shared_down;
  // Qwen3-Next: the Gated DeltaNet's projections (k x n, q | k | v | z and b | a), the conv's taps (tap t of channel
  // c at t*chan + c), dt_bias, a_rate = -exp(A_log), the gated norm's weight, out_proj; the shared expert's gate.
  std::vector<double> w_qkvz, w_ba, conv_w, dt_bias, a_rate, gdn_norm_w, w_out, shared_expert_gate;
};

struct DecoderStep {
  std::vector<double> x_out;             // 1 x hidden
  std::vector<double> k_cache, v_cache;  // cache x kv_heads*head_dim, row P-1 rewritten
  // A Gated DeltaNet layer's carried state in the layer's layouts: the conv ring (tap t of channel c at t*chan + c,
  // the newest tap last) and the memory (head h's value row a, key column b at h*d*d + a*d + b).
  std::vector<double> conv_state, gdn_state;
};

inline std::vector<double> RmsNorm(const std::vector<double>& x, int64_t first, int64_t n,
                                   const std::vector<double>& w, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[first + i] * x[first + i];
  const double inv = 1.0 / std::sqrt(ss / n + eps);
  std::vector<double> y(n);
  for (int64_t i = 0; i < n; ++i) y[i] = x[first + i] * inv * w[i];
  return y;
}

inline std::vector<double> VecMat(const std::vector<double>& x, const std::vector<double>& w, int64_t k, int64_t n) {
  std::vector<double> y(n, 0.0);
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < n; ++j) y[j] += x[i] * w[i * n + j];
  }
  return y;
}

// transformers' _compute_llama3_parameters, for inv_freq f of a head_dim-wide rotary.
inline double Llama3Scaled(double f, const RopeScaling& r) {
  const double pi = 3.14159265358979323846, wavelen = 2 * pi / f, old = r.original_max_positions;
  const double low_wavelen = old / r.low_freq_factor, high_wavelen = old / r.high_freq_factor;
  if (wavelen < high_wavelen) return f;
  if (wavelen > low_wavelen) return f / r.factor;
  const double smooth = (old / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  return (1 - smooth) * f / r.factor + smooth * f;
}

// transformers' _compute_yarn_parameters for pair i of a dim-wide rotary (truncate false: no rounding of the band).
inline double YarnScaled(double f, int64_t i, int64_t dim, double theta, const RopeScaling& r) {
  const double pi = 3.14159265358979323846;
  auto dim_of = [&](double rot) {
    return dim * std::log(r.original_max_positions / (rot * 2 * pi)) / (2 * std::log(theta));
  };
  double lo = dim_of(r.beta_fast), hi = dim_of(r.beta_slow);
  if (r.truncate) lo = std::floor(lo), hi = std::ceil(hi);
  lo = std::max(lo, 0.0);
  hi = std::min(hi, dim - 1.0);
  if (lo == hi) hi += 0.001;
  const double ramp = std::min(std::max((i - lo) / (hi - lo), 0.0), 1.0);
  return f / r.factor * ramp + f * (1 - ramp);
}

// One SwiGLU. out_by_in: PyTorch's out x in rows (the mixture's layout), else the dense k x n. Biases may be null.
// limit > 0: gpt-oss's clamped form, gate = min(gate, limit), up in [-limit, limit], gate*sigmoid(alpha*gate)*(up+1).
struct Glu {
  const double *gate, *up, *down, *gate_bias = nullptr, *up_bias = nullptr, *down_bias = nullptr;
  double limit = 0, alpha = 0;
};

inline std::vector<double> SwiGlu(const std::vector<double>& x, const Glu& g, int64_t d, int64_t ff,
                                  bool out_by_in) {
  std::vector<double> prod(ff, 0.0), y(d, 0.0);
  for (int64_t o = 0; o < ff; ++o) {
    double a = g.gate_bias ? g.gate_bias[o] : 0, u = g.up_bias ? g.up_bias[o] : 0;
    for (int64_t i = 0; i < d; ++i) {
      a += x[i] * (out_by_in ? g.gate[o * d + i] : g.gate[i * ff + o]);
      u += x[i] * (out_by_in ? g.up[o * d + i] : g.up[i * ff + o]);
    }
    if (g.limit > 0) {
      a = std::min(a, g.limit);
      u = std::min(std::max(u, -g.limit), g.limit);
      prod[o] = a / (1.0 + std::exp(-g.alpha * a)) * (u + 1);
    } else {
      prod[o] = a / (1.0 + std::exp(-a)) * u;
    }
  }
  for (int64_t j = 0; j < d; ++j) {
    if (g.down_bias) y[j] = g.down_bias[j];
    for (int64_t o = 0; o < ff; ++o) y[j] += prod[o] * (out_by_in ? g.down[j * ff + o] : g.down[o * d + j]);
  }
  return y;
}

inline void AddBias(std::vector<double>& v, const std::vector<double>& b) {
  for (size_t i = 0; i < b.size() && i < v.size(); ++i) v[i] += b[i];
}

inline double Sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// Qwen3NextGatedDeltaNet at one token, the conv and recurrent states updated in place.
inline std::vector<double> GatedDeltaNetStep(const ModelConfig& c, const DecoderWeights& w,
                                             const std::vector<double>& h, std::vector<double>& conv_ring,
                                             std::vector<double>& memory) {
  const LinearAttention& g = c.gdn;
  const int64_t d = c.hidden, hk = g.k_heads, hv = g.v_heads, dk = g.k_dim, dv = g.v_dim, taps = g.conv;
  const int64_t key = hk * dk, val = hv * dv, chan = 2 * key + val;
  const std::vector<double> qkvz = VecMat(h, w.w_qkvz, d, chan + val), ba = VecMat(h, w.w_ba, d, 2 * hv);
  // causal_conv1d_update: the state (chan x taps, channel-major) shifted left, the token last, then each channel's
  // taps against its window, then SiLU.
  std::vector<double> mixed(chan);
  for (int64_t ch = 0; ch < chan; ++ch) {
    std::vector<double> window(taps);
    for (int64_t t = 0; t + 1 < taps; ++t) window[t] = conv_ring[(t + 1) * chan + ch];
    window[taps - 1] = qkvz[ch];
    double y = 0;
    for (int64_t t = 0; t < taps; ++t) {
      conv_ring[t * chan + ch] = window[t];
      y += window[t] * w.conv_w[t * chan + ch];
    }
    mixed[ch] = y * Sigmoid(y);
  }
  // l2norm(x) = x / sqrt(sum x^2 + 1e-6), per head; the query then times 1/sqrt(dk).
  auto l2 = [&](int64_t first) {
    std::vector<double> out(key);
    for (int64_t hh = 0; hh < hk; ++hh) {
      double ss = 0;
      for (int64_t e = 0; e < dk; ++e) ss += mixed[first + hh * dk + e] * mixed[first + hh * dk + e];
      for (int64_t e = 0; e < dk; ++e) out[hh * dk + e] = mixed[first + hh * dk + e] / std::sqrt(ss + 1e-6);
    }
    return out;
  };
  std::vector<double> q = l2(0);
  const std::vector<double> k = l2(key);
  for (double& e : q) e /= std::sqrt(static_cast<double>(dk));
  std::vector<double> core(val);
  for (int64_t hh = 0; hh < hv; ++hh) {
    const int64_t kh = hh % hk;
    const double beta = Sigmoid(ba[hh]);
    const double decay = std::exp(w.a_rate[hh] * std::log1p(std::exp(ba[hv + hh] + w.dt_bias[hh])));
    // torch_recurrent_gated_delta_rule, the state S[kk][vv] of this head.
    auto S = [&](int64_t kk, int64_t vv) -> double& { return memory[hh * dk * dv + vv * dk + kk]; };
    std::vector<double> delta(dv);
    for (int64_t vv = 0; vv < dv; ++vv) {
      double kv_mem = 0;
      for (int64_t kk = 0; kk < dk; ++kk) kv_mem += (S(kk, vv) *= decay) * k[kh * dk + kk];
      delta[vv] = (mixed[2 * key + hh * dv + vv] - kv_mem) * beta;
    }
    std::vector<double> o(dv, 0.0);
    for (int64_t vv = 0; vv < dv; ++vv) {
      for (int64_t kk = 0; kk < dk; ++kk) {
        S(kk, vv) += k[kh * dk + kk] * delta[vv];
        o[vv] += S(kk, vv) * q[kh * dk + kk];
      }
    }
    // Qwen3NextRMSNormGated: the head normed, times the weight and silu(z).
    double ss = 0;
    for (double e : o) ss += e * e;
    const double inv = 1.0 / std::sqrt(ss / dv + c.eps);
    for (int64_t vv = 0; vv < dv; ++vv) {
      const double z = qkvz[chan + hh * dv + vv];
      core[hh * dv + vv] = o[vv] * inv * w.gdn_norm_w[vv] * z * Sigmoid(z);
    }
  }
  return VecMat(core, w.w_out, val, d);
}

// DeepSeek-V3's attention at 0-based row `row` (modeling_deepseek_v3.py, not absorbed: K and V expanded from the
// latent per head), the latent cache's row written first. Rotation: the half split over the rope part (the model's
// interleaved pairs are a fixed permutation of the projections' rope columns, the same for every weight).
inline std::vector<double> LatentStep(const ModelConfig& c, const DecoderWeights& w, const std::vector<double>& h,
                                      std::vector<double>& cache, int64_t position) {
  const LatentAttention& m = c.mla;
  const int64_t d = c.hidden, nh = c.heads, qk = m.nope + m.rope, row_w = m.kv_rank + m.rope, half = m.rope / 2;
  const int64_t row = position - 1;
  const RopeScaling& r = c.rope_scaling;
  auto mscale = [&](double ms) { return r.factor > 1 ? 0.1 * ms * std::log(r.factor) + 1 : 1.0; };
  const double table = r.mscale_all_dim > 0 ? mscale(r.mscale) / mscale(r.mscale_all_dim) : mscale(1.0);
  auto rotate = [&](double* v) {
    for (int64_t i = 0; i < half; ++i) {
      const double f = YarnScaled(std::pow(c.rope_theta, -static_cast<double>(i) / half), i, m.rope, c.rope_theta, r);
      const double cs = table * std::cos(row * f), sn = table * std::sin(row * f);
      const double a = v[i], b = v[i + half];
      v[i] = a * cs - b * sn;
      v[i + half] = a * sn + b * cs;
    }
  };
  const std::vector<double> qa = RmsNorm(VecMat(h, w.wq_a, d, m.q_rank), 0, m.q_rank, w.q_a_norm_w, c.eps);
  std::vector<double> q = VecMat(qa, w.wq_b, m.q_rank, nh * qk);
  for (int64_t hh = 0; hh < nh; ++hh) rotate(q.data() + hh * qk + m.nope);
  const std::vector<double> kva = VecMat(h, w.wkv_a, d, row_w);
  const std::vector<double> latent = RmsNorm(kva, 0, m.kv_rank, w.kv_a_norm_w, c.eps);
  std::copy(latent.begin(), latent.end(), cache.begin() + row * row_w);
  std::copy(kva.begin() + m.kv_rank, kva.end(), cache.begin() + row * row_w + m.kv_rank);
  rotate(cache.data() + row * row_w + m.kv_rank);
  const double ms = r.mscale_all_dim > 0 ? mscale(r.mscale_all_dim) : 1.0;
  const double scale = ms * ms / std::sqrt(static_cast<double>(qk));
  std::vector<double> ctx(nh * m.vd, 0.0);
  for (int64_t hh = 0; hh < nh; ++hh) {
    std::vector<double> s(position);
    std::vector<std::vector<double>> vals(position, std::vector<double>(m.vd, 0.0));
    double mx = -INFINITY;
    for (int64_t j = 0; j < position; ++j) {
      const double* cj = cache.data() + j * row_w;
      double dot = 0;
      for (int64_t e = 0; e < m.nope; ++e) {
        double k = 0;  // head hh's nope key e at position j
        for (int64_t t = 0; t < m.kv_rank; ++t) k += w.w_uk[(hh * m.nope + e) * m.kv_rank + t] * cj[t];
        dot += q[hh * qk + e] * k;
      }
      for (int64_t e = 0; e < m.rope; ++e) dot += q[hh * qk + m.nope + e] * cj[m.kv_rank + e];
      for (int64_t v = 0; v < m.vd; ++v) {
        for (int64_t t = 0; t < m.kv_rank; ++t) vals[j][v] += cj[t] * w.w_uv[(hh * m.kv_rank + t) * m.vd + v];
      }
      s[j] = scale * dot;
      mx = std::max(mx, s[j]);
    }
    double sum = 0;
    for (double& e : s) sum += (e = std::exp(e - mx));
    for (int64_t j = 0; j < position; ++j) {
      for (int64_t v = 0; v < m.vd; ++v) ctx[hh * m.vd + v] += s[j] / sum * vals[j][v];
    }
  }
  return VecMat(ctx, w.wo, nh * m.vd, d);
}

inline DecoderStep DecodeStep(const ModelConfig& c, int64_t layer, const DecoderWeights& w,
                              const std::vector<double>& x, std::vector<double> k_cache, std::vector<double> v_cache,
                              int64_t position, std::vector<double> conv_state = {},
                              std::vector<double> gdn_state = {}) {
  const int64_t d = c.hidden, hd = c.head_dim, nh = c.heads, nkv = c.kv_heads;
  // The rotated part of a head (Qwen3-Next: partial_rotary_factor of it), split in halves.
  const int64_t half = c.mla.on() ? hd / 2 : static_cast<int64_t>(hd * c.partial_rotary) / 2;
  const int64_t kvw = nkv * hd, ff = c.intermediate, row = position - 1;
  const std::vector<double> h = RmsNorm(x, 0, d, w.attn_norm_w, c.eps);
  const bool gpt_oss = c.architecture == "GptOssForCausalLM";
  std::vector<double> attn;
  const bool next = c.architecture == "Qwen3NextForCausalLM";
  if (c.architecture == "DeepseekV3ForCausalLM") {
    attn = LatentStep(c, w, h, k_cache, position);
  } else if (next && layer < static_cast<int64_t>(c.linear.size()) && c.linear[layer]) {
    attn = GatedDeltaNetStep(c, w, h, conv_state, gdn_state);
  } else {
    std::vector<double> q = VecMat(h, w.wq, d, (next ? 2 : 1) * nh * hd), gate;
    if (next) {  // Qwen3NextAttention: view(heads, 2 * head_dim), chunked into the query and the gate
      std::vector<double> query;
      for (int64_t hh = 0; hh < nh; ++hh) {
        query.insert(query.end(), q.begin() + 2 * hh * hd, q.begin() + (2 * hh + 1) * hd);
        gate.insert(gate.end(), q.begin() + (2 * hh + 1) * hd, q.begin() + (2 * hh + 2) * hd);
      }
      q = std::move(query);
    }
    std::vector<double> k = VecMat(h, w.wk, d, kvw), v = VecMat(h, w.wv, d, kvw);
    AddBias(q, w.bq);
    AddBias(k, w.bk);
    AddBias(v, w.bv);
    const bool qwen3 = c.architecture == "Qwen3ForCausalLM" || c.architecture == "Qwen3MoeForCausalLM" || next;
    const bool yarn = c.rope_scaling.type == "yarn";
    const double mscale = yarn ? 0.1 * std::log(c.rope_scaling.factor) + 1 : 1.0;
    auto norm_and_rotate = [&](std::vector<double>& t, int64_t heads, const std::vector<double>& nw) {
      for (int64_t hh = 0; hh < heads; ++hh) {
        std::vector<double> n(t.begin() + hh * hd, t.begin() + (hh + 1) * hd);
        if (qwen3) n = RmsNorm(t, hh * hd, hd, nw, c.eps);
        for (int64_t i = 0; i < half; ++i) {
          double f = std::pow(c.rope_theta, -static_cast<double>(i) / half);
          if (c.rope_scaling.type == "llama3") f = Llama3Scaled(f, c.rope_scaling);
          if (yarn) f = YarnScaled(f, i, 2 * half, c.rope_theta, c.rope_scaling);
          const double angle = static_cast<double>(row) * f;
          const double cs = mscale * std::cos(angle), sn = mscale * std::sin(angle);
          t[hh * hd + i] = n[i] * cs - n[i + half] * sn;
          t[hh * hd + i + half] = n[i] * sn + n[i + half] * cs;
        }
        for (int64_t i = 2 * half; i < hd; ++i) t[hh * hd + i] = n[i];  // past a partial rotary: as normed
      }
    };
    norm_and_rotate(q, nh, w.q_norm_w);
    norm_and_rotate(k, nkv, w.k_norm_w);
    std::copy(k.begin(), k.end(), k_cache.begin() + row * kvw);
    std::copy(v.begin(), v.end(), v_cache.begin() + row * kvw);
    std::vector<double> ctx(nh * hd, 0.0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    // A sliding layer (gpt-oss) sees its last W positions: row - j < W.
    const bool sliding = layer < static_cast<int64_t>(c.sliding.size()) && c.sliding[layer];
    const int64_t first = sliding ? std::max<int64_t>(0, position - c.sliding_window) : 0;
    for (int64_t hh = 0; hh < nh; ++hh) {
      const int64_t g = hh / (nh / nkv);
      std::vector<double> s(position, 0.0);
      double m = gpt_oss ? w.sinks[hh] : -INFINITY;
      for (int64_t j = first; j < position; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < hd; ++e) dot += q[hh * hd + e] * k_cache[j * kvw + g * hd + e];
        s[j] = scale * dot;
        m = std::max(m, s[j]);
      }
      double sum = gpt_oss ? std::exp(w.sinks[hh] - m) : 0.0;  // the sink: in the denominator, no value row
      for (int64_t j = first; j < position; ++j) sum += (s[j] = std::exp(s[j] - m));
      for (int64_t j = first; j < position; ++j) {
        for (int64_t e = 0; e < hd; ++e) ctx[hh * hd + e] += s[j] / sum * v_cache[j * kvw + g * hd + e];
      }
    }
    for (size_t i = 0; i < gate.size(); ++i) ctx[i] *= Sigmoid(gate[i]);
    attn = VecMat(ctx, w.wo, nh * hd, d);
    AddBias(attn, w.bo);
  }
  std::vector<double> h1(d);
  for (int64_t i = 0; i < d; ++i) h1[i] = x[i] + attn[i];
  const std::vector<double> h2 = RmsNorm(h1, 0, d, w.mlp_norm_w, c.eps);
  std::vector<double> down(d, 0.0);
  const bool moe = c.experts > 0 && std::find(c.dense_layers.begin(), c.dense_layers.end(), layer) ==
                                        c.dense_layers.end() && (layer + 1) % c.sparse_step == 0;
  if (!moe) {
    down = SwiGlu(h2, Glu{w.w_gate.data(), w.w_up.data(), w.w_down.data()}, d, ff, false);
  } else {
    const int64_t ne = c.experts, eff = c.moe_intermediate;
    std::vector<double> p = VecMat(h2, w.router, d, ne);
    AddBias(p, w.router_bias);
    // Qwen3-MoE: the softmax of every logit (then the top k, renormalized or not). gpt-oss: the top k of the
    // logits, then the softmax of those k -- the same weights as the full softmax's top k renormalized, which is
    // what is computed here (norm_topk is true for it).
    const bool deepseek = c.architecture == "DeepseekV3ForCausalLM";
    if (deepseek) {
      for (double& e : p) e = 1.0 / (1.0 + std::exp(-e));  // sigmoid scores
    } else {
      const double m = *std::max_element(p.begin(), p.end());
      double z = 0;
      for (double& e : p) z += (e = std::exp(e - m));
      for (double& e : p) e /= z;
    }
    // DeepSeek-V3 (noaux_tc): choose by score + e_score_correction_bias, only in the topk_group groups whose two
    // best choosing scores sum highest; weigh by the plain score.
    std::vector<double> choose = p;
    std::vector<bool> taken(ne, false);
    if (deepseek) {
      for (int64_t e = 0; e < ne; ++e) choose[e] += w.selection_bias[e];
      const int64_t per = ne / c.groups;
      std::vector<double> group(c.groups);
      for (int64_t g = 0; g < c.groups; ++g) {
        std::vector<double> members(choose.begin() + g * per, choose.begin() + (g + 1) * per);
        std::sort(members.begin(), members.end(), std::greater<double>());
        group[g] = members[0] + (per > 1 ? members[1] : 0.0);
      }
      std::vector<bool> group_kept(c.groups, false);
      for (int64_t r = 0; r < c.groups_kept; ++r) {
        int64_t best = -1;
        for (int64_t g = 0; g < c.groups; ++g) {
          if (!group_kept[g] && (best < 0 || group[g] > group[best])) best = g;
        }
        group_kept[best] = true;
      }
      for (int64_t e = 0; e < ne; ++e) taken[e] = !group_kept[e / per];  // a dropped group's experts are out
    }
    std::vector<int64_t> chosen;
    double kept = 0;
    for (int64_t r = 0; r < c.experts_per_token; ++r) {
      int64_t best = -1;
      for (int64_t e = 0; e < ne; ++e) {
        if (!taken[e] && (best < 0 || choose[e] > choose[best])) best = e;
      }
      taken[best] = true;
      chosen.push_back(best);
      kept += p[best];
    }
    for (int64_t e : chosen) {
      Glu glu{w.experts_gate.data() + e * eff * d, w.experts_up.data() + e * eff * d,
              w.experts_down.data() + e * d * eff};
      if (gpt_oss) {
        glu.gate_bias = w.experts_gate_bias.data() + e * eff;
        glu.up_bias = w.experts_up_bias.data() + e * eff;
        glu.down_bias = w.experts_down_bias.data() + e * d;
        glu.limit = c.swiglu_limit;
        glu.alpha = 1.702;
      }
      const std::vector<double> y = SwiGlu(h2, glu, d, eff, true);
      double weight = c.norm_topk ? p[e] / kept : p[e];
      if (deepseek) weight *= c.routed_scale;  // routed_scaling_factor
      for (int64_t j = 0; j < d; ++j) down[j] += weight * y[j];
    }
    if (c.shared_dff > 0) {  // the shared expert: unweighted (DeepSeek-V3), or by its sigmoid gate (Qwen3-Next)
      const std::vector<double> y =
          SwiGlu(h2, Glu{w.shared_gate.data(), w.shared_up.data(), w.shared_down.data()}, d, c.shared_dff, false);
      const double weight = next ? Sigmoid(VecMat(h2, w.shared_expert_gate, d, 1)[0]) : 1.0;
      for (int64_t j = 0; j < d; ++j) down[j] += weight * y[j];
    }
  }
  DecoderStep out{std::vector<double>(d), std::move(k_cache), std::move(v_cache), std::move(conv_state),
                  std::move(gdn_state)};
  for (int64_t i = 0; i < d; ++i) out.x_out[i] = h1[i] + down[i];
  return out;
}

}  // namespace spatial::testing

#endif  // TESTS_MODELS_DECODER_REFERENCE_H_

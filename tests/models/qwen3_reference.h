// A Qwen3 decoder layer's decode step in plain f64 loops, written from transformers' modeling_qwen3.py and not
// from the lowerings (issue #15: the VM's layer against a reference that shares none of the op references' code).
// RMSNorm is x / sqrt(mean(x^2) + eps) * w; RoPE is the NeoX half split with inv_freq theta^(-i/half) at the
// token's 0-based position P-1; attention is softmax(q.k / sqrt(hd)) over cache rows 0..P-1 after row P-1 holds
// this token's k and v, query head h reading K/V head h / (heads / kv_heads); the MLP is down(silu(gate) * up).
#ifndef TESTS_MODELS_QWEN3_REFERENCE_H_
#define TESTS_MODELS_QWEN3_REFERENCE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "models/model_config.h"

namespace spatial::testing {

struct Qwen3Weights {
  // Row-major, matmul weights as k x n (the layer's convention, models/layer.h).
  std::vector<double> attn_norm_w, wq, wk, wv, q_norm_w, k_norm_w, wo, mlp_norm_w, w_gate, w_up, w_down;
};

struct Qwen3Step {
  std::vector<double> x_out;             // 1 x hidden
  std::vector<double> k_cache, v_cache;  // cache x kv_heads*head_dim, row P-1 rewritten
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

inline Qwen3Step Qwen3DecodeStep(const ModelConfig& c, const Qwen3Weights& w, const std::vector<double>& x,
                                 std::vector<double> k_cache, std::vector<double> v_cache, int64_t position) {
  const int64_t d = c.hidden, hd = c.head_dim, half = hd / 2, nh = c.heads, nkv = c.kv_heads;
  const int64_t kvw = nkv * hd, ff = c.intermediate, row = position - 1;
  const std::vector<double> h = RmsNorm(x, 0, d, w.attn_norm_w, c.eps);
  std::vector<double> q = VecMat(h, w.wq, d, nh * hd), k = VecMat(h, w.wk, d, kvw), v = VecMat(h, w.wv, d, kvw);
  auto norm_and_rotate = [&](std::vector<double>& t, int64_t heads, const std::vector<double>& nw) {
    for (int64_t hh = 0; hh < heads; ++hh) {
      std::vector<double> n = RmsNorm(t, hh * hd, hd, nw, c.eps);
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(row) * std::pow(c.rope_theta, -static_cast<double>(i) / half);
        t[hh * hd + i] = n[i] * std::cos(angle) - n[i + half] * std::sin(angle);
        t[hh * hd + i + half] = n[i] * std::sin(angle) + n[i + half] * std::cos(angle);
      }
    }
  };
  norm_and_rotate(q, nh, w.q_norm_w);
  norm_and_rotate(k, nkv, w.k_norm_w);
  std::copy(k.begin(), k.end(), k_cache.begin() + row * kvw);
  std::copy(v.begin(), v.end(), v_cache.begin() + row * kvw);
  std::vector<double> ctx(nh * hd, 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  for (int64_t hh = 0; hh < nh; ++hh) {
    const int64_t g = hh / (nh / nkv);
    std::vector<double> s(position);
    double m = -INFINITY;
    for (int64_t j = 0; j < position; ++j) {
      double dot = 0;
      for (int64_t e = 0; e < hd; ++e) dot += q[hh * hd + e] * k_cache[j * kvw + g * hd + e];
      s[j] = scale * dot;
      m = std::max(m, s[j]);
    }
    double sum = 0;
    for (double& e : s) sum += (e = std::exp(e - m));
    for (int64_t j = 0; j < position; ++j) {
      for (int64_t e = 0; e < hd; ++e) ctx[hh * hd + e] += s[j] / sum * v_cache[j * kvw + g * hd + e];
    }
  }
  const std::vector<double> attn = VecMat(ctx, w.wo, nh * hd, d);
  std::vector<double> h1(d);
  for (int64_t i = 0; i < d; ++i) h1[i] = x[i] + attn[i];
  const std::vector<double> h2 = RmsNorm(h1, 0, d, w.mlp_norm_w, c.eps);
  const std::vector<double> gate = VecMat(h2, w.w_gate, d, ff), up = VecMat(h2, w.w_up, d, ff);
  std::vector<double> prod(ff);
  for (int64_t i = 0; i < ff; ++i) prod[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
  const std::vector<double> down = VecMat(prod, w.w_down, ff, d);
  Qwen3Step out{std::vector<double>(d), std::move(k_cache), std::move(v_cache)};
  for (int64_t i = 0; i < d; ++i) out.x_out[i] = h1[i] + down[i];
  return out;
}

}  // namespace spatial::testing

#endif  // TESTS_MODELS_QWEN3_REFERENCE_H_

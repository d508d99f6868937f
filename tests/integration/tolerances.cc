// The cases of the tolerance table (tolerances.h). The numbers and their justifications are the families' own
// (lowerings/families.cc, what the demo and `spatial ops` show too). Each was set from the errors op_tolerance_test measures (it prints
// "measured <kind> max rel L2 ... over N runs"; SPATIAL_TOLERANCE_SEEDS=30 is how the table was measured), with
// headroom for other seeds and shapes, and is justified beside it from the target numerics
// (reference/hardware-facts.md §1.2, §2). Both targets checked, test_tiny and wormhole_n150, have Wormhole's
// numerics: bf16 tensors, pack ties-away, unpack and SFPSTORE truncate, SFPMAD RNE, the accurate SFPU kernels
// (approx_mode off), HiFi2 matrix fidelity into an fp32 Dst, denormals flushed.
//
// Background for every justification. bf16 keeps 8 significant bits: one rounding to nearest has unit roundoff
// u = 2^-8 ~ 3.9e-3, one truncation up to 2u. Over a tensor the RELATIVE L2 of one rounding is well below u: the
// error is uniform over +-half an ulp (ulp = 2^-7 of the binade's start), ~ulp/sqrt(12) RMS, which weighted by the
// values' magnitudes gives ~1.5e-3; kinds whose result is packed once from fp32 measure 1.1e-3 to 1.7e-3. A chain
// of k independent bf16 roundings grows like sqrt(k). The inputs are stored at bf16 before the run (as the op before
// would have stored them), so that rounding is the same on the VM and the simulator and not counted.
#include "tests/integration/tolerances.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>

#include "lowerings/family.h"
#include "tests/lowerings/mla_cases.h"
#include "tests/lowerings/moe_cases.h"

namespace spatial::integration {
namespace {

using testing::Draw;
using testing::Ints;
using testing::Reals;
using testing::Rng;
using testing::Spec;

// Values distinct after bf16 rounding (multiples of 1/8 below 16 in magnitude need at most 8 significant bits) with
// the maximum unique: the argmax of the rounded row is the argmax of the exact one.
Draw DistinctBf16() {
  auto next = std::make_shared<int64_t>(0);
  return [next](const std::string&, Rng&) {
    const int64_t p = (*next)++;
    // A permutation of 0..127 (odd multiplier mod 128) scaled to [-8, 8).
    return static_cast<double>((p * 37 + 11) % 128) / 8.0 - 8.0;
  };
}

// ── The cases of each kind ──────────────────────────────────────────────────────────────────────────────────

std::vector<OpCase> SiluCases() {
  std::vector<OpCase> v;
  for (auto [t, n] : std::vector<std::pair<const char*, int64_t>>{
           {"test_tiny", 37}, {"test_tiny", 200}, {"wormhole_n150", 1000}}) {
    proto::OpSpec s = Spec({"x"});
    s.mutable_silu()->set_n(n);
    v.push_back({t, s, Reals(-8, 8)});
  }
  return v;
}

std::vector<OpCase> ReluCases() {
  std::vector<OpCase> v;
  for (auto [t, n, is_int] : std::vector<std::tuple<const char*, int64_t, bool>>{
           {"test_tiny", 45, false}, {"wormhole_n150", 1000, false}, {"test_tiny", 70, true}}) {
    proto::OpSpec s = Spec({"x"});
    s.mutable_relu()->set_n(n);
    s.mutable_relu()->set_int_(is_int);
    v.push_back({t, s, is_int ? Ints(-100000, 100000) : Reals(-4, 4)});
  }
  return v;
}

std::vector<OpCase> SigmoidCases() {
  std::vector<OpCase> v;
  for (auto [t, n] : std::vector<std::pair<const char*, int64_t>>{{"test_tiny", 61}, {"wormhole_n150", 1000}}) {
    proto::OpSpec s = Spec({"x"});
    s.mutable_sigmoid()->set_n(n);
    v.push_back({t, s, Reals(-10, 10)});
  }
  return v;
}

std::vector<OpCase> GeluCases() {
  std::vector<OpCase> v;
  for (auto [t, n] : std::vector<std::pair<const char*, int64_t>>{{"test_tiny", 50}, {"wormhole_n150", 900}}) {
    proto::OpSpec s = Spec({"x"});
    s.mutable_gelu()->set_n(n);
    v.push_back({t, s, Reals(-6, 6)});
  }
  return v;
}

std::vector<OpCase> ScaleCases() {
  std::vector<OpCase> v;
  for (auto [t, n, f] : std::vector<std::tuple<const char*, int64_t, double>>{
           {"test_tiny", 40, -3.7}, {"wormhole_n150", 128, 0.08838834764831845}}) {
    proto::OpSpec s = Spec({"x"});
    s.mutable_scale()->set_n(n);
    s.mutable_scale()->set_factor(f);
    v.push_back({t, s, Reals(-100, 100)});
  }
  return v;
}

std::vector<OpCase> SoftcapCases() {
  std::vector<OpCase> v;
  for (auto [t, n, cap] : std::vector<std::tuple<const char*, int64_t, double>>{
           {"test_tiny", 33, 30.0}, {"wormhole_n150", 500, 50.0}}) {
    proto::OpSpec s = Spec({"x"});
    s.mutable_softcap()->set_n(n);
    s.mutable_softcap()->set_cap(cap);
    v.push_back({t, s, Reals(-120, 120)});
  }
  return v;
}

std::vector<OpCase> DecayCases() {
  Draw draw = [](const std::string& name, Rng& r) {
    if (name == "ar") return r.Real(-3, 3);
    if (name == "dt") return r.Real(-1, 1);
    return r.Real(-2, 0);  // alog: the rate is a negative real
  };
  std::vector<OpCase> v;
  for (auto [t, rows, heads] : std::vector<std::tuple<const char*, int64_t, int64_t>>{
           {"test_tiny", 1, 20}, {"test_tiny", 9, 9}, {"wormhole_n150", 33, 48}}) {
    proto::OpSpec s = Spec({"ar", "dt", "alog"});
    s.mutable_decay()->set_rows(rows);
    s.mutable_decay()->set_n(rows * heads);
    v.push_back({t, s, draw});
  }
  return v;
}

std::vector<OpCase> IntRequantCases() {
  std::vector<OpCase> v;
  for (auto [t, n, m, sh] : std::vector<std::tuple<const char*, int64_t, int64_t, int64_t>>{
           {"test_tiny", 30, 1234, 10}, {"test_tiny", 64, -77, 0}, {"wormhole_n150", 2048, 1234567, 24}}) {
    proto::OpSpec s = Spec({"x"});
    auto* r = s.mutable_int_requant();
    r->set_n(n);
    r->set_m(m);
    r->set_s(sh);
    v.push_back({t, s, Ints(INT8_MIN, INT8_MAX)});
  }
  return v;
}

std::vector<OpCase> IntClampCases() {
  std::vector<OpCase> v;
  for (auto [t, n] : std::vector<std::pair<const char*, int64_t>>{{"test_tiny", 27}, {"wormhole_n150", 2048}}) {
    proto::OpSpec s = Spec({"x"});
    auto* c = s.mutable_int_clamp();
    c->set_n(n);
    c->set_lo(-128);
    c->set_hi(127);
    v.push_back({t, s, Ints(-100000, 100000)});
  }
  return v;
}

std::vector<OpCase> BinaryCases() {
  std::vector<OpCase> v;
  for (auto [t, rows, cols, op, broadcast] :
       std::vector<std::tuple<const char*, int64_t, int64_t, proto::BinarySpec::Op, bool>>{
           {"test_tiny", 1, 27, proto::BinarySpec::ADD, false},
           {"test_tiny", 9, 20, proto::BinarySpec::MUL, true},
           {"wormhole_n150", 1, 3072, proto::BinarySpec::MUL, false},
           {"wormhole_n150", 32, 1024, proto::BinarySpec::ADD, false},
           {"wormhole_n150", 40, 200, proto::BinarySpec::SUB, true}}) {
    proto::OpSpec s = Spec({"a", "b"});
    if (rows > 1) {
      s.set_shape_rows(rows);
      s.set_shape_cols(cols);
    }
    s.mutable_binary()->set_op(op);
    s.mutable_binary()->set_n(rows * cols);
    s.mutable_binary()->set_broadcast(broadcast);
    v.push_back({t, s, Reals(-4, 4)});
  }
  return v;
}

// The routing shapes of the models at a reduced hidden size: the flat form (widths not whole tiles) and the
// blocked one.
std::vector<OpCase> MoeCases() {
  using S = proto::MoeSpec;
  using testing::MoeCase;
  std::vector<OpCase> v;
  for (const MoeCase& c : std::vector<MoeCase>{
           {"test_tiny", 8, 8, 4, 2},
           {"test_tiny", 7, 5, 8, 3, S::SIGMOID, false, 0.0, 0, 0, false, false, false, /*weigh_inputs=*/true},
           {"wormhole_n150", 16, 12, 128, 8},                                                         // Qwen3-30B-A3B
           {"wormhole_n150", 12, 10, 32, 4, S::SOFTMAX, true, 0.0, 0, 0, true, true, false, false, true},  // gpt-oss
           {"wormhole_n150", 8, 8, 256, 8, S::SIGMOID, true, 2.5, 8, 4, false, false, true},          // DeepSeek-V3
           // The blocked form: the same models' routing, every product on the matrix engine at HiFi2.
           {"test_tiny", 16, 24, 8, 3, S::SIGMOID, false, 0.0, 0, 0, false, false, false, true},
           {"wormhole_n150", 256, 96, 128, 8},
           {"wormhole_n150", 128, 128, 32, 4, S::SOFTMAX, true, 0.0, 0, 0, true, true, false, false, true},
           {"wormhole_n150", 64, 64, 256, 8, S::SIGMOID, true, 2.5, 8, 4, false, false, true},
           // DeepSeek-V3's routing with its shared expert beside the routed ones, both forms.
           {"test_tiny", 6, 5, 8, 2, S::SOFTMAX, true, 0.0, 0, 0, false, false, false, false, false, 7},
           {"wormhole_n150", 64, 64, 256, 8, S::SIGMOID, true, 2.5, 8, 4, false, false, true, false, false, 64},
           // Qwen3-Next's gated shared expert over its 512 experts.
           {"wormhole_n150", 64, 32, 512, 10, S::SOFTMAX, true, 0.0, 0, 0, false, false, false, false, false, 32,
            true},
           // A prefill's tokens through the dense form: Qwen3-30B-A3B's routing over 40 tokens, gpt-oss's over 3.
           {"wormhole_n150", 64, 64, 128, 8, S::SOFTMAX, true, 0.0, 0, 0, false, false, false, false, false, 0, false,
            /*tokens=*/40},
           {"wormhole_n150", 64, 96, 32, 4, S::SOFTMAX, true, 0.0, 0, 0, true, true, false, false, true, 0, false, 3},
           // DeepSeek-V3's group limit over 40 tokens, with its shared expert.
           {"wormhole_n150", 64, 64, 256, 8, S::SIGMOID, true, 2.5, 8, 4, false, false, true, false, false, 64, false,
            40},
           // Qwen3-Next's gated shared expert over 33 tokens.
           {"wormhole_n150", 64, 32, 512, 10, S::SOFTMAX, true, 0.0, 0, 0, false, false, false, false, false, 32,
            true, 33}}) {
    v.push_back({c.target, testing::MoeSpecOf(c), testing::MoeDraw(c.d, c.dff)});
  }
  return v;
}

// The scan: SUM (discounted, exclusive), MAX, and the online softmax's denominator, over tails and several blocks.
// Discounts in [0.5, 1) as a decay's; x in [-3, 3).
std::vector<OpCase> ScanCases() {
  std::vector<OpCase> v;
  for (auto [t, steps, lanes, op, discounted, exclusive, denominator] :
       std::vector<std::tuple<const char*, int64_t, int64_t, proto::ScanSpec::Op, bool, bool, bool>>{
           {"test_tiny", 37, 20, proto::ScanSpec::SUM, true, true, false},
           {"test_tiny", 30, 9, proto::ScanSpec::MAX, false, true, false},
           {"test_tiny", 45, 16, proto::ScanSpec::SUM, false, false, true},
           {"wormhole_n150", 100, 40, proto::ScanSpec::SUM, true, true, false},
           {"wormhole_n150", 128, 64, proto::ScanSpec::SUM, false, false, true}}) {
    proto::OpSpec s = discounted ? Spec({"x", "d"}) : Spec({"x"});
    proto::ScanSpec* sc = s.mutable_scan();
    sc->set_steps(steps);
    sc->set_lanes(lanes);
    sc->set_op(op);
    sc->set_discounted(discounted);
    sc->set_exclusive(exclusive);
    sc->set_softmax_denominator(denominator);
    v.push_back({t, s, [](const std::string& name, Rng& r) { return name == "d" ? r.Real(0.5, 1.0) : r.Real(-3, 3); }});
  }
  return v;
}

// Attention's backward pass: GQA groups 1 and 4, causal and not, tails, on test_tiny and at Wormhole's tiles. The
// draws are a training step's magnitudes: L near the log of the positions a row attends, so P = e^(scale S - L)
// is a distribution's size (the VM and the simulator read the same inputs; consistency is the unit test's matter).
std::vector<OpCase> AttentionBackwardCases() {
  std::vector<OpCase> v;
  for (auto [t, h, kv, hd, rows, causal] : std::vector<std::tuple<const char*, int64_t, int64_t, int64_t, int64_t, bool>>{
           {"test_tiny", 2, 2, 16, 21, false},
           {"test_tiny", 4, 1, 16, 30, true},
           {"wormhole_n150", 4, 1, 64, 70, true},
           {"wormhole_n150", 2, 2, 128, 64, false}}) {
    proto::OpSpec s = Spec({"q", "k", "v", "o", "d_o", "lse"});
    proto::AttentionBackwardSpec* a = s.mutable_attention_backward();
    a->set_h(h);
    a->set_kv(kv);
    a->set_hd(hd);
    a->set_rows(rows);
    a->set_causal(causal);
    const double log_l = std::log(static_cast<double>(rows));
    Draw draw = [log_l](const std::string& name, Rng& r) {
      return name == "lse" ? r.Real(log_l - 1.0, log_l) : r.Real(-1, 1);
    };
    v.push_back({t, s, draw});
  }
  return v;
}

// A latent attention's decode step: the fold over one and several tiles of heads, P literal and read at run time,
// DeepSeek-V3's head widths over 32 heads.
std::vector<OpCase> MlaCases() {
  using testing::MlaCase;
  std::vector<OpCase> v;
  for (const MlaCase& c : std::vector<MlaCase>{{"test_tiny", 8, 8, 8, 16, 8, 40},
                                               {"test_tiny", 16, 8, 8, 16, 16, 40, 9, true},
                                               {"test_tiny", 8, 16, 8, 32, 8, 64, 57, true},
                                               {"wormhole_n150", 64, 32, 32, 256, 32, 96, 33, true},
                                               {"wormhole_n150", 32, 128, 64, 512, 128, 256, 200, true, 0.1352},
                                               // A prefill's rows: DeepSeek-V3's head widths over 40 rows.
                                               {"wormhole_n150", 32, 128, 64, 512, 128, 64, 1, false, 0.1352, 40}}) {
    v.push_back({c.target, testing::MlaSpecOf(c), testing::MlaDraw(c)});
  }
  return v;
}

std::vector<OpCase> MatmulCases() {
  std::vector<OpCase> v;
  // The last four with B given transposed (n x k, read in place): one K block, several, and a folded run of them.
  for (auto [t, m, k, n, tb] : std::vector<std::tuple<const char*, int64_t, int64_t, int64_t, bool>>{
           {"test_tiny", 5, 13, 7, false}, {"test_tiny", 16, 40, 24, false}, {"wormhole_n150", 32, 256, 96, false},
           {"wormhole_n150", 40, 100, 70, false}, {"test_tiny", 5, 13, 7, true}, {"test_tiny", 16, 40, 24, true},
           {"wormhole_n150", 32, 64, 96, true}, {"wormhole_n150", 40, 300, 70, true}}) {
    proto::OpSpec s = Spec({"a", tb ? "bt" : "b"});
    s.mutable_matmul()->set_m(m);
    s.mutable_matmul()->set_k(k);
    s.mutable_matmul()->set_n(n);
    s.mutable_matmul()->set_transpose_b(tb);
    v.push_back({t, s, Reals(-1, 1)});
  }
  return v;
}

std::vector<OpCase> TransposeCases() {
  std::vector<OpCase> v;
  for (auto [t, r, c, f] : std::vector<std::tuple<const char*, int64_t, int64_t, bool>>{
           {"test_tiny", 3, 7, true}, {"test_tiny", 4, 8, false}, {"wormhole_n150", 16, 16, true}}) {
    proto::OpSpec s = Spec({"x"});
    s.mutable_transpose()->set_rows(r);
    s.mutable_transpose()->set_cols(c);
    s.mutable_transpose()->set_float_(f);
    v.push_back({t, s, f ? Reals(-50, 50) : Ints(-1000000, 1000000)});
  }
  return v;
}

std::vector<OpCase> HeadSliceCases() {
  std::vector<OpCase> v;
  for (auto [t, every, from, width, n] : std::vector<std::tuple<const char*, int64_t, int64_t, int64_t, int64_t>>{
           {"test_tiny", 5, 2, 3, 20}, {"test_tiny", 16, 8, 8, 64}, {"wormhole_n150", 128, 0, 64, 4 * 128}}) {
    proto::OpSpec s = Spec({"x"});
    auto* h = s.mutable_head_slice();
    h->set_every(every);
    h->set_from(from);
    h->set_width(width);
    h->set_n(n);
    v.push_back({t, s, Reals(-50, 50)});
  }
  // The dense form: DeepSeek-V3's q_pe over 40 tokens of 4 heads, a 40 x 768 matrix.
  proto::OpSpec dense = Spec({"x"});
  auto* h = dense.mutable_head_slice();
  h->set_every(192);
  h->set_from(128);
  h->set_width(64);
  h->set_n(40 * 4 * 192);
  h->set_rows(40);
  v.push_back({"wormhole_n150", dense, Reals(-50, 50)});
  return v;
}

std::vector<OpCase> JoinCases() {
  std::vector<OpCase> v;
  for (auto [t, rows, heads, wa, wb] : std::vector<std::tuple<const char*, int64_t, int64_t, int64_t, int64_t>>{
           {"test_tiny", 2, 3, 9, 15}, {"test_tiny", 1, 2, 16, 32}, {"wormhole_n150", 1, 4, 4 * 64, 4 * 64}}) {
    proto::OpSpec s = Spec({"a", "b"});
    auto* j = s.mutable_join();
    j->set_rows(rows);
    j->set_heads(heads);
    j->set_wa(wa);
    j->set_wb(wb);
    v.push_back({t, s, Reals(-50, 50)});
  }
  // The dense form: DeepSeek-V3's query (128 nope + 64 rope a head) over 40 tokens of 4 heads.
  proto::OpSpec dense = Spec({"a", "b"});
  auto* j = dense.mutable_join();
  j->set_rows(40);
  j->set_heads(4);
  j->set_wa(4 * 128);
  j->set_wb(4 * 64);
  j->set_dense(true);
  v.push_back({"wormhole_n150", dense, Reals(-50, 50)});
  return v;
}

proto::OpSpec HeadMatmul(int64_t m, int64_t heads, int64_t a, int64_t b) {
  proto::OpSpec s = Spec({"x", "w"});
  auto* h = s.mutable_head_matmul();
  h->set_m(m);
  h->set_heads(heads);
  h->set_a(a);
  h->set_b(b);
  // W is an Input of the flat form and a Param of the tiled one: its fill gives the Param its values.
  auto* rp = s.mutable_operands(1)->mutable_fill()->mutable_real_pattern();
  // A short period scrambles it across the columns, so the columns' dot products are independent: a ramp (a long
  // period) makes every column nearly the same sum, and a sum that happens to cancel has a relative error as large
  // as the cancellation, which would measure the draw rather than the numerics.
  rp->set_modulus(97);
  rp->set_scale(0.02);
  rp->set_offset(-0.97);
  return s;
}

std::vector<OpCase> HeadMatmulCases() {
  return {{"test_tiny", HeadMatmul(2, 3, 2, 5), Reals(-2, 2)},
          {"test_tiny", HeadMatmul(1, 2, 16, 8), Reals(-2, 2)},
          {"wormhole_n150", HeadMatmul(1, 2, 128, 64), Reals(-2, 2)}};
}

std::vector<OpCase> L2NormCases() {
  std::vector<OpCase> v;
  for (auto [t, rows, cols] : std::vector<std::tuple<const char*, int64_t, int64_t>>{
           {"test_tiny", 3, 10}, {"test_tiny", 4, 16}, {"wormhole_n150", 4, 128}}) {
    proto::OpSpec s = Spec({"x"});
    s.mutable_l2norm()->set_rows(rows);
    s.mutable_l2norm()->set_cols(cols);
    s.mutable_l2norm()->set_eps(1e-6);
    v.push_back({t, s, Reals(-3, 3)});
  }
  return v;
}

proto::OpSpec Rms(int64_t rows, int64_t cols, bool weight, bool residual, bool per_head) {
  proto::OpSpec s;
  s.set_out("y");
  s.add_operands()->set_name("x");
  if (weight) {
    proto::Operand* w = s.add_operands();
    w->set_name("w");
    auto* rp = w->mutable_fill()->mutable_real_pattern();
    rp->set_modulus(97);
    rp->set_scale(0.02);
    rp->set_offset(0.1);
  }
  if (residual) s.add_operands()->set_name("r");
  auto* fr = s.mutable_fused_row();
  fr->set_rows(rows);
  fr->set_cols(cols);
  fr->set_reduce(proto::FusedRowSpec::RMS_NORM);
  fr->set_weight(weight);
  fr->set_residual(residual);
  fr->set_per_head(per_head);
  fr->set_eps(1e-6);
  return s;
}

// The per-head form over dense token rows of `heads` heads (FusedRowSpec.dense_heads).
proto::OpSpec DenseHeads(proto::OpSpec s, int64_t heads) {
  s.mutable_fused_row()->set_dense_heads(heads);
  return s;
}

std::vector<OpCase> FusedRowCases() {
  // Flat, the head as the item, streamed (a row wider than the accumulator: the sum of squares as a matmul), and the
  // heads of dense token rows.
  return {{"test_tiny", Rms(2, 7, true, true, false), Reals(-3, 3)},
          {"test_tiny", Rms(3, 24, true, false, true), Reals(-3, 3)},
          {"test_tiny", Rms(1, 100, true, true, false), Reals(-3, 3)},
          {"wormhole_n150", Rms(8, 128, true, false, true), Reals(-3, 3)},
          {"wormhole_n150", Rms(1, 1024, true, false, false), Reals(-3, 3)},
          {"test_tiny", DenseHeads(Rms(11 * 3, 16, true, false, true), 3), Reals(-3, 3)},
          {"wormhole_n150", DenseHeads(Rms(40 * 8, 128, true, false, true), 8), Reals(-3, 3)}};
}

std::vector<OpCase> SoftmaxCases() {
  std::vector<OpCase> v;
  for (auto [t, rows, cols, sinks, at_acc] : std::vector<std::tuple<const char*, int64_t, int64_t, bool, bool>>{
           {"test_tiny", 3, 10, false, false}, {"test_tiny", 4, 8, true, false}, {"test_tiny", 3, 9, true, true},
           {"wormhole_n150", 16, 16, false, false}, {"wormhole_n150", 1, 128, false, true}}) {
    proto::OpSpec s = sinks ? Spec({"x", "sinks"}) : Spec({"x"});
    auto* m = s.mutable_softmax();
    m->set_rows(rows);
    m->set_cols(cols);
    m->set_sinks(sinks);
    m->set_at_acc(at_acc);
    v.push_back({t, s, Reals(-4, 4)});
  }
  return v;
}

struct Attn {
  int64_t h = 1, kv = 1, hd = 8, vd = 8, l = 8, rows = 1;
  int64_t named_p = 0;  // > 0: the position read from operand "pos", with this value
  int64_t sliding = 0;
  bool sinks = false;
};

proto::OpSpec AttnSpec(const Attn& c) {
  proto::OpSpec s = Spec({"q", "k", "v"});
  proto::AttentionSpec* a = s.mutable_attention();
  a->set_h(c.h);
  a->set_kv(c.kv);
  a->set_hd(c.hd);
  a->set_vd(c.vd);
  a->set_l(c.l);
  a->set_rows(c.rows);
  if (c.named_p > 0) {
    a->mutable_pos()->set_named("pos");
    s.add_operands()->set_name("pos");
  }
  if (c.sliding > 0) a->mutable_window()->set_sliding(c.sliding);
  if (c.sinks) {
    a->set_sinks(true);
    s.add_operands()->set_name("sinks");
  }
  return s;
}

Draw AttnDraw(int64_t p) {
  return [p](const std::string& name, Rng& r) {
    if (name == "pos") return static_cast<double>(p);
    if (name == "sinks") return r.Real(-2, 2);
    return r.Real(-1, 1);
  };
}

std::vector<OpCase> AttentionCases() {
  std::vector<OpCase> v;
  // The three sections (heads not whole tiles), the flash fold (whole-tile heads), on both targets.
  for (auto [t, c] : std::vector<std::pair<const char*, Attn>>{
           {"test_tiny", {.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 16}},
           {"test_tiny", {.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 10, .named_p = 7, .sinks = true}},
           {"test_tiny", {.h = 4, .kv = 2, .hd = 8, .vd = 8, .l = 20, .named_p = 10}},
           {"test_tiny", {.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 16, .rows = 3, .named_p = 5, .sliding = 4}},
           {"wormhole_n150", {.h = 4, .kv = 1, .hd = 64, .vd = 64, .l = 64, .named_p = 40}},
           // Split decode (flash_split.h): the parts' partials at fp32 and their combine.
           {"test_tiny", {.h = 8, .kv = 2, .hd = 8, .vd = 8, .l = 32, .named_p = 30}},
           {"test_tiny", {.h = 8, .kv = 2, .hd = 8, .vd = 8, .l = 32, .named_p = 9, .sinks = true}},
           {"wormhole_n150", {.h = 32, .kv = 8, .hd = 128, .vd = 128, .l = 512, .named_p = 300}}}) {
    v.push_back({t, AttnSpec(c), AttnDraw(c.named_p)});
  }
  return v;
}

proto::OpSpec LutSpec(int64_t h, int64_t kv, int64_t hd, int64_t l, int64_t n, int64_t m, int64_t s, int64_t p) {
  proto::OpSpec spec = Spec({"q", "k", "v", "e"});
  proto::LutAttentionSpec* a = spec.mutable_lut_attention();
  a->set_h(h);
  a->set_kv(kv);
  a->set_hd(hd);
  a->set_l(l);
  a->set_table_len(n);
  a->set_m(m);
  a->set_s(s);
  if (p > 0) {
    a->mutable_pos()->set_named("pos");
    spec.add_operands()->set_name("pos");
  }
  return spec;
}

Draw LutDraw(int64_t p) {
  return [p](const std::string& name, Rng& r) {
    if (name == "pos") return static_cast<double>(p);
    if (name == "e") return static_cast<double>(r.Int(1, 127));
    return static_cast<double>(r.Int(-128, 127));
  };
}

std::vector<OpCase> LutAttentionCases() {
  return {{"test_tiny", LutSpec(2, 1, 4, 8, 16, 3, 4, 0), LutDraw(0)},
          {"test_tiny", LutSpec(4, 2, 8, 8, 12, 11, 11, 5), LutDraw(5)},
          {"wormhole_n150", LutSpec(8, 1, 32, 30, 128, 3, 10, 0), LutDraw(0)}};
}

std::vector<OpCase> FullAttentionCases() {
  std::vector<OpCase> v;
  for (auto [t, len, h, hd] : std::vector<std::tuple<const char*, int64_t, int64_t, int64_t>>{
           {"test_tiny", 5, 2, 8}, {"test_tiny", 3, 1, 10}, {"wormhole_n150", 40, 2, 64}}) {
    proto::OpSpec s = Spec({"q", "k", "v"});
    s.mutable_full_attention()->set_t(len);
    s.mutable_full_attention()->set_h(h);
    s.mutable_full_attention()->set_hd(hd);
    v.push_back({t, s, Reals(-1, 1)});
  }
  return v;
}

// A table's values and its indices: "i" holds `index`, "idx" visits both edges of the table first.
Draw GatherDraw(int64_t rows, int64_t index, bool is_float) {
  auto next = std::make_shared<int64_t>(0);
  return [=](const std::string& name, Rng& r) -> double {
    if (name == "i") return static_cast<double>(index);
    if (name == "idx") {
      const int64_t k = (*next)++;
      return static_cast<double>(k == 0 ? 1 : k == 1 ? rows : r.Int(1, rows));
    }
    return is_float ? r.Real(-8, 8) : static_cast<double>(r.Int(-100000, 100000));
  };
}

proto::OpSpec RowGather(int64_t rows, int64_t cols, bool named, int64_t at, bool is_float, bool dense) {
  proto::OpSpec s = named ? Spec({"t", "i"}) : Spec({"t"});
  auto* g = s.mutable_row_gather();
  g->set_rows(rows);
  g->set_cols(cols);
  if (named) {
    g->mutable_index()->set_named("i");
  } else {
    g->mutable_index()->set_literal(at);
  }
  g->set_float_(is_float);
  g->set_dense(dense);
  return s;
}

std::vector<OpCase> RowGatherCases() {
  return {{"test_tiny", RowGather(5, 3, true, 5, true, false), GatherDraw(5, 5, true)},
          {"test_tiny", RowGather(6, 40, false, 2, false, false), GatherDraw(6, 2, false)},
          {"test_tiny", RowGather(17, 12, true, 9, true, true), GatherDraw(17, 9, true)},
          {"wormhole_n150", RowGather(33, 1024, true, 33, true, true), GatherDraw(33, 33, true)}};
}

std::vector<OpCase> RowsGatherCases() {
  std::vector<OpCase> v;
  for (auto [t, rows, cols, count, f] : std::vector<std::tuple<const char*, int64_t, int64_t, int64_t, bool>>{
           {"test_tiny", 5, 3, 4, true}, {"test_tiny", 4, 16, 6, false}, {"wormhole_n150", 50, 1024, 4, true}}) {
    proto::OpSpec s = Spec({"t", "idx"});
    auto* g = s.mutable_rows_gather();
    g->set_rows(rows);
    g->set_cols(cols);
    g->set_count(count);
    g->set_float_(f);
    v.push_back({t, s, GatherDraw(rows, 0, f)});
  }
  return v;
}

// Set rows [at, at + count) of table "t" to "s" (named: at is read from "i"); the table and the source from
// disjoint ranges.
proto::OpSpec SetRow(int64_t rows, int64_t cols, int64_t count, bool named, int64_t at, bool is_float, bool dense) {
  proto::OpSpec s = named ? Spec({"t", "s", "i"}) : Spec({"t", "s"});
  s.set_out("t");  // in place: the result is the table
  auto* w = s.mutable_set_row();
  w->set_rows(rows);
  w->set_cols(cols);
  w->set_count(count);
  if (named) {
    w->mutable_index()->set_named("i");
  } else {
    w->mutable_index()->set_literal(at);
  }
  w->set_float_(is_float);
  w->set_dense(dense);
  return s;
}

Draw WriteDraw(int64_t at, bool is_float) {
  return [=](const std::string& name, Rng& r) -> double {
    if (name == "i") return static_cast<double>(at);
    const bool source = name == "s";
    if (is_float) return source ? r.Real(10, 20) : r.Real(-20, -10);
    return static_cast<double>(source ? r.Int(1000, 900000) : r.Int(-900000, -1000));
  };
}

std::vector<OpCase> SetRowCases() {
  return {{"test_tiny", SetRow(7, 5, 3, true, 5, true, false), WriteDraw(5, true)},
          {"test_tiny", SetRow(6, 40, 1, false, 6, false, false), WriteDraw(6, false)},
          {"test_tiny", SetRow(17, 16, 9, true, 2, true, true), WriteDraw(2, true)},
          {"wormhole_n150", SetRow(64, 1024, 1, true, 64, true, true), WriteDraw(64, true)}};
}

std::vector<OpCase> ArgMaxCases() {
  std::vector<OpCase> v;
  for (auto [t, n, f] : std::vector<std::tuple<const char*, int64_t, bool>>{{"test_tiny", 13, true},
                                                                            {"test_tiny", 100, true},
                                                                            {"test_tiny", 64, false},
                                                                            {"wormhole_n150", 1000, true}}) {
    proto::OpSpec s = Spec({"x"});
    s.mutable_argmax()->set_n(n);
    s.mutable_argmax()->set_float_(f);
    v.push_back({t, s, f ? DistinctBf16() : Ints(-100000, 100000)});
  }
  return v;
}

// q at random; the tables the real angles of every row (position rho): rc[rho * half + i] = cos(rho * theta^(-i/half)).
Draw RopeDraw(int64_t half, double theta, int64_t at) {
  auto counts = std::make_shared<std::map<std::string, int64_t>>();
  return [=](const std::string& name, Rng& r) -> double {
    if (name == "p") return static_cast<double>(at);
    if (name != "rc" && name != "rs") return r.Real(-2, 2);
    const int64_t e = (*counts)[name]++;
    const double angle = static_cast<double>(e / half) * std::pow(theta, -static_cast<double>(e % half) / half);
    return name == "rc" ? std::cos(angle) : std::sin(angle);
  };
}

proto::OpSpec RopeSpec(int64_t h, int64_t hd, int64_t half, int64_t rows, int64_t cache, bool named, int64_t at) {
  proto::OpSpec s = cache > 0 && named ? Spec({"q", "rc", "rs", "p"}) : Spec({"q", "rc", "rs"});
  auto* p = s.mutable_rope();
  p->set_h(h);
  p->set_hd(hd);
  p->set_half(half);
  p->set_rows(rows);
  p->set_theta(1e6);  // Qwen3's rope_theta
  if (cache > 0) {
    p->set_cache(cache);
    if (named) {
      p->mutable_from()->set_named("p");
    } else {
      p->mutable_from()->set_literal(at);
    }
  }
  return s;
}

std::vector<OpCase> RopeCases() {
  // Flat, the head as the item (partial rotary, windowed table rows), a cache read at a named position; Qwen3's
  // 128-wide heads on wormhole, one row and a prefill's dense rows.
  return {{"test_tiny", RopeSpec(4, 4, 2, 2, 0, false, 1), RopeDraw(2, 1e6, 1)},
          {"test_tiny", RopeSpec(6, 16, 5, 3, 0, false, 1), RopeDraw(5, 1e6, 1)},
          {"test_tiny", RopeSpec(8, 16, 8, 2, 12, true, 7), RopeDraw(8, 1e6, 7)},
          {"wormhole_n150", RopeSpec(8, 128, 64, 1, 40, true, 33), RopeDraw(64, 1e6, 33)},
          // A prefill's 32 rows as the dense matrix (Llama-3.1-8B's query heads).
          {"wormhole_n150", RopeSpec(128, 128, 64, 32, 64, true, 33), RopeDraw(64, 1e6, 33)}};
}

}  // namespace

const std::vector<OpTolerance>& ToleranceTable() {
  static const std::vector<OpTolerance> table = [] {
    // The bounds and their reasons are the families' own (lowerings/families.cc); this table adds the cases each
    // kind is measured and checked at.
    const std::pair<const char*, std::vector<OpCase> (*)()> cases[] = {
        {"sigmoid", &SigmoidCases},
        {"silu", &SiluCases},
        {"gelu", &GeluCases},
        {"scale", &ScaleCases},
        {"softcap", &SoftcapCases},
        {"decay", &DecayCases},
        {"relu", &ReluCases},
        {"int_requant", &IntRequantCases},
        {"int_clamp", &IntClampCases},
        {"binary", &BinaryCases},
        {"matmul", &MatmulCases},
        {"transpose", &TransposeCases},
        {"head_slice", &HeadSliceCases},
        {"join", &JoinCases},
        {"head_matmul", &HeadMatmulCases},
        {"l2norm", &L2NormCases},
        {"fused_row", &FusedRowCases},
        {"softmax", &SoftmaxCases},
        {"attention", &AttentionCases},
        {"lut_attention", &LutAttentionCases},
        {"full_attention", &FullAttentionCases},
        {"row_gather", &RowGatherCases},
        {"rows_gather", &RowsGatherCases},
        {"set_row", &SetRowCases},
        {"argmax", &ArgMaxCases},
        {"mla", &MlaCases},
        {"attention_backward", &AttentionBackwardCases},
        {"scan", &ScanCases},
        {"moe", &MoeCases},
        {"rope", &RopeCases},
        {"causal_conv", &CausalConvCases},
        {"gated_delta", &GatedDeltaCases},
    };
    std::vector<OpTolerance> t;
    for (const auto& [kind, make] : cases) {
      const OpFamily* f = FindFamily(kind);
      if (f != nullptr) t.push_back(OpTolerance{kind, f->rel_l2, f->vm_tol, make});
    }
    std::sort(t.begin(), t.end(), [](const OpTolerance& a, const OpTolerance& b) { return a.kind < b.kind; });
    return t;
  }();
  return table;
}

const OpTolerance* FindTolerance(const std::string& kind) {
  for (const OpTolerance& t : ToleranceTable()) {
    if (t.kind == kind) return &t;
  }
  return nullptr;
}

}  // namespace spatial::integration

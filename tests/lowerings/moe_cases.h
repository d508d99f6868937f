// A mixture-of-experts spec from a few named fields, and inputs scaled as a model's are: shared by the lowering's
// three-way check (moe_test.cc) and the simulator's tolerance cases (tests/integration/tolerances.cc).
#ifndef TESTS_LOWERINGS_MOE_CASES_H_
#define TESTS_LOWERINGS_MOE_CASES_H_

#include <cmath>
#include <cstdint>
#include <string>

#include "proto/op.pb.h"
#include "tests/lowerings/harness.h"

namespace spatial::testing {

struct MoeCase {
  const char* target;
  int64_t d, dff, ne, k;
  proto::MoeSpec::Score score = proto::MoeSpec::SOFTMAX;
  bool renormalize = true;
  double scale = 0.0;
  int64_t groups = 0, kept = 0;
  bool router_bias = false, expert_biases = false, selection_bias = false;
  bool weigh_inputs = false;
  bool clamped = false;
  int64_t shared = 0;  // the shared experts' width; 0: none
  bool shared_gate = false;  // Qwen3-Next: the shared expert weighed by sigmoid(x . sw)
  int64_t tokens = 0;  // a prefill's rows of x; 0: one token
};

inline proto::OpSpec MoeSpecOf(const MoeCase& c) {
  proto::OpSpec s = Spec({"x", "wr", "wg", "wu", "wd"});
  proto::MoeSpec* m = s.mutable_moe();
  m->set_d(c.d);
  m->set_dff(c.dff);
  m->set_ne(c.ne);
  m->set_k(c.k);
  m->set_score(c.score);
  m->set_act(c.clamped ? proto::MoeSpec::CLAMPED_SWIGLU : proto::MoeSpec::SWIGLU);
  if (c.clamped) {
    m->set_clamp_limit(7.0);  // gpt-oss's swiglu_limit
    m->set_clamp_slope(1.702);
  }
  m->set_renormalize(c.renormalize);
  m->set_scale(c.scale);
  m->set_group_count(c.groups);
  m->set_group_kept(c.kept);
  m->set_weigh_inputs(c.weigh_inputs);
  m->set_tokens(c.tokens);
  if (c.router_bias) {
    m->set_router_bias(true);
    s.add_operands()->set_name("rb");
  }
  if (c.expert_biases) {
    m->set_gate_bias(true);
    m->set_up_bias(true);
    m->set_down_bias(true);
    for (const char* n : {"gb", "ub", "db"}) s.add_operands()->set_name(n);
  }
  if (c.selection_bias) {
    m->set_selection_bias(true);
    s.add_operands()->set_name("sb");
  }
  if (c.shared > 0) {
    m->set_shared_dff(c.shared);
    for (const char* n : {"sg", "su", "sd"}) s.add_operands()->set_name(n);
  }
  if (c.shared_gate) {
    m->set_shared_gate(true);
    s.add_operands()->set_name("sw");
  }
  return s;
}

// Activations of order one, weights scaled as an initializer scales them, so the scores spread and the FFN's
// values stay of order one.
inline Draw MoeDraw(int64_t d, int64_t dff) {
  return [d, dff](const std::string& name, Rng& r) {
    if (name == "x") return r.Real(-2, 2);
    if (name == "wd" || name == "sd") return r.Real(-1, 1) / std::sqrt(static_cast<double>(dff));
    if (name == "sb") return r.Real(-0.05, 0.05);
    if (name.size() == 2 && name[1] == 'b') return r.Real(-0.5, 0.5);
    return r.Real(-1, 1) / std::sqrt(static_cast<double>(d));
  };
}

}  // namespace spatial::testing

#endif  // TESTS_LOWERINGS_MOE_CASES_H_

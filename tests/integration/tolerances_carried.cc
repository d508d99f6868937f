// The tolerance table's cases of the carried-state kinds (tolerances.h): the causal conv's ring and the Gated
// DeltaNet's recurrent state, each checked as one decode step and a block of rows.
#include <cstdint>
#include <string>
#include <vector>

#include "tests/integration/tolerances.h"
#include "tests/lowerings/carried_cases.h"

namespace spatial::integration {
namespace {

using testing::ConvSpec;
using testing::Draw;
using testing::Reals;
using testing::Rng;
using testing::Spec;

}  // namespace

std::vector<OpCase> CausalConvCases() {
  // A flat ring, a matrix ring, a block of rows; Qwen3-Next's 8192 conv channels for one decode step.
  return {{"test_tiny", ConvSpec(1, 4, 8), Reals(-2, 2)},
          {"test_tiny", ConvSpec(1, 4, 64), Reals(-2, 2)},
          {"test_tiny", ConvSpec(5, 3, 5), Reals(-2, 2)},
          {"wormhole_n150", ConvSpec(1, 4, 8192), Reals(-2, 2)}};
}

namespace {

proto::OpSpec GatedDelta(int64_t hv, int64_t hk, int64_t d, int64_t rows, proto::GatedDeltaSpec::GateAct gate) {
  proto::OpSpec s = Spec({"q", "k", "v", "z", "b", "a", "S", "gn"});
  auto* g = s.mutable_gated_delta();
  g->set_hv(hv);
  g->set_hk(hk);
  g->set_d(d);
  g->set_rows(rows);
  g->set_eps(1e-6);
  g->set_gate(gate);
  // The norm weight is embedded as a Param: its fill gives its values (around 1, as a trained layer's).
  auto* gn = s.mutable_operands(7)->mutable_fill()->mutable_real_pattern();
  gn->set_modulus(97);
  gn->set_scale(0.01);
  gn->set_offset(0.5);
  return s;
}

// A step of a trained layer's ranges: the decay alpha in (0.5, 1), the write strength beta in (0, 1), a memory of
// moderate size.
Draw GatedDeltaDraw() {
  return [](const std::string& name, Rng& r) {
    if (name == "a") return r.Real(0.5, 1.0);
    if (name == "b") return r.Real(0.0, 1.0);
    if (name == "S") return r.Real(-0.5, 0.5);
    return r.Real(-1, 1);
  };
}

}  // namespace

std::vector<OpCase> GatedDeltaCases() {
  return {{"test_tiny", GatedDelta(2, 1, 8, 1, proto::GatedDeltaSpec::SILU), GatedDeltaDraw()},
          {"test_tiny", GatedDelta(2, 2, 8, 2, proto::GatedDeltaSpec::SIGMOID), GatedDeltaDraw()},
          {"wormhole_n150", GatedDelta(4, 2, 32, 1, proto::GatedDeltaSpec::SILU), GatedDeltaDraw()}};
}

}  // namespace spatial::integration

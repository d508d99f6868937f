// A causal conv spec from its sizes, with its weight embedded as a Param: shared by the lowering's three-way check
// (carried_conv_test.cc) and the simulator's tolerance cases (tests/integration/tolerances_carried.cc).
#ifndef TESTS_LOWERINGS_CARRIED_CASES_H_
#define TESTS_LOWERINGS_CARRIED_CASES_H_

#include <cstdint>
#include <string>

#include "proto/op.pb.h"
#include "tests/lowerings/harness.h"

namespace spatial::testing {

// Input x, weight w, ring `ring`; `rows` rows of `chan` channels over `taps` taps.
inline proto::OpSpec ConvSpec(int64_t rows, int64_t taps, int64_t chan, const std::string& ring = "cs") {
  proto::OpSpec s = Spec({"x", "w", ring.c_str()});
  s.mutable_causal_conv()->set_taps(taps);
  s.mutable_causal_conv()->set_chan(chan);
  s.mutable_causal_conv()->set_rows(rows);
  // The weight is a Param where the ring is a matrix: the lowering embeds its fill.
  proto::Fill::RealPattern* w = s.mutable_operands(1)->mutable_fill()->mutable_real_pattern();
  w->set_modulus(37);
  w->set_scale(0.05);
  w->set_offset(-0.9);
  return s;
}

}  // namespace spatial::testing

#endif  // TESTS_LOWERINGS_CARRIED_CASES_H_

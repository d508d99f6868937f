// A latent attention spec from a few named fields, and inputs scaled as a model's are: shared by the lowering's
// three-way check (mla_test.cc) and the simulator's tolerance cases (tests/integration/tolerances.cc).
#ifndef TESTS_LOWERINGS_MLA_CASES_H_
#define TESTS_LOWERINGS_MLA_CASES_H_

#include <cmath>
#include <cstdint>
#include <string>

#include "proto/op.pb.h"
#include "tests/lowerings/harness.h"

namespace spatial::testing {

struct MlaCase {
  const char* target;
  int64_t heads, nope, rope, rank, vd, l;
  int64_t pos = 0;     // 0: unset (every position)
  bool named = false;  // P an operand, read at run time
  double scale = 0.0;
  int64_t rows = 0;  // a prefill's query rows; 0: one decode step
};

inline proto::OpSpec MlaSpecOf(const MlaCase& c) {
  proto::OpSpec s = Spec({"q", "wuk", "c", "wuv"});
  proto::MlaSpec* m = s.mutable_mla();
  m->set_heads(c.heads);
  m->set_nope(c.nope);
  m->set_rope(c.rope);
  m->set_rank(c.rank);
  m->set_vd(c.vd);
  m->set_l(c.l);
  m->set_scale(c.scale);
  m->set_rows(c.rows);
  if (c.named) {
    m->mutable_pos()->set_named("p");
    s.add_operands()->set_name("p");
  } else if (c.pos > 0) {
    m->mutable_pos()->set_literal(c.pos);
  }
  return s;
}

// Activations of order one and weights scaled as an initializer scales them; the position is the case's.
inline Draw MlaDraw(const MlaCase& c) {
  return [c](const std::string& name, Rng& r) {
    if (name == "p") return static_cast<double>(c.pos);
    if (name == "wuk") return r.Real(-1, 1) / std::sqrt(static_cast<double>(c.nope));
    if (name == "wuv") return r.Real(-1, 1) / std::sqrt(static_cast<double>(c.rank));
    return r.Real(-1, 1);
  };
}

}  // namespace spatial::testing

#endif  // TESTS_LOWERINGS_MLA_CASES_H_

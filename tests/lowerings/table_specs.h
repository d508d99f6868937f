// Op specs of the tables-and-heads family, shared by the lowering tests and the refusal tests so both exercise
// the same operand names and fields.
#ifndef TESTS_LOWERINGS_TABLE_SPECS_H_
#define TESTS_LOWERINGS_TABLE_SPECS_H_

#include <cstdint>

#include "proto/op.pb.h"
#include "tests/lowerings/three_way.h"

namespace spatial::testing {

inline proto::OpSpec Transpose(int64_t rows, int64_t cols, bool is_float = true) {
  proto::OpSpec s = Spec({"x"});
  s.mutable_transpose()->set_rows(rows);
  s.mutable_transpose()->set_cols(cols);
  s.mutable_transpose()->set_float_(is_float);
  return s;
}

// rows > 1: the dense form (X a rows x n/rows matrix).
inline proto::OpSpec HeadSlice(int64_t every, int64_t from, int64_t width, int64_t n, int64_t rows = 0) {
  proto::OpSpec s = Spec({"x"});
  auto* h = s.mutable_head_slice();
  h->set_every(every);
  h->set_from(from);
  h->set_width(width);
  h->set_n(n);
  if (rows != 0) h->set_rows(rows);
  return s;
}

inline proto::OpSpec Join(int64_t rows, int64_t heads, int64_t wa, int64_t wb, bool dense = false) {
  proto::OpSpec s = Spec({"a", "b"});
  auto* j = s.mutable_join();
  j->set_rows(rows);
  j->set_heads(heads);
  j->set_wa(wa);
  j->set_wb(wb);
  if (dense) j->set_dense(true);
  return s;
}

// W's fill is left Unknown: a test that runs the tiled form (W a Param) sets it.
inline proto::OpSpec HeadMatmulSpec(int64_t m, int64_t heads, int64_t a, int64_t b) {
  proto::OpSpec s = Spec({"x", "w"});
  auto* h = s.mutable_head_matmul();
  h->set_m(m);
  h->set_heads(heads);
  h->set_a(a);
  h->set_b(b);
  return s;
}

}  // namespace spatial::testing

#endif  // TESTS_LOWERINGS_TABLE_SPECS_H_

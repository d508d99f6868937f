// The f64 reference of attention's backward pass (DESIGN §5, §10): the gradients by their direct formulas, never
// through a program or an online recurrence, and the forward that produces a backward's inputs.
//
// For query row t, head i (K/V head x = i / group), live positions j < shape.Limit(t), s_j = scale * q . k_j:
//   P_j = e^(s_j - L),  D = sum_c dO[c] O[c],  dP_j = dO . v_j,  dS_j = P_j (dP_j - D),
//   dq = scale * sum_j dS_j k_j,  dk_j += scale * dS_j q,  dv_j += P_j dO.
// These are the exact gradients of sum(dO * O) when O and L are the forward's (BackwardForward), which the tests
// check against central differences.
//
// Layouts (row-major values): q (t*h + i)*hd + e; k (j*kv + x)*hd + e; v (j*kv + x)*vd + c; o and dO (t*h + i)*vd + c;
// L t*h + i.
#ifndef LOWERINGS_ATTENTION_REFERENCE_BACKWARD_H_
#define LOWERINGS_ATTENTION_REFERENCE_BACKWARD_H_

#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/attention/backward.h"
#include "proto/op.pb.h"
#include "spatial/tensor_data.h"

namespace spatial {

// The forward of `s` in f64: its output O and each row and head's log-sum-exp L over its live positions.
struct ForwardRows {
  std::vector<double> o;
  std::vector<double> lse;
};
ForwardRows BackwardForward(const BackwardShape& s, const std::vector<double>& q, const std::vector<double>& k,
                            const std::vector<double>& v);

struct Gradients {
  std::vector<double> dq;
  std::vector<double> dk;
  std::vector<double> dv;
};
// The direct formulas above. Sizes are the caller's to get right (ReferenceAttentionBackward checks them).
Gradients BackwardDirect(const BackwardShape& s, const std::vector<double>& q, const std::vector<double>& k,
                         const std::vector<double>& v, const std::vector<double>& o, const std::vector<double>& d_o,
                         const std::vector<double>& lse);

// OpSpec.attention_backward: inputs by operand name, shaped as the lowering declares them (Q rows x h*hd, K l x
// kv*hd, V l x kv*vd, O and dO rows x h*vd, L rows x h). Results: OpSpec.out (dQ), "{out}_dk", "{out}_dv".
absl::StatusOr<TensorMap> ReferenceAttentionBackward(const proto::OpSpec& spec, const TensorMap& inputs);

}  // namespace spatial

#endif  // LOWERINGS_ATTENTION_REFERENCE_BACKWARD_H_

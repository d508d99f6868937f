// The naive f64 attention reference (DESIGN §5, §10): every attention form's judge — flash fold, grouped decode,
// three-section, full attention — computed straight from the spec, the softmax taken directly over each row's live
// positions (its maximum, then its exponentials and their sum), never through the online recurrence.
//
// Semantics, for query row r in [0, T), head i in [0, h) (query head v = r*h + i):
//   - K/V head (v mod h) / group, group = max(h / kv, 1) (GQA);
//   - score s_j = scale * sum_e Q[r, i, e] * K[j, kvh, e], scale the spec's or 1/sqrt(hd);
//   - a soft cap c*tanh(s_j / c) BEFORE the mask;
//   - live positions j < n_r, n_r = P + r with a position (literal or the named operand's value), else the positions
//     attended (the whole cache, or a literal decode length); with a window also j >= first(n_r) - 1: the last W
//     positions (sliding) or the row's own chunk of C (chunked);
//   - sinks in ggml soft_max_ext semantics: head i's raw sink logit (neither scaled nor capped) joins the softmax's
//     maximum and denominator and takes no value: out = sum_j e^(s_j - m) V_j / (e^(sink - m) + sum_j e^(s_j - m)),
//     m = max(sink, max_j s_j).
// A masked position is not read at all: whatever the cache holds there (even NaN) changes nothing.
#ifndef LOWERINGS_ATTENTION_REFERENCE_ATTENTION_H_
#define LOWERINGS_ATTENTION_REFERENCE_ATTENTION_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/attention/geometry.h"
#include "proto/op.pb.h"
#include "spatial/tensor_data.h"

namespace spatial {

// The attention of `shape` in f64. q: T*h*hd values (row r, head i, element e at (r*h + i)*hd + e); k: l*kv*hd
// (position j, K/V head x at (j*kv + x)*hd + e); v: l*kv*vd likewise; position: P when the shape's limit is an
// operand; sinks: h logits when shape.sinks. Returns T*h*vd values, (r*h + i)*vd + c. An out-of-range P (outside
// 1 <= P <= l - (T - 1)), a query head whose K/V head is past kv, or a wrong count is InvalidArgument.
absl::StatusOr<std::vector<double>> NaiveAttention(const AttentionShape& shape, const std::vector<double>& q,
                                                   const std::vector<double>& k, const std::vector<double>& v,
                                                   std::optional<int64_t> position, const std::vector<double>& sinks);

// OpSpec.attention. Inputs by operand name: Q with T*h*hd values, K with l*kv*hd, V with l*kv*vd, each either flat
// (1 x n) or dense (the flash form's T x h*hd, l x kv*hd, l x kv*vd: the same row-major values); P (1 x 1) when the
// position is named; the sinks (1 x h). The result, named OpSpec.out, is shaped like Q: T x h*vd for dense queries,
// 1 x T*h*vd for flat ones.
absl::StatusOr<TensorMap> ReferenceAttention(const proto::OpSpec& spec, const TensorMap& inputs);

// OpSpec.full_attention: Q, K, V with t*h*hd values each (flat or dense), every row attending all t positions, its
// own K/V head, scale 1/sqrt(hd). The result is shaped like Q.
absl::StatusOr<TensorMap> ReferenceFullAttention(const proto::OpSpec& spec, const TensorMap& inputs);

}  // namespace spatial

#endif  // LOWERINGS_ATTENTION_REFERENCE_ATTENTION_H_

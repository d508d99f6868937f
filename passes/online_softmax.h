// The online-softmax rewrite (issue #17; seed 000's rewrite of a composed attention into one scan per row): the
// three-section attention — scores, the row softmax, the weighted V sum, each a flat section that holds its whole
// row — becomes the flash fold, which never materializes a row: its (maximum, sum of exponentials) pair is carried
// block to block and the earlier terms rescaled (e^(x - m) = e^(x - m') e^(m - m')). The sum is reassociated, so the
// result equals the original's up to rounding, and the new sections claim that.
//
// ★ RECOGNIZED BY REBUILDING. The pass reads the attention's parameters off the program — heads, positions and
// widths from the scores' bands, the scale and the cap from their bodies, the K/V head of each query head from its
// key slot, the position and the causal rows from the mask's thresholds, a window from its floors (a sliding span or
// the chunk sizes they admit, each a candidate), the sinks from the softmax's inputs — then
// lowers that attention as three sections and requires the program's sections to EQUAL those, field by field. Only
// then does it replace them, by the same attention's flash form (lowerings/attention/attention.h, FORM_FLASH). A
// program that merely resembles an attention is declined with the first field that differs, so the rewrite never
// changes what a program computes beyond the reassociated sum.
//
// It declines, each with its reason (a decline is the pass's error, "online-softmax: declined: ..."):
//   - no three-section attention in the program (no section with an 'attn_scores' stage);
//   - the scores or the probabilities read by any section other than the softmax and the weighted sum (the fold
//     never materializes them, so another reader would read nothing);
//   - sections that differ from the attention they resemble (mixed precisions, a normalizer other than the row
//     softmax's sum, a changed mask or scale, ...): the first difference is named;
//   - an attention the fold does not take (heads not whole tiles): the flash form's own refusal;
//   - a tensor the fold reads dense that another section holds flat (the layouts would no longer meet).
#ifndef PASSES_ONLINE_SOFTMAX_H_
#define PASSES_ONLINE_SOFTMAX_H_

#include "absl/status/status.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// Rewrites every three-section attention of `c` into the flash fold; declines (FailedPrecondition, "declined: ...")
// when there is none or one cannot be rewritten, leaving `c` unchanged.
absl::Status OnlineSoftmax(Composition& c, const Target& target);

}  // namespace spatial

#endif  // PASSES_ONLINE_SOFTMAX_H_

// The integer values a tensor or buffer can hold, as far as the certifier can prove them: a Param table's known
// values, what earlier sections stored, otherwise the whole range of the precision. Float data has no useful
// range here (Everything): only integers address, guard and count.
#ifndef CERTIFY_VALUE_RANGES_H_
#define CERTIFY_VALUE_RANGES_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "spatial/semantics/interval.h"
#include "spatial/program.h"

namespace spatial::certify {

// [IntMin, IntMax] of an integer precision; Everything for a float.
Interval PrecisionRange(Precision p);

// The values a tensor holds before any section of the composition writes it: a compile-time table's values
// (and the zeros of its missing tail and tile padding) for Param and initialized tensors; the precision's range
// for anything given at run time (Input role, External init).
Interval InitRange(const Tensor& t);

// Tensor values by name across the sections of a composition, in section order.
class TensorRanges {
 public:
  // `given`: the values the run promises for some run inputs, by name (AdmitInputs asks "what if this input
  // only took these values"); without an entry an input may hold anything its precision holds.
  explicit TensorRanges(absl::flat_hash_map<std::string, Interval> given = {}) : given_(std::move(given)) {}
  // What a load of `t` can read now.
  Interval Get(const Tensor& t);
  // What a page loaded from `t` can hold: its values and the zeros of tile padding. For a tensor with a `given`
  // range, only that range: the promise is a question about the values the guards read (AdmitInputs asks which
  // values of a position keep its guards in range; the guards pick the position's elements, never the padding).
  Interval PageRange(const Tensor& t);
  // A store of values in `r` into `t` (part of it: the old values stay possible).
  void AddStore(const Tensor& t, const Interval& r);

 private:
  absl::flat_hash_map<std::string, Interval> ranges_;
  absl::flat_hash_map<std::string, Interval> given_;
};

}  // namespace spatial::certify

#endif  // CERTIFY_VALUE_RANGES_H_

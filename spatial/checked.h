// Checked int64 arithmetic: the one place a product or sum of sizes that may come from untrusted input is formed.
// Each returns the exact result, or nullopt when it does not fit int64 (signed overflow is undefined behaviour, and
// a wrapped size is a wrong program, never a smaller one). Callers turn nullopt into a status that names the sizes
// (lowerings/size_budget.h does for op specs).
#ifndef SPATIAL_CHECKED_H_
#define SPATIAL_CHECKED_H_

#include <cstdint>
#include <initializer_list>
#include <optional>

namespace spatial {

// a * b, or nullopt on overflow.
inline std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// a + b, or nullopt on overflow.
inline std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// a - b, or nullopt on overflow.
inline std::optional<int64_t> CheckedSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// The product of `factors` (1 for none), or nullopt when any partial product overflows.
inline std::optional<int64_t> CheckedProduct(std::initializer_list<int64_t> factors) {
  int64_t r = 1;
  for (int64_t f : factors) {
    if (__builtin_mul_overflow(r, f, &r)) return std::nullopt;
  }
  return r;
}

// ceil(a / b) for a >= 0 and b > 0, without forming a + b - 1 (which overflows near INT64_MAX); nullopt for a
// negative a or a non-positive b, which have no tile count.
inline std::optional<int64_t> CheckedCeilDiv(int64_t a, int64_t b) {
  if (a < 0 || b <= 0) return std::nullopt;
  return a / b + (a % b != 0 ? 1 : 0);
}

// Optional-propagating forms, so a chain reads as one expression: CheckedMul(CheckedAdd(a, b), c).
inline std::optional<int64_t> CheckedMul(std::optional<int64_t> a, std::optional<int64_t> b) {
  if (!a || !b) return std::nullopt;
  return CheckedMul(*a, *b);
}
inline std::optional<int64_t> CheckedAdd(std::optional<int64_t> a, std::optional<int64_t> b) {
  if (!a || !b) return std::nullopt;
  return CheckedAdd(*a, *b);
}

}  // namespace spatial

#endif  // SPATIAL_CHECKED_H_

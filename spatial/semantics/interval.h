// Saturating integer intervals: the certifier's domain for range proofs, and (as points) the exact integers every
// address evaluator of spatial/semantics uses.
//
// Program numbers are int64 but their sums and products are not (a hostile coefficient times an extent), so the
// bounds are kept in __int128 and clamped to +-2^100: far outside every range a check compares against, so a
// saturated bound still fails the check it should fail, and no arithmetic here can overflow.
#ifndef SPATIAL_SEMANTICS_INTERVAL_H_
#define SPATIAL_SEMANTICS_INTERVAL_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

namespace spatial {

using Wide = __int128;

inline constexpr Wide kSaturate = Wide{1} << 100;

inline Wide Clamp(Wide v) { return std::min(std::max(v, -kSaturate), kSaturate); }

// Inclusive [lo, hi]; empty when lo > hi (a dead branch, a check that always faults).
struct Interval {
  Wide lo = 0;
  Wide hi = -1;

  static Interval Of(Wide lo, Wide hi) { return {Clamp(lo), Clamp(hi)}; }
  static Interval Point(Wide v) { return Of(v, v); }
  static Interval Empty() { return {}; }
  static Interval Everything() { return {-kSaturate, kSaturate}; }

  bool empty() const { return lo > hi; }
  bool Within(Wide a, Wide b) const { return empty() || (lo >= a && hi <= b); }
  bool Contains(Wide v) const { return lo <= v && v <= hi; }
  friend bool operator==(const Interval&, const Interval&) = default;
};

inline Interval Hull(const Interval& a, const Interval& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)};
}

inline Interval Meet(const Interval& a, const Interval& b) {
  if (a.empty() || b.empty()) return Interval::Empty();
  return {std::max(a.lo, b.lo), std::min(a.hi, b.hi)};
}

inline Interval operator+(const Interval& a, const Interval& b) {
  if (a.empty() || b.empty()) return Interval::Empty();
  return Interval::Of(a.lo + b.lo, a.hi + b.hi);
}

inline Interval operator-(const Interval& a, const Interval& b) {
  if (a.empty() || b.empty()) return Interval::Empty();
  return Interval::Of(a.lo - b.hi, a.hi - b.lo);
}

// Bits of a non-negative value.
inline int BitLength(Wide v) {
  const auto u = static_cast<unsigned __int128>(v);
  const auto hi = static_cast<uint64_t>(u >> 64);
  if (hi != 0) return 128 - __builtin_clzll(hi);
  const auto lo = static_cast<uint64_t>(u);
  return lo != 0 ? 64 - __builtin_clzll(lo) : 0;
}

// A product of two saturated values (2^200) would overflow __int128: multiply exactly while the factors' bit
// lengths leave room, and saturate otherwise (the true product is then beyond 2^100 anyway, or close to it).
inline Wide MulSat(Wide a, Wide b) {
  const Wide aa = a < 0 ? -a : a;
  const Wide bb = b < 0 ? -b : b;
  if (BitLength(aa) + BitLength(bb) <= 125) return Clamp(a * b);
  return ((a < 0) != (b < 0)) ? -kSaturate : kSaturate;
}

inline Interval operator*(const Interval& a, const Interval& b) {
  if (a.empty() || b.empty()) return Interval::Empty();
  const Wide c[4] = {MulSat(a.lo, b.lo), MulSat(a.lo, b.hi), MulSat(a.hi, b.lo), MulSat(a.hi, b.hi)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

// coef * x, the affine term of a map.
inline Interval Scale(const Interval& x, Wide coef) { return x * Interval::Point(coef); }

inline Interval Min(const Interval& a, const Interval& b) {
  if (a.empty() || b.empty()) return Interval::Empty();
  return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
}

inline Interval Max(const Interval& a, const Interval& b) {
  if (a.empty() || b.empty()) return Interval::Empty();
  return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
}

inline Wide FloorDivWide(Wide a, Wide b) {
  Wide q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

inline Wide CeilDivWide(Wide a, Wide b) { return -FloorDivWide(-a, b); }

// floor(a / b) over b's nonzero values (a zero divisor faults at run time: it produces no value). floor(a/b) is
// monotone in a for a fixed sign of b and monotone in b for a fixed sign of a, so the extremes are at corners
// of each sign-split piece.
inline Interval FloorDiv(const Interval& a, const Interval& b) {
  if (a.empty() || b.empty()) return Interval::Empty();
  Interval out = Interval::Empty();
  auto piece = [&](Wide blo, Wide bhi) {
    if (blo > bhi) return;
    const Wide c[4] = {FloorDivWide(a.lo, blo), FloorDivWide(a.lo, bhi), FloorDivWide(a.hi, blo),
                       FloorDivWide(a.hi, bhi)};
    out = Hull(out, Interval{*std::min_element(c, c + 4), *std::max_element(c, c + 4)});
  };
  piece(b.lo, std::min<Wide>(b.hi, -1));
  piece(std::max<Wide>(b.lo, 1), b.hi);
  return out;
}

// Arithmetic shift right: floor(x / 2^by), monotone.
inline Interval Shr(const Interval& a, int64_t by) {
  if (a.empty()) return a;
  if (by <= 0) return a;
  if (by >= 120) return {a.lo < 0 ? -1 : 0, a.hi < 0 ? -1 : 0};
  return {a.lo >> by, a.hi >> by};
}

inline int64_t ToInt64(Wide v) {
  if (v > std::numeric_limits<int64_t>::max()) return std::numeric_limits<int64_t>::max();
  if (v < std::numeric_limits<int64_t>::min()) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

// Decimal text of a bound; saturated bounds print as "-inf" / "+inf".
inline std::string WideToString(Wide v) {
  if (v >= kSaturate) return "+inf";
  if (v <= -kSaturate) return "-inf";
  const bool neg = v < 0;
  if (neg) v = -v;
  std::string s;
  do {
    s.push_back(static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  } while (v != 0);
  if (neg) s.push_back('-');
  std::reverse(s.begin(), s.end());
  return s;
}

// "[lo, hi]", or "empty".
inline std::string IntervalToString(const Interval& x) {
  if (x.empty()) return "empty";
  return "[" + WideToString(x.lo) + ", " + WideToString(x.hi) + "]";
}

}  // namespace spatial

#endif  // SPATIAL_SEMANTICS_INTERVAL_H_

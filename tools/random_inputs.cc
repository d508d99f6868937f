#include "tools/random_inputs.h"

#include <algorithm>
#include <cmath>

namespace spatial {
namespace {

// SplitMix64 (Steele, Lea, Flood 2014): a tiny generator with a fully specified output sequence.
uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// FNV-1a of the tensor name, so each tensor draws its own stream.
uint64_t NameHash(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

}  // namespace

TensorData RandomTensor(const Tensor& t, uint64_t seed, std::optional<std::pair<int64_t, int64_t>> admitted) {
  TensorData d;
  d.rows = t.rows;
  d.cols = t.cols;
  d.precision = t.precision;
  int64_t n = t.rows > 0 && t.cols > 0 ? t.rows * t.cols : 0;
  d.values.resize(static_cast<size_t>(n));
  uint64_t state = seed ^ NameHash(t.name);
  if (IsInteger(t.precision)) {
    const auto [want_lo, want_hi] = admitted.value_or(std::make_pair(int64_t{-100}, int64_t{100}));
    int64_t lo = std::max<int64_t>(IntMin(t.precision), want_lo);
    int64_t hi = std::min<int64_t>(IntMax(t.precision), want_hi);
    if (lo > hi) lo = hi = std::clamp<int64_t>(0, IntMin(t.precision), IntMax(t.precision));
    // The span of an int64 range can need 64 bits; unsigned arithmetic holds it (a full range draws raw bits).
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
    for (double& v : d.values) {
      const uint64_t r = span == 0 ? SplitMix(state) : SplitMix(state) % span;
      v = static_cast<double>(static_cast<int64_t>(static_cast<uint64_t>(lo) + r));
    }
  } else {
    // 53 random bits -> u in [0, 1) exactly, then [lo, hi): the tensor's domain, else [-2, 2). lo + (hi - lo) u,
    // or lo (1 - u) + hi u where the difference overflows (a domain as wide as the doubles).
    const double lo = t.domain ? t.domain->lo : -2.0, hi = t.domain ? t.domain->hi : 2.0;
    const double width = hi - lo;
    for (double& v : d.values) {
      const double u = static_cast<double>(SplitMix(state) >> 11) * 0x1.0p-53;
      v = std::clamp(std::isfinite(width) ? lo + width * u : lo * (1.0 - u) + hi * u, lo, std::nextafter(hi, lo));
    }
  }
  return d;
}

TensorMap RandomInputs(const std::vector<Tensor>& tensors, uint64_t seed) {
  TensorMap m;
  for (const Tensor& t : tensors) m[t.name] = RandomTensor(t, seed);
  return m;
}

}  // namespace spatial

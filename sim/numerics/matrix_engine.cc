#include "sim/numerics/matrix_engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "sim/numerics/float_bits.h"
#include "sim/numerics/formats.h"

namespace spatial::numerics {
namespace {

// The K depth of one MVMUL: a 16x16 SrcA block (MVMUL.md).
constexpr int64_t kMvmulDepth = 16;

// Operand masks of the merged fp32-Dst products (see the header).
constexpr uint32_t kSrcAHi = 0xfff80000u;    // hidden + 4 mantissa bits
constexpr uint32_t kSrcAFull = 0xffffc000u;  // + the next 5: 9 mantissa bits
constexpr uint32_t kSrcBHi = 0xfffe0000u;    // hidden + 6 mantissa bits
constexpr uint32_t kSrcBFull = 0xffffe000u;  // + the next 4: 10 mantissa bits (TF32)

float Masked(float x, uint32_t mask) { return FromBits(Bits(x) & mask); }

// Per-thread scratch: operands in fp32, B laid out row-major [k][j] whatever transpose_b says, and the chunk sums.
struct Scratch {
  std::vector<float> a1, a2, b1, b2, tmp, acc;
  void Size(int64_t tr, int64_t tc, int64_t kk) {
    const auto na = static_cast<size_t>(tr * kk), nb = static_cast<size_t>(kk * tc), nc = static_cast<size_t>(tr * tc);
    if (a1.size() < na) a1.resize(na), a2.resize(na);
    if (b1.size() < nb) b1.resize(nb), b2.resize(nb);
    if (tmp.size() < nc) tmp.resize(nc), acc.resize(nc);
  }
};

Scratch& ThreadScratch() {
  thread_local Scratch s;
  return s;
}

// out[j] = sum_{k0 <= k < k1} a[k] * b[k][j] (+ a2[k] * b2[k][j] when a2) for one row, summed in fp32 in k order:
// the MVMUL's 16-term dot products with one fp32 rounding per addition (every product is exact, see the header).
// The row's partial sums are TC/4 four-lane vectors (GCC/Clang vector extensions, portable to any target) that
// stay in registers across k; lane j only ever combines column j, so the sums are exactly the scalar ones.
using V4 = float __attribute__((vector_size(16)));

template <int TC>
inline void DotRowVec(const float* __restrict a, const float* __restrict b, const float* __restrict a2,
                      const float* __restrict b2, int64_t k0, int64_t k1, float* __restrict out) {
  static_assert(TC % 4 == 0);
  constexpr int Q = TC / 4;
  V4 t[Q];
  for (int q = 0; q < Q; ++q) t[q] = V4{0, 0, 0, 0};
  auto pass = [&](const float* __restrict av, const float* __restrict bv) {
    for (int64_t k = k0; k < k1; ++k) {
      const float x = av[k];
      const V4 xv = {x, x, x, x};
      const float* __restrict bk = bv + k * TC;
#pragma GCC unroll 8
      for (int q = 0; q < Q; ++q) {
        V4 bq;
        std::memcpy(&bq, bk + 4 * q, sizeof bq);
        t[q] += xv * bq;
      }
    }
  };
  pass(a, b);
  if (a2 != nullptr) pass(a2, b2);
  std::memcpy(out, t, sizeof t);
}

// The general width.
inline void DotRowScalar(const float* __restrict a, const float* __restrict b, const float* __restrict a2,
                         const float* __restrict b2, int64_t tc, int64_t k0, int64_t k1, float* __restrict out) {
  std::fill(out, out + tc, 0.0f);
  for (int64_t k = k0; k < k1; ++k) {
    const float av = a[k];
    const float* __restrict bk = b + k * tc;
    for (int64_t j = 0; j < tc; ++j) out[j] += av * bk[j];
  }
  if (a2 == nullptr) return;
  for (int64_t k = k0; k < k1; ++k) {
    const float av = a2[k];
    const float* __restrict bk = b2 + k * tc;
    for (int64_t j = 0; j < tc; ++j) out[j] += av * bk[j];
  }
}

// Row i of one MVMUL block of the tile into `out` (tc floats), picking the kernel for the width.
inline void BlockRow(const float* a, const float* b, const float* a2, const float* b2, int64_t i, int64_t tc,
                     int64_t kk, int64_t k0, int64_t k1, float* out) {
  const float* ai = a + i * kk;
  const float* a2i = a2 == nullptr ? nullptr : a2 + i * kk;
  switch (tc) {
    case 32: DotRowVec<32>(ai, b, a2i, b2, k0, k1, out); return;
    case 16: DotRowVec<16>(ai, b, a2i, b2, k0, k1, out); return;
    case 8: DotRowVec<8>(ai, b, a2i, b2, k0, k1, out); return;
    default: DotRowScalar(ai, b, a2i, b2, tc, k0, k1, out); return;
  }
}

// The unpacker's narrowing with the drop and mode fixed at compile time, branch free so conversion loops vectorize:
// the per-element cost of the fast path. Zeros and denormals flush to +0 (§1.2); exponent 255 becomes Inf before
// rounding, so a NaN operand reads as Inf (the FPU treats exponent 255 as a huge finite value anyway:
// FloatBitPatterns.md) and the carry can never reach the sign bit.
template <int kDrop, proto::Rounding kMode>
struct FastNarrow {
  float operator()(double v) const {
    const uint32_t u = Bits(static_cast<float>(v));
    const uint32_t e = u & 0x7f800000u;
    uint32_t mag = e == 0x7f800000u ? 0x7f800000u : (u & 0x7fffffffu);
    if constexpr (kMode == proto::TIES_AWAY) {
      mag += 1u << (kDrop - 1);
    } else if constexpr (kMode != proto::TRUNCATE) {
      mag += ((1u << (kDrop - 1)) - 1u) + ((mag >> kDrop) & 1u);
    }
    const uint32_t r = (u & 0x80000000u) | (mag & ~((1u << kDrop) - 1u));
    return FromBits(e == 0 ? 0u : r);
  }
};

// Calls f(conv) with the converter from a double to the Src register value for cfg: a compile-time fast path for
// the flushing bf16/tf32 cases, the general ToSrcRegister otherwise.
template <typename F>
void WithSrcConverter(const MatmulConfig& cfg, F&& f) {
  const bool tf32 = cfg.src == Precision::kFp32;
  if (cfg.flush && cfg.src != Precision::kFp16) {
    switch (cfg.unpack) {
      case proto::TRUNCATE: return tf32 ? f(FastNarrow<13, proto::TRUNCATE>{}) : f(FastNarrow<16, proto::TRUNCATE>{});
      case proto::TIES_AWAY:
        return tf32 ? f(FastNarrow<13, proto::TIES_AWAY>{}) : f(FastNarrow<16, proto::TIES_AWAY>{});
      default: return tf32 ? f(FastNarrow<13, proto::RNE>{}) : f(FastNarrow<16, proto::RNE>{});
    }
  }
  f([&cfg](double v) { return ToSrcRegister(v, cfg.src, cfg.unpack, cfg.flush); });
}

// Calls f(round) with the rounding of a 16-bit Dst after an MVMUL: the branch-free bf16 narrowing when the target
// flushes (a bf16 Dst never holds a denormal), the general RoundToBf16/RoundToFp16 otherwise.
template <typename F>
void WithDstRounder(const MatmulConfig& cfg, F&& f) {
  if (cfg.flush && cfg.acc != Precision::kFp16) {
    switch (cfg.dst_round) {
      case proto::TRUNCATE: return f(FastNarrow<16, proto::TRUNCATE>{});
      case proto::TIES_AWAY: return f(FastNarrow<16, proto::TIES_AWAY>{});
      default: return f(FastNarrow<16, proto::RNE>{});
    }
  }
  f([&cfg](float x) {
    return cfg.acc == Precision::kFp16 ? RoundToFp16(x, cfg.dst_round, cfg.flush)
                                       : RoundToBf16(x, cfg.dst_round, cfg.flush);
  });
}

// Loads B into row-major [k][j] fp32, converted by `conv`.
template <typename Conv>
void LoadB(const double* b, int64_t ldb, bool transpose_b, int64_t tc, int64_t kk, float* out, Conv conv) {
  if (transpose_b) {
    for (int64_t k = 0; k < kk; ++k) {
      for (int64_t j = 0; j < tc; ++j) out[k * tc + j] = conv(b[j * ldb + k]);
    }
    return;
  }
  for (int64_t k = 0; k < kk; ++k) {
    for (int64_t j = 0; j < tc; ++j) out[k * tc + j] = conv(b[k * ldb + j]);
  }
}

void IntegerMatmul(const MatmulConfig& cfg, const double* a, int64_t lda, const double* b, int64_t ldb,
                   bool transpose_b, double* c, int64_t ldc, int64_t tr, int64_t tc, int64_t kk) {
  const double lim = 2147483647.0;  // Dst Int32 is sign-magnitude: SaturateAddInt32 clamps at +-(2^31 - 1)
  for (int64_t i = 0; i < tr; ++i) {
    for (int64_t j = 0; j < tc; ++j) {
      double acc = c[i * ldc + j];
      for (int64_t k0 = 0; k0 < kk; k0 += kMvmulDepth) {
        double s = 0.0;
        for (int64_t k = k0; k < std::min(kk, k0 + kMvmulDepth); ++k) {
          s += a[i * lda + k] * (transpose_b ? b[j * ldb + k] : b[k * ldb + j]);
        }
        acc = std::clamp(acc + s, -lim, lim);
      }
      c[i * ldc + j] = acc;
    }
  }
}

}  // namespace

int FidelityPhases(proto::Fidelity f) {
  switch (f) {
    case proto::LOFI: return 1;
    case proto::HIFI2: return 2;
    case proto::HIFI3: return 3;
    default: return 4;
  }
}

float SrcAFidelityBits(float x, int phase) {
  if ((phase & 1) == 0) return Masked(x, kSrcAHi);
  return x - Masked(x, 0xfff83fffu);  // the next five mantissa bits; exact (same sign and exponent)
}

float SrcBFidelityBits(float x, int phase) {
  if ((phase & 2) == 0) return Masked(x, kSrcBHi);
  return x - Masked(x, 0xfffe1fffu);  // the next four mantissa bits
}

float ToSrcRegister(double v, Precision src, proto::Rounding unpack, bool flush) {
  const float f = ToFp32(v, flush);
  switch (src) {
    case Precision::kFp32: return RoundToTf32(f, unpack, flush);
    case Precision::kFp16: return RoundToFp16(f, unpack, flush);
    default: return RoundToBf16(f, unpack, flush);  // bf16, and bfp8_b which unpacks to bf16 (§1.2)
  }
}

void MatmulTileAtFidelity(const MatmulConfig& cfg, const double* a, int64_t lda, const double* b, int64_t ldb,
                          bool transpose_b, double* c, int64_t ldc, int64_t tr, int64_t tc, int64_t kk) {
  if (tr <= 0 || tc <= 0) return;
  if (IsInteger(cfg.acc)) {
    IntegerMatmul(cfg, a, lda, b, ldb, transpose_b, c, ldc, tr, tc, kk);
    return;
  }
  Scratch& s = ThreadScratch();
  s.Size(tr, tc, kk);
  const int phases = FidelityPhases(cfg.fidelity);
  float* __restrict acc = s.acc.data();
  float* __restrict tmp = s.tmp.data();

  if (cfg.acc == Precision::kFp32) {
    // One merged product per element (two for HiFi3): A (in0) is SrcB, B (in1) is SrcA.
    const uint32_t a_mask = phases >= 4 ? kSrcBFull : kSrcBHi;
    const uint32_t b_mask = phases >= 2 ? kSrcAFull : kSrcAHi;
    WithSrcConverter(cfg, [&](auto conv) {
      for (int64_t i = 0; i < tr; ++i) {
        const double* __restrict ai = a + i * lda;
        float* __restrict o = s.a1.data() + i * kk;
        for (int64_t k = 0; k < kk; ++k) o[k] = Masked(conv(ai[k]), a_mask);
        if (phases != 3) continue;
        float* __restrict o2 = s.a2.data() + i * kk;  // the next 4 bits, which phase 2 reads
        for (int64_t k = 0; k < kk; ++k) o2[k] = SrcBFidelityBits(conv(ai[k]), 2);
      }
      LoadB(b, ldb, transpose_b, tc, kk, s.b1.data(), [&](double v) { return Masked(conv(v), b_mask); });
      if (phases == 3) {
        LoadB(b, ldb, transpose_b, tc, kk, s.b2.data(), [&](double v) { return Masked(conv(v), kSrcAHi); });
      }
    });
    const float* a2 = phases == 3 ? s.a2.data() : nullptr;
    for (int64_t i = 0; i < tr; ++i) {
      float* __restrict row = acc + i * tc;
      const double* __restrict ci_in = c + i * ldc;
      if (cfg.flush) {
        for (int64_t j = 0; j < tc; ++j) row[j] = ToFp32(ci_in[j], true);
      } else {
        for (int64_t j = 0; j < tc; ++j) row[j] = ToFp32(ci_in[j], false);
      }
      for (int64_t k0 = 0; k0 < kk; k0 += kMvmulDepth) {
        BlockRow(s.a1.data(), s.b1.data(), a2, s.b2.data(), i, tc, kk, k0, std::min(kk, k0 + kMvmulDepth), tmp);
        for (int64_t j = 0; j < tc; ++j) row[j] += tmp[j];  // Dst += the MVMUL's products, fp32 RNE
      }
      double* __restrict ci = c + i * ldc;
      if (cfg.flush) {
        for (int64_t j = 0; j < tc; ++j) ci[j] = Ftz(row[j]);
      } else {
        for (int64_t j = 0; j < tc; ++j) ci[j] = row[j];
      }
    }
    return;
  }

  // 16-bit Dst: phase by phase (the LLK runs the whole tile once per fidelity phase), each MVMUL rounded.
  // Operands once (a2/b2 hold the full Src values), then split per phase into a1/b1.
  WithSrcConverter(cfg, [&](auto conv) {
    for (int64_t i = 0; i < tr; ++i) {
      for (int64_t k = 0; k < kk; ++k) s.a2[i * kk + k] = conv(a[i * lda + k]);
    }
    LoadB(b, ldb, transpose_b, tc, kk, s.b2.data(), conv);
  });
  WithDstRounder(cfg, [&](auto round_dst) {
    for (int64_t i = 0; i < tr; ++i) {
      for (int64_t j = 0; j < tc; ++j) acc[i * tc + j] = round_dst(ToFp32(c[i * ldc + j], cfg.flush));
    }
    for (int p = 0; p < phases; ++p) {
      for (int64_t e = 0; e < tr * kk; ++e) s.a1[e] = SrcBFidelityBits(s.a2[e], p);
      for (int64_t e = 0; e < kk * tc; ++e) s.b1[e] = SrcAFidelityBits(s.b2[e], p);
      for (int64_t k0 = 0; k0 < kk; k0 += kMvmulDepth) {
        for (int64_t i = 0; i < tr; ++i) {
          BlockRow(s.a1.data(), s.b1.data(), nullptr, nullptr, i, tc, kk, k0, std::min(kk, k0 + kMvmulDepth), tmp);
          float* __restrict row = acc + i * tc;
          for (int64_t j = 0; j < tc; ++j) row[j] = round_dst(row[j] + tmp[j]);
        }
      }
    }
  });
  for (int64_t i = 0; i < tr; ++i) {
    for (int64_t j = 0; j < tc; ++j) c[i * ldc + j] = acc[i * tc + j];
  }
}

}  // namespace spatial::numerics

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

// Per-thread scratch of a product: the Dst rows (acc) and one MVMUL's sums (tmp). The operands are prepared in
// BlockScratch below.
struct Scratch {
  std::vector<float> tmp, acc;
  void Size(int64_t tr, int64_t tc) {
    const auto nc = static_cast<size_t>(tr * tc);
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

namespace {

// One operand tile as the Src registers hold it for this product. An fp32 Dst: one merged product per element (two
// for HiFi3): `first` holds A's (in0, SrcB) bits all phases read together, `second` HiFi3's next 4; for B (in1,
// SrcA) likewise. A 16-bit Dst: `first` holds the full Src value, split per phase at compute time.
struct Prepared {
  std::vector<float> first, second;
};

bool MergedPhases(const MatmulConfig& cfg) { return cfg.acc == Precision::kFp32; }

// A's tr x kk values (row stride lda) into row-major [i][k] at `a1` (and `a2`).
template <typename Conv>
void PrepareA(const MatmulConfig& cfg, Conv conv, const double* a, int64_t lda, int64_t tr, int64_t kk, float* a1,
              float* a2) {
  const int phases = FidelityPhases(cfg.fidelity);
  if (!MergedPhases(cfg)) {
    // Phase p's bits at a1 + p * tr * kk.
    for (int64_t i = 0; i < tr; ++i) {
      for (int64_t k = 0; k < kk; ++k) {
        const float v = conv(a[i * lda + k]);
        for (int p = 0; p < phases; ++p) a1[p * tr * kk + i * kk + k] = SrcBFidelityBits(v, p);
      }
    }
    return;
  }
  const uint32_t a_mask = phases >= 4 ? kSrcBFull : kSrcBHi;
  for (int64_t i = 0; i < tr; ++i) {
    const double* __restrict ai = a + i * lda;
    float* __restrict o = a1 + i * kk;
    for (int64_t k = 0; k < kk; ++k) o[k] = Masked(conv(ai[k]), a_mask);
    if (phases != 3) continue;
    float* __restrict o2 = a2 + i * kk;  // the next 4 bits, which phase 2 reads
    for (int64_t k = 0; k < kk; ++k) o2[k] = SrcBFidelityBits(conv(ai[k]), 2);
  }
}

// B's kk x tc values into row-major [k][j] at `b1` (and `b2`).
template <typename Conv>
void PrepareB(const MatmulConfig& cfg, Conv conv, const double* b, int64_t ldb, bool transpose_b, int64_t tc,
              int64_t kk, float* b1, float* b2) {
  const int phases = FidelityPhases(cfg.fidelity);
  if (!MergedPhases(cfg)) {
    // Phase p's bits at b1 + p * kk * tc.
    for (int p = 0; p < phases; ++p) {
      LoadB(b, ldb, transpose_b, tc, kk, b1 + p * kk * tc, [&](double v) { return SrcAFidelityBits(conv(v), p); });
    }
    return;
  }
  const uint32_t b_mask = phases >= 2 ? kSrcAFull : kSrcAHi;
  LoadB(b, ldb, transpose_b, tc, kk, b1, [&](double v) { return Masked(conv(v), b_mask); });
  if (phases == 3) LoadB(b, ldb, transpose_b, tc, kk, b2, [&](double v) { return Masked(conv(v), kSrcAHi); });
}

}  // namespace

namespace kernel {

// The register-blocked tile products of ComputePrepared below, for 32-column tiles: a row's Dst (four 8-float
// vectors) and its MVMUL partials stay in registers across every pair and block, so c is read and written once and
// nothing else is stored. The sums are ComputePrepared's in the same order; lane j only ever combines column j, so
// they are exactly the scalar ones. 8-float vectors (GCC/Clang vector extensions): one ymm with AVX2, two xmm
// elsewhere; target_clones picks at load time. Named vectors, not arrays (GCC keeps arrays of vectors in memory);
// the helpers are always inlined, so they compile for the clone's ISA (a lambda or an out-of-line call would run
// the default one).
using V8 = float __attribute__((vector_size(32)));
using U8 = uint32_t __attribute__((vector_size(32)));
using D8 = double __attribute__((vector_size(64)));
#define SPATIAL_KERNEL_INLINE __attribute__((always_inline)) inline

// Ftz on eight lanes: zero unless the exponent is.
SPATIAL_KERNEL_INLINE void Ftz8(V8& v) {
  U8 u;
  std::memcpy(&u, &v, sizeof u);
  u &= reinterpret_cast<U8>((u & 0x7f800000u) != 0);
  std::memcpy(&v, &u, sizeof u);
}

// FastNarrow<16, mode> on eight lanes (the flushing bf16 Dst): Inf for exponent 255, the mode's increment, the low
// 16 bits dropped, zero for exponent 0.
SPATIAL_KERNEL_INLINE void Bf16Round8(V8& v, int mode) {
  U8 u;
  std::memcpy(&u, &v, sizeof u);
  const U8 e = u & 0x7f800000u;
  const U8 inf = reinterpret_cast<U8>(e == 0x7f800000u);
  U8 mag = (inf & 0x7f800000u) | (~inf & (u & 0x7fffffffu));
  if (mode == proto::TIES_AWAY) {
    mag += 0x8000u;
  } else if (mode != proto::TRUNCATE) {
    mag += 0x7fffu + ((mag >> 16) & 1u);
  }
  u = ((u & 0x80000000u) | (mag & 0xffff0000u)) & reinterpret_cast<U8>(e != 0u);
  std::memcpy(&v, &u, sizeof u);
}

// A row of 32 doubles of c into the fp32 Dst: IEEE RNE, then Ftz where flushing (ToFp32).
SPATIAL_KERNEL_INLINE void LoadRow32(const double* c, bool flush, V8& d0, V8& d1, V8& d2, V8& d3) {
  V8* d[4] = {&d0, &d1, &d2, &d3};
  for (int q = 0; q < 4; ++q) {
    D8 v;
    std::memcpy(&v, c + 8 * q, sizeof v);
    *d[q] = __builtin_convertvector(v, V8);
    if (flush) Ftz8(*d[q]);
  }
}

SPATIAL_KERNEL_INLINE void StoreRow32(double* c, const V8& d0, const V8& d1, const V8& d2, const V8& d3) {
  const V8* d[4] = {&d0, &d1, &d2, &d3};
  for (int q = 0; q < 4; ++q) {
    const D8 v = __builtin_convertvector(*d[q], D8);
    std::memcpy(c + 8 * q, &v, sizeof v);
  }
}

// t += a[k] * b[k][0..32) for k0 <= k < k1, in k order: one row of one MVMUL's products.
SPATIAL_KERNEL_INLINE void MvmulRow32(const float* __restrict a, const float* __restrict b, int64_t k0, int64_t k1,
                                      V8& t0, V8& t1, V8& t2, V8& t3) {
  for (int64_t k = k0; k < k1; ++k) {
    V8 b0, b1, b2, b3;
    std::memcpy(&b0, b + k * 32, sizeof b0);
    std::memcpy(&b1, b + k * 32 + 8, sizeof b1);
    std::memcpy(&b2, b + k * 32 + 16, sizeof b2);
    std::memcpy(&b3, b + k * 32 + 24, sizeof b3);
    const float x = a[k];
    t0 += x * b0;
    t1 += x * b1;
    t2 += x * b2;
    t3 += x * b3;
  }
}

// The fp32 Dst: per MVMUL block a fresh partial (both merged passes for HiFi3), added to the Dst; Ftz after each
// pair.
__attribute__((target_clones("avx2", "default"))) void MergedTile32(const float* const* a1, const float* const* a2,
                                                                    const float* const* b1, const float* const* b2,
                                                                    int64_t products, bool second, bool flush,
                                                                    double* c, int64_t ldc, int64_t tr, int64_t kk) {
  for (int64_t i = 0; i < tr; ++i) {
    V8 d0, d1, d2, d3;
    LoadRow32(c + i * ldc, flush, d0, d1, d2, d3);
    for (int64_t p = 0; p < products; ++p) {
      for (int64_t k0 = 0; k0 < kk; k0 += kMvmulDepth) {
        const int64_t k1 = std::min(kk, k0 + kMvmulDepth);
        V8 t0 = {}, t1 = {}, t2 = {}, t3 = {};
        MvmulRow32(a1[p] + i * kk, b1[p], k0, k1, t0, t1, t2, t3);
        if (second) MvmulRow32(a2[p] + i * kk, b2[p], k0, k1, t0, t1, t2, t3);
        d0 += t0;  // Dst += the MVMUL's products, fp32 RNE
        d1 += t1;
        d2 += t2;
        d3 += t3;
      }
      if (flush) {
        Ftz8(d0);
        Ftz8(d1);
        Ftz8(d2);
        Ftz8(d3);
      }
    }
    StoreRow32(c + i * ldc, d0, d1, d2, d3);
  }
}

// The flushing bf16 Dst, rounding in `mode`: phase by phase, each MVMUL's partial added to the Dst and the sum
// rounded; between pairs the Dst is stored and read back (ToFp32, then the Dst's rounding).
__attribute__((target_clones("avx2", "default"))) void Bf16DstTile32(const float* const* a1, const float* const* b1,
                                                                     int64_t products, int phases, int mode,
                                                                     double* c, int64_t ldc, int64_t tr, int64_t kk) {
  for (int64_t i = 0; i < tr; ++i) {
    V8 d0, d1, d2, d3;
    LoadRow32(c + i * ldc, true, d0, d1, d2, d3);
    for (int64_t p = 0; p < products; ++p) {
      if (p > 0) {
        Ftz8(d0);
        Ftz8(d1);
        Ftz8(d2);
        Ftz8(d3);
      }
      Bf16Round8(d0, mode);
      Bf16Round8(d1, mode);
      Bf16Round8(d2, mode);
      Bf16Round8(d3, mode);
      for (int ph = 0; ph < phases; ++ph) {
        const float* a = a1[p] + ph * tr * kk + i * kk;
        const float* b = b1[p] + ph * kk * 32;
        for (int64_t k0 = 0; k0 < kk; k0 += kMvmulDepth) {
          V8 t0 = {}, t1 = {}, t2 = {}, t3 = {};
          MvmulRow32(a, b, k0, std::min(kk, k0 + kMvmulDepth), t0, t1, t2, t3);
          d0 += t0;  // Dst += the MVMUL's products, then the 16-bit Dst's rounding
          d1 += t1;
          d2 += t2;
          d3 += t3;
          Bf16Round8(d0, mode);
          Bf16Round8(d1, mode);
          Bf16Round8(d2, mode);
          Bf16Round8(d3, mode);
        }
      }
    }
    StoreRow32(c + i * ldc, d0, d1, d2, d3);
  }
}

#undef SPATIAL_KERNEL_INLINE

}  // namespace kernel

namespace {

// c[tr x tc] (+)= the prepared operands' product, over `products` prepared (A, B) pairs in order: the Dst is read
// from c once, every pair's MVMULs added in k order, and written back once; between pairs it is stored and read
// back exactly as consecutive MatmulTileAtFidelity calls would (Ftz, or the 16-bit rounding).
void ComputePrepared(const MatmulConfig& cfg, const float* const* a1, const float* const* a2, const float* const* b1,
                     const float* const* b2, int64_t products, double* c, int64_t ldc, int64_t tr, int64_t tc,
                     int64_t kk) {
  Scratch& s = ThreadScratch();
  s.Size(tr, tc);
  float* __restrict acc = s.acc.data();
  float* __restrict tmp = s.tmp.data();
  const int phases = FidelityPhases(cfg.fidelity);
  if (MergedPhases(cfg) && tc == 32) {
    kernel::MergedTile32(a1, a2, b1, b2, products, phases == 3, cfg.flush, c, ldc, tr, kk);
    return;
  }
  if (MergedPhases(cfg)) {
    for (int64_t i = 0; i < tr; ++i) {
      float* __restrict row = acc + i * tc;
      const double* __restrict ci_in = c + i * ldc;
      for (int64_t j = 0; j < tc; ++j) row[j] = ToFp32(ci_in[j], cfg.flush);
      for (int64_t p = 0; p < products; ++p) {
        for (int64_t k0 = 0; k0 < kk; k0 += kMvmulDepth) {
          BlockRow(a1[p], b1[p], phases == 3 ? a2[p] : nullptr, b2[p], i, tc, kk, k0, std::min(kk, k0 + kMvmulDepth),
                   tmp);
          for (int64_t j = 0; j < tc; ++j) row[j] += tmp[j];  // Dst += the MVMUL's products, fp32 RNE
        }
        if (cfg.flush) {
          for (int64_t j = 0; j < tc; ++j) row[j] = Ftz(row[j]);
        }
      }
      double* __restrict ci = c + i * ldc;
      for (int64_t j = 0; j < tc; ++j) ci[j] = row[j];
    }
    return;
  }
  // 16-bit Dst: phase by phase (the LLK runs the whole tile once per fidelity phase), each MVMUL rounded.
  if (tc == 32 && cfg.flush && cfg.acc != Precision::kFp16) {
    kernel::Bf16DstTile32(a1, b1, products, phases, cfg.dst_round, c, ldc, tr, kk);
    return;
  }
  WithDstRounder(cfg, [&](auto round_dst) {
    for (int64_t i = 0; i < tr; ++i) {
      for (int64_t j = 0; j < tc; ++j) acc[i * tc + j] = round_dst(ToFp32(c[i * ldc + j], cfg.flush));
    }
    for (int64_t q = 0; q < products; ++q) {
      if (q > 0) {
        for (int64_t e = 0; e < tr * tc; ++e) acc[e] = round_dst(ToFp32(static_cast<double>(acc[e]), cfg.flush));
      }
      for (int p = 0; p < phases; ++p) {
        const float* ap = a1[q] + p * tr * kk;
        const float* bp = b1[q] + p * kk * tc;
        for (int64_t k0 = 0; k0 < kk; k0 += kMvmulDepth) {
          for (int64_t i = 0; i < tr; ++i) {
            BlockRow(ap, bp, nullptr, nullptr, i, tc, kk, k0, std::min(kk, k0 + kMvmulDepth), tmp);
            float* __restrict row = acc + i * tc;
            for (int64_t j = 0; j < tc; ++j) row[j] = round_dst(row[j] + tmp[j]);
          }
        }
      }
    }
  });
  for (int64_t i = 0; i < tr; ++i) {
    for (int64_t j = 0; j < tc; ++j) c[i * ldc + j] = acc[i * tc + j];
  }
}

// Per-thread storage of a block's prepared tiles.
struct BlockScratch {
  Prepared a, b;
  std::vector<const float*> pa1, pa2, pb1, pb2;
};

BlockScratch& ThreadBlockScratch() {
  thread_local BlockScratch s;
  return s;
}

}  // namespace

void MatmulTileAtFidelity(const MatmulConfig& cfg, const double* a, int64_t lda, const double* b, int64_t ldb,
                          bool transpose_b, double* c, int64_t ldc, int64_t tr, int64_t tc, int64_t kk) {
  if (tr <= 0 || tc <= 0) return;
  if (IsInteger(cfg.acc)) {
    IntegerMatmul(cfg, a, lda, b, ldb, transpose_b, c, ldc, tr, tc, kk);
    return;
  }
  BlockScratch& bs = ThreadBlockScratch();
  const auto copies = static_cast<size_t>(MergedPhases(cfg) ? 1 : FidelityPhases(cfg.fidelity));
  const auto na = copies * static_cast<size_t>(tr * kk), nb = copies * static_cast<size_t>(kk * tc);
  if (bs.a.first.size() < na) bs.a.first.resize(na), bs.a.second.resize(na);
  if (bs.b.first.size() < nb) bs.b.first.resize(nb), bs.b.second.resize(nb);
  WithSrcConverter(cfg, [&](auto conv) {
    PrepareA(cfg, conv, a, lda, tr, kk, bs.a.first.data(), bs.a.second.data());
    PrepareB(cfg, conv, b, ldb, transpose_b, tc, kk, bs.b.first.data(), bs.b.second.data());
  });
  const float* a1 = bs.a.first.data();
  const float* a2 = bs.a.second.data();
  const float* b1 = bs.b.first.data();
  const float* b2 = bs.b.second.data();
  ComputePrepared(cfg, &a1, &a2, &b1, &b2, 1, c, ldc, tr, tc, kk);
}

void MatmulBlockAtFidelity(const MatmulConfig& cfg, const double* a, int64_t lda, const double* b, int64_t ldb,
                           bool transpose_b, double* c, int64_t ldc, int64_t m, int64_t n, int64_t k, int64_t t) {
  if (m <= 0 || n <= 0 || t <= 0) return;
  if (IsInteger(cfg.acc) || k <= 0) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t kt = 0; kt < k; ++kt) {
          const int64_t bt = transpose_b ? j * k + kt : kt * n + j;
          MatmulTileAtFidelity(cfg, a + (i * k + kt) * t, lda, b + bt * t, ldb, transpose_b, c + (i * n + j) * t,
                               ldc, t, t, t);
        }
      }
    }
    return;
  }
  // Every operand tile converted once for the block (a tile of A feeds n products, one of B m products).
  BlockScratch& bs = ThreadBlockScratch();
  // A prepared tile: one copy of its Src bits (merged phases), or one per phase (a 16-bit Dst).
  const int64_t tt = t * t * (MergedPhases(cfg) ? 1 : FidelityPhases(cfg.fidelity));
  const auto na = static_cast<size_t>(m * k * tt), nb = static_cast<size_t>(k * n * tt);
  if (bs.a.first.size() < na) bs.a.first.resize(na), bs.a.second.resize(na);
  if (bs.b.first.size() < nb) bs.b.first.resize(nb), bs.b.second.resize(nb);
  WithSrcConverter(cfg, [&](auto conv) {
    for (int64_t e = 0; e < m * k; ++e) {
      PrepareA(cfg, conv, a + e * t, lda, t, t, bs.a.first.data() + e * tt, bs.a.second.data() + e * tt);
    }
    for (int64_t e = 0; e < k * n; ++e) {
      // Prepared B tile e is (kt, j) = (e / n, e % n), wherever the page keeps it.
      const int64_t kt = e / n, j = e % n;
      const int64_t bt = transpose_b ? j * k + kt : e;
      PrepareB(cfg, conv, b + bt * t, ldb, transpose_b, t, t, bs.b.first.data() + e * tt,
               bs.b.second.data() + e * tt);
    }
  });
  bs.pa1.resize(static_cast<size_t>(k));
  bs.pa2.resize(static_cast<size_t>(k));
  bs.pb1.resize(static_cast<size_t>(k));
  bs.pb2.resize(static_cast<size_t>(k));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t kt = 0; kt < k; ++kt) {
        bs.pa1[kt] = bs.a.first.data() + (i * k + kt) * tt;
        bs.pa2[kt] = bs.a.second.data() + (i * k + kt) * tt;
        bs.pb1[kt] = bs.b.first.data() + (kt * n + j) * tt;
        bs.pb2[kt] = bs.b.second.data() + (kt * n + j) * tt;
      }
      ComputePrepared(cfg, bs.pa1.data(), bs.pa2.data(), bs.pb1.data(), bs.pb2.data(), k, c + (i * n + j) * t, ldc, t,
                      t, t);
    }
  }
}

}  // namespace spatial::numerics

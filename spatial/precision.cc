#include "spatial/precision.h"

#include <limits>

namespace spatial {

std::string_view PrecisionName(Precision p) {
  switch (p) {
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
    case Precision::kFp32: return "fp32";
    case Precision::kBfp8B: return "bfp8_b";
    case Precision::kBfp4B: return "bfp4_b";
    case Precision::kInt8: return "int8";
    case Precision::kInt16: return "int16";
    case Precision::kInt32: return "int32";
    case Precision::kInt64: return "int64";
    case Precision::kUnspecified: break;
  }
  return "unspecified";
}

std::optional<Precision> PrecisionFromName(std::string_view name) {
  for (int i = 1; i <= 9; ++i) {
    auto p = static_cast<Precision>(i);
    if (PrecisionName(p) == name) return p;
  }
  return std::nullopt;
}

bool IsInteger(Precision p) { return IntBits(p).has_value(); }
bool IsFloat(Precision p) {
  return p == Precision::kBf16 || p == Precision::kFp16 || p == Precision::kFp32 || p == Precision::kBfp8B ||
         p == Precision::kBfp4B;
}

std::optional<int> IntBits(Precision p) {
  switch (p) {
    case Precision::kInt8: return 8;
    case Precision::kInt16: return 16;
    case Precision::kInt32: return 32;
    case Precision::kInt64: return 64;
    default: return std::nullopt;
  }
}

int64_t IntMax(Precision p) {
  auto bits = IntBits(p);
  if (!bits) return 0;
  if (*bits == 64) return std::numeric_limits<int64_t>::max();
  return (int64_t{1} << (*bits - 1)) - 1;
}

int64_t IntMin(Precision p) {
  auto bits = IntBits(p);
  if (!bits) return 0;
  if (*bits == 64) return std::numeric_limits<int64_t>::min();
  // Symmetric: the datapath's integers are sign-magnitude (hardware-facts §1.2, sim/numerics/formats.h), so
  // -2^(bits-1) is no value of the type — the machine stores it as -(2^(bits-1) - 1) and the exact VM would not.
  return -IntMax(p);
}

int64_t TileBytes(Precision p, int64_t tile_elems) {
  switch (p) {
    case Precision::kBf16:
    case Precision::kFp16:
    case Precision::kInt16: return 2 * tile_elems;
    case Precision::kFp32:
    case Precision::kInt32: return 4 * tile_elems;
    case Precision::kInt64: return 8 * tile_elems;
    case Precision::kInt8: return tile_elems;
    case Precision::kBfp8B: return tile_elems + (tile_elems + 15) / 16;
    // Two 4-bit datums a byte and the shared exponents (tt-metal's 576-byte Bfp4_b tile).
    case Precision::kBfp4B: return (tile_elems + 1) / 2 + (tile_elems + 15) / 16;
    case Precision::kUnspecified: break;
  }
  return 0;
}

}  // namespace spatial

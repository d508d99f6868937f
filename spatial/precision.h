// Element precisions (DESIGN §3.1): byte sizes, names, integer ranges.
#ifndef SPATIAL_PRECISION_H_
#define SPATIAL_PRECISION_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace spatial {

// Values match proto/program.proto's Precision.
enum class Precision : uint8_t {
  kUnspecified = 0,
  kBf16 = 1,
  kFp16 = 2,
  kFp32 = 3,
  kBfp8B = 4,  // one shared 8-bit exponent per 16 values
  kInt8 = 5,
  kInt16 = 6,
  kInt32 = 7,
  kInt64 = 8,
  kBfp4B = 9,  // one shared 8-bit exponent per 16 values, 3-bit magnitudes
};

// "bf16", "fp32", ... (the seed prints precisions in claims and names).
std::string_view PrecisionName(Precision p);
std::optional<Precision> PrecisionFromName(std::string_view name);

bool IsInteger(Precision p);
bool IsFloat(Precision p);

// Bits of an integer precision (the seed's precision_int_bits); nullopt for floats.
std::optional<int> IntBits(Precision p);
// Largest and smallest value an integer precision holds: ±(2^(bits-1) - 1), sign-magnitude as the datapath
// holds them (int64, an index type no Tensix datapath has, keeps its two's-complement range).
int64_t IntMax(Precision p);
int64_t IntMin(Precision p);

// Bytes of one tile of `tile_elems` elements. bfp8_b: one byte per value plus one shared exponent byte per 16
// values (a 32x32 tile is 1088 bytes).
int64_t TileBytes(Precision p, int64_t tile_elems);

}  // namespace spatial

#endif  // SPATIAL_PRECISION_H_

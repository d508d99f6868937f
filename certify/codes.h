// The certifier's stable diagnostic codes (DESIGN §6). Tools, tests and users match on these strings: never
// rename one; add new ones.
#ifndef CERTIFY_CODES_H_
#define CERTIFY_CODES_H_

#include <array>
#include <string_view>

namespace spatial::codes {

// A site's buffers (depth * page_tiles * tile bytes) exceed the target's usable local memory.
inline constexpr std::string_view kFootprintExceeded = "FOOTPRINT_EXCEEDED";
// A section declares more buffers than a site has circular buffers (the target's num_cbs): each buffer is one
// page FIFO with its own id, as tt-metal's 32 CBs per core are.
inline constexpr std::string_view kCbCountExceeded = "CB_COUNT_EXCEEDED";
// A compute stage's output page is wider than the accumulator (Dst) holds at the section's precision.
inline constexpr std::string_view kAccTilesExceeded = "ACC_TILES_EXCEEDED";
// A Load/Store tile address or a Generic element offset can leave its tensor or page.
inline constexpr std::string_view kIndexOutOfRange = "INDEX_OUT_OF_RANGE";
// Integer index arithmetic can leave its integer type.
inline constexpr std::string_view kIndexOverflow = "INDEX_OVERFLOW";
// The declared state order disagrees with what sections load and store, or runs against section order.
inline constexpr std::string_view kStateOrder = "STATE_ORDER";
// A stage reads a carried buffer before anything of the same item wrote it.
inline constexpr std::string_view kUninitializedCarry = "UNINITIALIZED_CARRY";
// An index page (a FIFO a movement engine retires) has more than one reader.
inline constexpr std::string_view kFifoTwoReaders = "FIFO_TWO_READERS";
// A buffer read but never written, or written but never read.
inline constexpr std::string_view kDanglingBuffer = "DANGLING_BUFFER";
// Dataflow against the schedule: a read of what only a later stage writes, or an edge pointing backwards.
inline constexpr std::string_view kStageOrder = "STAGE_ORDER";
// A stage that is not Load, Store, Generic or MatmulTiles.
inline constexpr std::string_view kOpenAlgebra = "OPEN_ALGEBRA";
// A precision the target cannot store or compute at, or a datapath it does not have.
inline constexpr std::string_view kUnsupportedPrecision = "UNSUPPORTED_PRECISION";
// Two items' output rects intersect, a rect leaves the section's result, or two items' Stores address one tile.
inline constexpr std::string_view kItemsOverlap = "ITEMS_OVERLAP";
// A trip can run more blocks than the fold has (or fewer than none).
inline constexpr std::string_view kTripOutOfRange = "TRIP_OUT_OF_RANGE";
// The composition was built for a different tile shape than the target's.
inline constexpr std::string_view kTargetMismatch = "TARGET_MISMATCH";
// A multicast Load's block can differ between the items it is sent to: its origin steps on the multicast axis,
// or comes from an index page not proven the same along it.
inline constexpr std::string_view kMulticastVaries = "MULTICAST_VARIES";
// A FloorDiv's divisor is always 0 where it is evaluated (every run that reaches it faults with DivisionByZero).
inline constexpr std::string_view kDivisionByZero = "DIVISION_BY_ZERO";
// A Load or Store between an integer and a float: a float page stored into an integer tensor, or a float tensor
// loaded into an integer page (an index table read as bf16).
inline constexpr std::string_view kPrecisionMismatch = "PRECISION_MISMATCH";
// Structurally invalid: ids out of range, wrong arity, absurd sizes (spatial/validate.h), or unparsable.
inline constexpr std::string_view kMalformed = "MALFORMED";

// Every stable code, for the tools and tests that must know them all (the corpus's coverage, the fuzzers' check
// that no diagnostic carries an unknown code).
inline constexpr std::array<std::string_view, 19> kAllCodes = {
    kFootprintExceeded, kAccTilesExceeded, kIndexOutOfRange,   kIndexOverflow,    kStateOrder,      kUninitializedCarry,
    kFifoTwoReaders,    kDanglingBuffer,   kStageOrder,        kOpenAlgebra,      kUnsupportedPrecision,
    kItemsOverlap,      kTripOutOfRange,   kTargetMismatch,    kMulticastVaries,  kCbCountExceeded, kMalformed,
    kDivisionByZero,    kPrecisionMismatch};

}  // namespace spatial::codes

#endif  // CERTIFY_CODES_H_

// The sizes a lowering may build, checked before it builds anything (issue "Reliability": a spec of 2^31 elements
// used to build 2^26 work items, 3.6 GB, before any size was looked at, and products of spec sizes overflowed int64).
//
// ★ A SIZE IS CHECKED BEFORE ANYTHING IS BUILT FROM IT. Lower (registry.cc) runs CheckSpecSizes on every spec before
// the family sees it, so every product of spec sizes a lowering forms afterwards fits int64; the sites that build
// one value per tile, item or head check their count against its limit before the vector exists.
//
// The limits, and why (the first two are the program model's own, reused; the last two are derived from its limits):
//   - kMaxTensorElems = 2^32 elements per tensor (spatial/validate.h): ValidateComposition rejects a larger tensor, so
//     no program can hold one; and with every tensor under 2^32 elements, products of two tile counts or of a count
//     and a tile side stay far inside int64 (2^32 * 2^32 would not, which is why the limit is per tensor and every
//     size is checked as the tensor it makes). A spec past it is InvalidArgument, the convention TensorSized
//     (row_blocks.h) already follows: no target of the model can hold it, so the request is malformed.
//   - kMaxWorkItems = 2^20 work items per section (spatial/validate.h): the validator's limit again. The count
//     depends on the target's tile, so exceeding it is a refusal (NotLowered) naming the spec's sizes and the count.
//   - kMaxUnrolled = 1024 for what a lowering unrolls once per head, row, group, band or chunk (the bands and slots
//     of one Generic, the sections of a recurrence, the folds of value pages). A chain of b bands is a body at least
//     b deep, and no reader takes one deeper than spatial/limits.h kMaxBodyDepth (2000): 1024 leaves the bands' own
//     bodies 976 levels. The lowerings read at most 4 slots per band, and 4 x 1024 is the VM's 4096 input slots of
//     one Generic (sim/vm/generic_kernel.cc kMaxSlots). A refusal (NotLowered).
//   - kMaxFillValues = 2^24 values a lowering materializes from an operand's fill: a program embeds them (packed
//     int64 varints of at most 10 bytes, doubles of 8), and 2^24 of them (at most 160 MiB) is the largest power of
//     two whose program a 256 MiB program file (spatial/proto_file.h kMaxProtoBytes) can still hold. A refusal.
#ifndef LOWERINGS_TOOLKIT_SIZE_BUDGET_H_
#define LOWERINGS_TOOLKIT_SIZE_BUDGET_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/checked.h"
#include "spatial/limits.h"
#include "spatial/validate.h"

namespace spatial {

inline constexpr int64_t kMaxUnrolled = 1024;
static_assert(kMaxUnrolled < kMaxBodyDepth, "a chain of kMaxUnrolled bands must leave its bands' bodies room");
inline constexpr int64_t kMaxFillValues = int64_t{1} << 24;

// One named size of a spec: {"m", 32}.
struct SizeFactor {
  std::string_view name;
  int64_t value;
};

// The spec's sizes as the tensors they make. The first tensor whose element count overflows int64 or exceeds
// kMaxTensorElems is the budget's status, InvalidArgument:
//   "matmul: m x k = 1099511627776 x 1099511627776 elements (operand a) overflow int64, more than the 4294967296 a
//    tensor holds"
//   "silu: n = 8589934592 elements (operand x) exceed the 4294967296 a tensor holds"
// A spec with a negative factor anywhere, and a tensor with a zero factor, are left to the family: it has its own
// message for a negative field (which must win over an overflow elsewhere) and its own refusal for an empty tensor.
class SizeBudget {
 public:
  explicit SizeBudget(std::string_view kind) : kind_(kind) {}

  // Tensor `what` ("operand a", "the result") of prod(factors) elements.
  SizeBudget& Tensor(std::string_view what, std::initializer_list<SizeFactor> factors);
  // As Tensor, for a tensor whose last factor is a sum of sizes (a join's wa + wb).
  SizeBudget& TensorOfSum(std::string_view what, std::initializer_list<SizeFactor> factors, SizeFactor a,
                          SizeFactor b);

  // OK when any factor was negative: the family's own "{kind}.{field} is negative" comes first.
  absl::Status status() const { return negative_ ? absl::OkStatus() : status_; }

 private:
  std::string kind_;
  absl::Status status_;
  bool negative_ = false;
};

// Every tensor `spec` makes, by kind, checked as above; OK for a kind it does not know (the registry refuses it).
// Also the pointwise shape: a set shape_rows x shape_cols must be the kind's n (PointwiseShape).
absl::Status CheckSpecSizes(const proto::OpSpec& spec);

// a * b elements of `what`, or InvalidArgument as SizeBudget: the checked product a lowering forms from spec sizes
// (a factor that is itself an overflowed product, nullopt, overflows the whole).
absl::StatusOr<int64_t> CheckedElements(std::string_view what, std::optional<int64_t> a, std::optional<int64_t> b);

// "NotLowered: {what} needs {items} work items, more than the 1048576 a section holds" when items > kMaxWorkItems
// (nullopt: a count past the limit or past int64, "needs more work items than the 1048576 a section holds"). Called
// with the count BEFORE the items are built.
absl::Status WorkItemBudget(std::string_view what, std::optional<int64_t> items);

// "NotLowered: {what} needs a compile-time table of {values} values, more than the 16777216 a program embeds" when
// values > kMaxFillValues: checked before a lowering fills a Param table (one entry per item or tile).
absl::Status TableBudget(std::string_view what, std::optional<int64_t> values);

// "NotLowered: {what} needs {count} {unit}, more than the 1024 a lowering unrolls" when count > kMaxUnrolled
// (nullopt: "needs more {unit} than the 1024 a lowering unrolls").
absl::Status UnrollBudget(std::string_view what, std::string_view unit, std::optional<int64_t> count);

}  // namespace spatial

#endif  // LOWERINGS_TOOLKIT_SIZE_BUDGET_H_

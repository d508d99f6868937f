// FlatBuild: a flat section under construction (seed 002, original lines 258-699) — the loads of its operands, the
// Generics over the whole 1 x n row, and the wiring that chains them into the store. Ported for the elementwise
// family; the column-blocked `pointwise` rewrite (head slices, joins, rope) is lowerings/pointwise.h.
#ifndef LOWERINGS_TOOLKIT_FLAT_BUILD_H_
#define LOWERINGS_TOOLKIT_FLAT_BUILD_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/toolkit/common.h"
#include "spatial/builder.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// One Generic input: which buffer it reads and through which map.
struct Slot {
  BufferId buf = 0;
  ElemAccess map;
};

class FlatBuild {
 public:
  // A flat section whose activations ride `dp` (MissingCompute when the target lacks it).
  static absl::StatusOr<FlatBuild> On(Datapath dp, const Target& target);
  // A flat section whose activations are `precision`, chosen by the caller.
  static FlatBuild At(Precision precision, const Target& target) { return FlatBuild(precision, target); }

  Template& t() { return t_; }
  Precision precision() const { return precision_; }
  // The section's accumulator (Dst) precision; AccFor(precision) unless the caller sets another (a bf16 map's
  // 16-bit Dst, MapAccFor).
  void SetAcc(Precision acc) { acc_ = acc; }
  Precision Acc() const { return acc_; }
  // How the section's compute pages are held to Dst at Finish (common.h): the seed's whole page unless set.
  void SetDstPolicy(DstPolicy policy) { dst_policy_ = policy; }

  // Declares the flat 1 x n Input `name` and loads the whole row into "in_{name}" (two pages), the same page for
  // every item. The load is wired to its first reader at Finish.
  absl::StatusOr<BufferId> Input(const std::string& name, int64_t n, const proto::Fill& fill) {
    return InputPaged(name, n, fill, precision_, 2);
  }
  absl::StatusOr<BufferId> InputPaged(const std::string& name, int64_t n, const proto::Fill& fill, Precision p,
                                      int64_t depth);

  // An intermediate between two compute stages, at the section's accumulator precision.
  BufferId Scratch(const std::string& name, int64_t page_tiles);

  StageId Compute(std::string name, std::vector<IterSpec> iters, std::vector<Slot> slots, ElemAccess out_map,
                  Body body, BufferId dst);

  // Declares the result `out_name` as a 1 x n Output (★ a section always calls its result an Output: whether it is
  // an activation or carried state is a property of the whole program), stores the whole row from `out_buf`, wires
  // the chain and seals the section over one whole-row item.
  absl::StatusOr<Composition> Finish(const std::string& out_name, int64_t n, const std::vector<StageId>& chain,
                                     BufferId out_buf, std::string name, NumericsClaim claim);

  // Wires every load to the first chain stage that reads it, each chain stage to the first later one that reads its
  // output, and each store to the last chain stage producing its buffer; then seals the section.
  absl::StatusOr<Composition> WireAndFinishMany(const std::vector<StageId>& chain,
                                                const std::vector<std::pair<BufferId, StageId>>& stores,
                                                int64_t cols_t, std::string name, NumericsClaim claim);
  // WireAndFinishMany over the caller's items instead of one whole-row item: a column-blocked section's row items
  // (lowerings/pointwise.h). Added for the tables-rows family.
  absl::StatusOr<Composition> WireAndFinishItems(const std::vector<StageId>& chain,
                                                 const std::vector<std::pair<BufferId, StageId>>& stores,
                                                 std::vector<WorkItem> items, std::string name, NumericsClaim claim);

  // A load the caller built (a Param's scaler tile, a column table), wired to its first reader at Finish like the
  // operands' loads (the seed's `f.loads.push`). Added for the tables-rows family.
  void AddLoadToWire(StageId load, BufferId buf) { loads_.push_back({load, buf}); }

 private:
  FlatBuild(Precision precision, const Target& target)
      : target_(&target), t_(target.tile_rows(), target.tile_cols()), precision_(precision), acc_(AccFor(precision)) {}

  const Target* target_;
  Template t_;
  Precision precision_;
  Precision acc_;
  DstPolicy dst_policy_ = DstPolicy::kWholePage;
  std::vector<std::pair<StageId, BufferId>> loads_;
};

}  // namespace spatial

#endif  // LOWERINGS_TOOLKIT_FLAT_BUILD_H_

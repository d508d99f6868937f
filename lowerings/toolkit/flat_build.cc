#include "lowerings/toolkit/flat_build.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {

absl::StatusOr<FlatBuild> FlatBuild::On(Datapath dp, const Target& target) {
  ASSIGN_OR_RETURN(Precision p, DatapathPrecision(dp, target));
  return FlatBuild(p, target);
}

absl::StatusOr<BufferId> FlatBuild::InputPaged(const std::string& name, int64_t n, const proto::Fill& fill,
                                               Precision p, int64_t depth) {
  const int64_t cols_t = TilesOf(n, *target_);
  ASSIGN_OR_RETURN(TensorInit init, InitOf(fill, n));
  TensorId id = t_.AddTensor(name, TensorRole::kInput, 1, n, p, std::move(init));
  BufferId buf = t_.AddBufferDeep(absl::StrCat("in_", name), depth, cols_t, p);
  StageId l = t_.AddLoad(absl::StrCat("load_", name), id, {}, cols_t, buf);
  loads_.push_back({l, buf});
  return buf;
}

BufferId FlatBuild::Scratch(const std::string& name, int64_t page_tiles) {
  return t_.AddScratch(name, page_tiles, acc_);
}

StageId FlatBuild::Compute(std::string name, std::vector<IterSpec> iters, std::vector<Slot> slots,
                           ElemAccess out_map, Body body, BufferId dst) {
  std::vector<BufferId> ins;
  std::vector<ElemAccess> maps;
  for (Slot& s : slots) {
    ins.push_back(s.buf);
    maps.push_back(std::move(s.map));
  }
  return t_.AddGeneric(std::move(name), std::move(iters), std::move(ins), std::move(maps), std::move(out_map),
                       std::move(body), dst);
}

absl::StatusOr<Composition> FlatBuild::Finish(const std::string& out_name, int64_t n,
                                              const std::vector<StageId>& chain, BufferId out_buf, std::string name,
                                              NumericsClaim claim) {
  const int64_t cols_t = TilesOf(n, *target_);
  TensorId y = t_.AddTensor(out_name, TensorRole::kOutput, 1, n, precision_, TensorInit::Zero());
  StageId st = t_.AddStore(absl::StrCat("store_", out_name), y, {}, cols_t, out_buf);
  return WireAndFinishMany(chain, {{out_buf, st}}, cols_t, std::move(name), std::move(claim));
}

absl::StatusOr<Composition> FlatBuild::WireAndFinishMany(const std::vector<StageId>& chain,
                                                         const std::vector<std::pair<BufferId, StageId>>& stores,
                                                         int64_t cols_t, std::string name, NumericsClaim claim) {
  return WireAndFinishItems(chain, stores, WholeRow(cols_t), std::move(name), std::move(claim));
}

absl::StatusOr<Composition> FlatBuild::WireAndFinishItems(const std::vector<StageId>& chain,
                                                          const std::vector<std::pair<BufferId, StageId>>& stores,
                                                          std::vector<WorkItem> items, std::string name,
                                                          NumericsClaim claim) {
  for (const auto& load : loads_) {
    const StageId l = load.first;
    const BufferId b = load.second;  // named, not bound: clang 14 cannot capture a structured binding
    auto consumer = std::find_if(chain.begin(), chain.end(), [&](StageId c) { return t_.StageReads(c, b); });
    if (consumer == chain.end()) return NotLowered("an operand nothing in the chain reads");
    t_.AddEdge(l, b, *consumer);
  }
  loads_.clear();
  for (size_t i = 0; i < chain.size(); ++i) {
    const BufferId b = t_.StageOutput(chain[i]);
    auto next = std::find_if(chain.begin() + i + 1, chain.end(), [&](StageId c) { return t_.StageReads(c, b); });
    if (next != chain.end()) t_.AddEdge(chain[i], b, *next);
  }
  for (const auto& store : stores) {
    const BufferId b = store.first;
    const StageId st = store.second;
    auto producer =
        std::find_if(chain.rbegin(), chain.rend(), [&](StageId c) { return t_.StageOutput(c) == b; });
    if (producer == chain.rend()) return NotLowered("a stored buffer no stage of the chain produces");
    t_.AddEdge(*producer, b, st);
  }
  return FinishSection(t_, std::move(name), std::move(items), acc_, std::move(claim), *target_, dst_policy_);
}

}  // namespace spatial

#include "passes/pass.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/fit_site.h"
#include "passes/handles.h"
#include "passes/online_softmax.h"
#include "spatial/validate.h"

namespace spatial {
namespace {

// The program is well formed for this target: structure, references, limits (spatial/validate.h), on the
// target's tile.
absl::Status Verify(Composition& c, const Target& target) {
  if (c.tile_rows != target.tile_rows() || c.tile_cols != target.tile_cols()) {
    return absl::InvalidArgumentError(absl::StrCat("the program's tile is ", c.tile_rows, " x ", c.tile_cols,
                                                   ", the target's ", target.tile_rows(), " x ",
                                                   target.tile_cols()));
  }
  return ValidateComposition(c, target.tile_rows(), target.tile_cols());
}

absl::Status Compose(Composition& c, const Target&) { return CheckHandles(c, nullptr); }

}  // namespace

const std::vector<Pass>& Passes() {
  static const std::vector<Pass>* passes = new std::vector<Pass>{
      {"verify", "check structure, references and limits on the target's tile (changes nothing)", &Verify},
      {"fit-site", "drop stream buffers to one page in sections over the site's memory (passes/fit_site.h)",
       &FitSite},
      {"compose", "check that sections meet through their handles: a name is read only after it is produced",
       &Compose},
      {"online-softmax",
       "rewrite each three-section attention (scores, row softmax, weighted sum) into the flash fold "
       "(passes/online_softmax.h)",
       &OnlineSoftmax},
  };
  return *passes;
}

const Pass* FindPass(const std::string& name) {
  for (const Pass& p : Passes()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

absl::Status RunPasses(Composition& c, const Target& target, const std::vector<std::string>& names,
                       const PipelineOptions& options) {
  std::vector<const Pass*> pipeline;
  for (const std::string& n : names) {
    const Pass* p = FindPass(n);
    if (p == nullptr) {
      std::vector<std::string> known;
      for (const Pass& q : Passes()) known.push_back(q.name);
      return absl::InvalidArgumentError(
          absl::StrCat("unknown pass '", n, "' (known: ", absl::StrJoin(known, ", "), ")"));
    }
    pipeline.push_back(p);
  }
  const Pass* verify = FindPass("verify");
  for (const Pass* p : pipeline) {
    if (absl::Status st = p->run(c, target); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat("pass '", p->name, "': ", st.message()));
    }
    if (options.verify_each && p != verify) {
      if (absl::Status st = verify->run(c, target); !st.ok()) {
        return absl::InternalError(absl::StrCat("pass '", p->name, "' left a program that fails verify: ",
                                                st.message()));
      }
    }
    if (options.after_each) options.after_each(*p, c);
  }
  return absl::OkStatus();
}

}  // namespace spatial

// Passes over programs (DESIGN §3.7): a pass takes a composition and the target it is for, and either rewrites the
// composition in place (keeping its meaning) or refuses it with the reason. The pipeline runs passes by name, can
// verify after each one, and is what `spatial opt` and the lowerings call; a pass is written once and registered in
// pass.cc's table.
#ifndef PASSES_PASS_H_
#define PASSES_PASS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

struct Pass {
  std::string name;     // as `--passes=` spells it
  std::string summary;  // one line for `spatial opt --help` and `--list`
  std::function<absl::Status(Composition&, const Target&)> run;
};

// Every registered pass, in the order `--list` shows them.
const std::vector<Pass>& Passes();

// The pass of that name, or nullptr.
const Pass* FindPass(const std::string& name);

struct PipelineOptions {
  // Run the `verify` pass after every pass (tests do; a pass that breaks structure is then named).
  bool verify_each = false;
  // Called after each pass with the composition as that pass left it (`--print-after-all`).
  std::function<void(const Pass&, const Composition&)> after_each;
};

// Runs the named passes in order. An unknown name is InvalidArgument listing the known ones; a pass's refusal is
// returned prefixed with "pass 'NAME': ".
absl::Status RunPasses(Composition& c, const Target& target, const std::vector<std::string>& names,
                       const PipelineOptions& options = {});

}  // namespace spatial

#endif  // PASSES_PASS_H_

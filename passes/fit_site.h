// The fit-site pass: every section at the lowest buffer depths that fit the target's site.
//
// A lowering builds its stream buffers (the pages a Load fills or a Store drains, Buffer kind) two pages deep, so
// the next item or block begins while this one's pages drain. Where a section's footprint
// (spatial/semantics/footprint.h) exceeds the site's usable memory, fit-site drops every stream buffer of depth 2
// to one page: the values are the same, only the overlap is lost. Scratch buffers keep their depth (a carry's two
// pages are its old and new value). A section that still does not fit is left as it is; the certifier reports
// it (FOOTPRINT_EXCEEDED) and the lowerings refuse it with their own reason.
#ifndef PASSES_FIT_SITE_H_
#define PASSES_FIT_SITE_H_

#include "absl/status/status.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// Returns whether the section fits the site after the pass.
bool FitSectionToSite(Section& s, const Target& target);

absl::Status FitSite(Composition& c, const Target& target);

}  // namespace spatial

#endif  // PASSES_FIT_SITE_H_

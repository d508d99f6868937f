// Dataflow against the schedule: every read has a write before it in the same item's execution (prologue once,
// body once per block, epilogue once), carried buffers are initialized in the prologue, index FIFOs have one
// reader, and hand-off edges point forward. Linear: per buffer, the first writer of each phase answers every
// "is there an earlier write" question in O(1).
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "certify/codes.h"
#include "certify/context.h"

namespace spatial::certify {
namespace {

struct FirstWriters {
  int prologue = -1;
  int body = -1;
  int epilogue = -1;
};

std::string StageRef(const Section& s, int i) { return absl::StrCat("'", s.stages[i].name, "' (#", i, ")"); }

}  // namespace

void CheckDataflow(SectionContext& ctx) {
  const Section& s = ctx.s;
  const int nb = static_cast<int>(s.buffers.size());
  std::vector<FirstWriters> first(nb);
  for (int b = 0; b < nb; ++b) {
    for (int w : ctx.uses[b].writers) {
      int* slot = nullptr;
      switch (s.stages[w].phase) {
        case Phase::kPrologue: slot = &first[b].prologue; break;
        case Phase::kBody: slot = &first[b].body; break;
        case Phase::kEpilogue: slot = &first[b].epilogue; break;
      }
      if (slot && *slot < 0) *slot = w;
    }
  }

  std::vector<char> reported(nb, 0);  // one read diagnostic per buffer: the first bad reader explains the rest
  std::vector<char> carried(nb, 0);
  for (int i = 0; i < static_cast<int>(s.stages.size()); ++i) {
    const Stage& st = s.stages[i];
    std::vector<BufferId> reads = SectionContext::Reads(st);
    for (size_t k = 0; k < reads.size(); ++k) {
      const BufferId b = reads[k];
      const FirstWriters& f = first[b];
      const auto& writers = ctx.uses[b].writers;
      const std::string field = k < st.ins.size() ? absl::StrCat("ins[", k, "]") : "outs[0]";
      const std::string& name = s.buffers[b].name;
      if (st.phase == Phase::kBody && f.body >= 0 && f.body >= i) carried[b] = 1;
      bool ok = false;
      switch (st.phase) {
        case Phase::kPrologue: ok = f.prologue >= 0 && f.prologue < i; break;
        case Phase::kBody: ok = f.prologue >= 0 || (f.body >= 0 && f.body < i); break;
        case Phase::kEpilogue:
          ok = f.prologue >= 0 || (f.body >= 0 && ctx.min_blocks >= 1) || (f.epilogue >= 0 && f.epilogue < i);
          break;
      }
      if (ok || reported[b]) continue;
      reported[b] = 1;
      const bool self_writes = !st.outs.empty() && std::find(st.outs.begin(), st.outs.end(), b) != st.outs.end();
      if (writers.empty()) {
        ctx.Diag(codes::kDanglingBuffer, i, field, "a stage that writes it", "no writer",
                 absl::StrCat("buffer '", name, "' is read but no stage of the section writes it"));
      } else if (st.phase == Phase::kBody && f.body >= i) {
        ctx.Diag(codes::kUninitializedCarry, i, field, "a prologue stage that writes it first",
                 absl::StrCat("first written by ", StageRef(s, f.body)),
                 absl::StrCat("carried buffer '", name, "' is read in the fold body before the body stage ",
                              StageRef(s, f.body), " rewrites it, but no prologue stage initializes it"));
      } else if (st.phase == Phase::kEpilogue && f.body >= 0 && ctx.min_blocks < 1 &&
                 !(f.epilogue >= 0 && f.epilogue < i)) {
        const bool by_item =
            std::any_of(s.items.begin(), s.items.end(), [](const WorkItem& w) { return w.blocks == 0; });
        ctx.Diag(codes::kUninitializedCarry, i, field, "a prologue stage that writes it",
                 "written only in the fold body, which may run 0 blocks",
                 absl::StrCat("buffer '", name, "' is written only by the fold body (", StageRef(s, f.body), ") and ",
                              by_item ? "an item folds 0 blocks of its own" : "the trip admits 0 blocks",
                              ", so the epilogue can read it unwritten"));
      } else if (self_writes && writers.front() >= i) {
        ctx.Diag(codes::kUninitializedCarry, i, field, "an earlier stage that writes it",
                 "read before its first write",
                 absl::StrCat("buffer '", name, "' is read and rewritten by this ", std::string(PhaseName(st.phase)),
                              " stage, but nothing writes it before"));
      } else {
        ctx.Diag(codes::kStageOrder, i, field, "a write before this stage",
                 absl::StrCat("first written by ", StageRef(s, writers.front())),
                 absl::StrCat("buffer '", name, "' is read by this ", std::string(PhaseName(st.phase)),
                              " stage, but only later stages write it (dataflow against stage order)"));
      }
    }
  }

  for (int b = 0; b < nb; ++b) {
    const BufferUse& u = ctx.uses[b];
    if (carried[b]) ctx.proof.add_carried_buffers(s.buffers[b].name);
    if (!u.writers.empty() && u.readers.empty()) {
      ctx.Diag(codes::kDanglingBuffer, u.writers.front(), "outs[0]", "a stage that reads it", "no reader",
               absl::StrCat("buffer '", s.buffers[b].name, "' is written but no stage of the section reads it"));
    }
    if (u.index_page && u.readers.size() > 1) {
      ctx.Diag(codes::kFifoTwoReaders, u.readers[1], absl::StrCat("buffer '", s.buffers[b].name, "'"),
               "1 reader", absl::StrCat(u.readers.size(), " readers"),
               absl::StrCat("index page '", s.buffers[b].name, "' addresses a movement and is retired by it, but ",
                            StageRef(s, u.readers[0]), " and ", StageRef(s, u.readers[1]),
                            " both read it (give each reader its own copy)"));
    }
  }

  for (size_t k = 0; k < s.edges.size(); ++k) {
    const Edge& e = s.edges[k];
    if (e.from < e.to) continue;
    ctx.Diag(codes::kStageOrder, e.to, absl::StrCat("edges[", k, "]"),
             absl::StrCat("from before to (#", e.to, ")"), absl::StrCat("from #", e.from),
             absl::StrCat("edge of buffer '", s.buffers[e.buffer].name, "' runs from ", StageRef(s, e.from), " to ",
                          StageRef(s, e.to), ", which does not come after it in the schedule"));
  }
}

}  // namespace spatial::certify

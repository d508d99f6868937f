// What the checks of one section share: the section, the target, the diagnostic sink, the section's proof being
// filled, and the per-buffer tables every check needs (readers, writers, value ranges). Built once per section
// in O(stages + buffers + references), so no check ever searches the stage list.
#ifndef CERTIFY_CONTEXT_H_
#define CERTIFY_CONTEXT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "certify/diagnostics.h"
#include "spatial/semantics/interval.h"
#include "certify/value_ranges.h"
#include "proto/certificate.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial::certify {

// Who touches a buffer, by stage index (stage order is the schedule: ValidateSection keeps phases in order).
struct BufferUse {
  std::vector<int> readers;  // distinct stages reading it, ascending
  std::vector<int> writers;  // distinct stages writing it, ascending
  bool index_page = false;   // an IndirectTile reads it: a FIFO the movement engine retires
};

struct SectionContext {
  SectionContext(const Composition& c, int index, const Target& t, DiagnosticSink& d, proto::SectionProof& p,
                 TensorRanges& tr);

  const Composition& comp;
  int section_index;
  const Section& s;
  const Target& target;
  DiagnosticSink& sink;
  proto::SectionProof& proof;
  TensorRanges& tensor_ranges;
  int64_t tile_rows;
  int64_t tile_cols;

  std::vector<BufferUse> uses;  // per buffer
  // Fold blocks a run can execute: [min, max]; min is 0 only when a trip can admit no block.
  int64_t min_blocks = 1;
  int64_t max_blocks = 1;
  // The items' output rects were reported overlapping (work.cc): the stores' own clash would say it again.
  bool rects_overlap = false;

  // Elements in one page of `b`: TR * TC * page_tiles.
  int64_t PageElems(BufferId b) const { return tile_rows * tile_cols * s.buffers[b].page_tiles; }
  // Tiles in the row-major tile grid of tensor `t`.
  int64_t TensorTiles(TensorId t) const;

  // Reports against stage `stage` (-1: the section).
  void Diag(std::string_view code, int stage, std::string field, std::string expected, std::string actual,
            std::string message);

  // The buffers a stage reads: its ins, and an accumulating matmul's C (it adds to C's current page).
  static std::vector<BufferId> Reads(const Stage& st);
};

// The checks, each in its own file. Each reports through ctx.Diag and records its proof in ctx.proof.
void CheckResources(SectionContext& ctx);  // footprint, accumulator, precisions (resources.cc)
void CheckDataflow(SectionContext& ctx);   // stage order, carries, dangling buffers, index FIFOs (dataflow.cc)
void CheckAccesses(SectionContext& ctx);   // tile addresses, element maps, index arithmetic (accesses.cc)
void CheckWork(SectionContext& ctx);       // items' rects, the trip (work.cc)
void CheckItemIndependence(SectionContext& ctx);  // no two items store one tile, none loads what another stores

// Composition level: the declared state order against what sections load and store (state_order.cc).
void CheckStateOrder(const Composition& c, DiagnosticSink& sink, proto::Certificate& cert);

}  // namespace spatial::certify

#endif  // CERTIFY_CONTEXT_H_

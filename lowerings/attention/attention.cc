#include "lowerings/attention/attention.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lowerings/attention/geometry.h"
#include "lowerings/attention/grouped_decode.h"
#include "lowerings/attention/sections.h"
#include "lowerings/toolkit/common.h"
#include "spatial/status_macros.h"

namespace spatial {

absl::StatusOr<Composition> FromAttention(const proto::OpSpec& spec, const Target& target) {
  // The seed refuses a malformed attention before it looks at its operands.
  ASSIGN_OR_RETURN(const AttentionShape shape, AttentionShapeOf(spec));
  ASSIGN_OR_RETURN(const AttentionNames names, AttentionNamesOf(spec));
  const proto::AttentionSpec& a = spec.attention();
  const bool dense = AttentionReadsDense(a.h(), a.kv(), a.hd(), a.vd(), target);
  if (a.form() == proto::AttentionSpec::FORM_FLASH && !dense) {
    return NotLowered(absl::StrCat("the flash form of an attention whose heads are not whole tiles, or whose query "
                                   "heads do not group over its K/V heads (h ", a.h(), ", kv ", a.kv(), ", hd ",
                                   a.hd(), ", vd ", a.vd(), " on ", target.tile_rows(), " x ", target.tile_cols(),
                                   " tiles)"));
  }
  FlashGeometry g = FlashGeometryOf(shape);
  if (a.kv_format() != proto::PRECISION_UNSPECIFIED) {
    ASSIGN_OR_RETURN(g.kv_precision, FormatOf(a.kv_format(), "attention.kv_format", Precision::kBf16, target));
  }
  if (a.dest_acc() == proto::BF16) {
    g.dest = Precision::kBf16;
  } else if (a.dest_acc() != proto::PRECISION_UNSPECIFIED && a.dest_acc() != proto::FP32) {
    const std::string name = proto::Precision_Name(a.dest_acc());
    return absl::InvalidArgumentError(absl::StrCat("attention.dest_acc: expected FP32 or BF16 (the accumulator "
                                                   "tt-metal's fp32_dest_acc_en chooses), got ",
                                                   name.empty() ? absl::StrCat(a.dest_acc()) : name));
  }
  if (a.kv_reads() == proto::AttentionSpec::KV_READS_PER_ITEM) {
    g.kv_per_item = true;
  } else if (a.kv_reads() != proto::AttentionSpec::KV_READS_SHARED) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention.kv_reads: expected KV_READS_SHARED or KV_READS_PER_ITEM (how the items read their K/V), got ",
        static_cast<int>(a.kv_reads())));
  }
  if (a.chunk_split() == proto::AttentionSpec::CHUNK_SPLIT_CONTIGUOUS) {
    g.contiguous_chunks = true;
  } else if (a.chunk_split() != proto::AttentionSpec::CHUNK_SPLIT_BALANCED) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention.chunk_split: expected CHUNK_SPLIT_BALANCED or CHUNK_SPLIT_CONTIGUOUS (which site folds which "
        "query chunks), got ",
        static_cast<int>(a.chunk_split())));
  }
  if (dense && a.form() != proto::AttentionSpec::FORM_SECTIONS) {
    return FlashFormAttention(names, g, shape.tag, target);
  }
  if (shape.widths.qk_fidelity != MathFidelity::kDefault || shape.widths.pv_fidelity != MathFidelity::kDefault) {
    return NotLowered(
        "a per-contraction fidelity (qk_fidelity, pv_fidelity) in the three sections of an attention, whose "
        "contractions are not tile products");
  }
  if (g.kv_precision) return NotLowered("a K/V format (kv_format) in the three sections of an attention");
  if (g.dest != Precision::kFp32) {
    return NotLowered("a 16-bit Dst (dest_acc BF16) in the three sections of an attention");
  }
  if (g.kv_per_item) return NotLowered("K/V read per item (kv_reads PER_ITEM) in the three sections of an attention");
  if (g.contiguous_chunks) {
    return NotLowered("tt-metal's contiguous chunk split (chunk_split CONTIGUOUS) in the three sections of an attention");
  }
  absl::StatusOr<Composition> sections =
      AttentionSections(names, shape.heads, shape.widths, shape.cache, shape.sinks, shape.tag, target);
  // The sections' scores are one page per query row, every head's every position: past the accumulator only at
  // toy sizes does that fit, and a forced form should say what would map.
  if (!sections.ok() && dense && absl::StrContains(sections.status().message(), "AccTilesExceeded")) {
    return absl::Status(sections.status().code(),
                        absl::StrCat(sections.status().message(),
                                     "; the three sections hold a query row's scores for every head and position in "
                                     "one page: the flash form (--attention-form=flash, or auto) streams them"));
  }
  return sections;
}

}  // namespace spatial

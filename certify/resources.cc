// Resources of one site: local memory, the accumulator, and the precisions and datapaths a section needs.
#include <string>

#include "absl/strings/str_cat.h"
#include "certify/codes.h"
#include "certify/context.h"
#include "spatial/semantics/footprint.h"

namespace spatial::certify {
namespace {

std::string Name(Precision p) { return std::string(PrecisionName(p)); }

std::string StorageList(const Target& t) {
  std::string out;
  for (int p : t.proto().datapaths().storage()) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", Name(static_cast<Precision>(p)));
  }
  return absl::StrCat("one of {", out, "}");
}

// Sum over buffers of depth * page_tiles * tile bytes, the rule the seed's buffer_bytes uses (every buffer at its
// declared depth, fp32 carries at 4 bytes per element).
void CheckFootprint(SectionContext& ctx) {
  const Section& s = ctx.s;
  const int64_t tile_elems = ctx.tile_rows * ctx.tile_cols;
  const Wide total = SectionFootprint(s, ctx.tile_rows, ctx.tile_cols);  // spatial/semantics/footprint.h
  Wide largest = -1;
  int largest_at = -1;
  for (size_t b = 0; b < s.buffers.size(); ++b) {
    const Wide bytes = BufferBytes(s.buffers[b], ctx.tile_rows, ctx.tile_cols);
    if (bytes > largest) {
      largest = bytes;
      largest_at = static_cast<int>(b);
    }
  }
  const int64_t cap = ctx.target.max_local_mem_bytes();
  ctx.proof.set_footprint_bytes(ToInt64(total));
  ctx.proof.set_local_mem_bytes(cap);
  ctx.proof.set_footprint_margin_bytes(ToInt64(Wide{cap} - total));
  ctx.proof.set_buffers(static_cast<int64_t>(s.buffers.size()));
  if (total > cap) {
    const Buffer& big = s.buffers[largest_at];
    ctx.Diag(codes::kFootprintExceeded, -1, "buffers", absl::StrCat("<= ", cap, " bytes"),
             absl::StrCat(WideToString(total), " bytes"),
             absl::StrCat("the section's ", s.buffers.size(), " buffers need ", WideToString(total),
                          " bytes per site, over the target's ", cap, " usable bytes (local_mem_bytes - reserved) by ",
                          WideToString(total - cap), "; the largest is '", big.name, "' (depth ", big.depth, " x ",
                          big.page_tiles, " tiles x ", TileBytes(big.precision, tile_elems), " bytes, ",
                          Name(big.precision), ")"));
  }
}

// Every buffer is a page FIFO with its own circular-buffer id on the site, and a site has num_cbs of them (32 on
// Wormhole and Blackhole, hardware-facts §1.3); a target that gives none has no limit.
void CheckCircularBuffers(SectionContext& ctx) {
  const Section& s = ctx.s;
  const int64_t cap = ctx.target.proto().num_cbs();
  ctx.proof.set_circular_buffers(cap);
  if (!ExceedsCircularBuffers(s, cap)) return;  // spatial/semantics/footprint.h
  const int64_t n = static_cast<int64_t>(s.buffers.size());
  ctx.Diag(codes::kCbCountExceeded, -1, "buffers", absl::StrCat("<= ", cap, " buffers"), absl::StrCat(n, " buffers"),
           absl::StrCat("the section declares ", n, " buffers, but a site of target '", ctx.target.name(), "' has ",
                        cap, " circular buffers (num_cbs), one per buffer: ", n - cap,
                        " too many; the last is '", s.buffers.back().name, "'"));
}

bool IsCompute(const Stage& st) { return st.is_generic() || st.is_matmul(); }

// A compute stage produces its output in the accumulator (Dst) before packing it out, so what it needs at once
// (DstTiles: a Generic's page, a MatmulTiles' one-tile sub-block) must fit.
void CheckAccumulator(SectionContext& ctx) {
  const Section& s = ctx.s;
  const int64_t cap = ctx.target.effective_acc_tiles(s.acc_precision, true);
  ctx.proof.set_acc_precision(static_cast<proto::Precision>(s.acc_precision));
  ctx.proof.set_acc_tiles_capacity(cap);
  bool any_compute = false;
  int64_t widest = 0;
  for (size_t i = 0; i < s.stages.size(); ++i) {
    const Stage& st = s.stages[i];
    if (!IsCompute(st) || st.outs.empty()) continue;
    any_compute = true;
    const int64_t tiles = DstTiles(s, st);
    if (tiles > widest) {
      widest = tiles;
      ctx.proof.set_acc_widest_stage(st.name);
    }
  }
  ctx.proof.set_acc_tiles_used(widest);
  if (!any_compute) return;
  if (cap <= 0) {
    ctx.Diag(codes::kUnsupportedPrecision, -1, "acc_precision", "an accumulator precision of the target",
             Name(s.acc_precision),
             absl::StrCat("target '", ctx.target.name(), "' has no ", Name(s.acc_precision),
                          " accumulator (Dst) for the section's compute stages"));
    return;
  }
  for (size_t i = 0; i < s.stages.size(); ++i) {
    const Stage& st = s.stages[i];
    if (!IsCompute(st) || st.outs.empty()) continue;
    const Buffer& out = s.buffers[st.outs[0]];
    if (DstTiles(s, st) > cap) {
      ctx.Diag(codes::kAccTilesExceeded, static_cast<int>(i), "outs[0]", absl::StrCat("<= ", cap, " tiles"),
               absl::StrCat(out.page_tiles, " tiles"),
               absl::StrCat("the output page of '", out.name, "' is ", out.page_tiles, " tiles, but the ",
                            Name(s.acc_precision), " accumulator holds ", cap, " (full sync)"));
    }
  }
}

// Storage precisions, and a datapath for each compute stage.
void CheckPrecisions(SectionContext& ctx) {
  const Section& s = ctx.s;
  const Target& t = ctx.target;
  for (const Tensor& x : s.tensors) {
    if (!t.supports_storage(x.precision)) {
      ctx.Diag(codes::kUnsupportedPrecision, -1, absl::StrCat("tensor '", x.name, "'.precision"), StorageList(t),
               Name(x.precision),
               absl::StrCat("target '", t.name(), "' cannot store ", Name(x.precision), " (tensor '", x.name, "')"));
    }
  }
  for (const Buffer& b : s.buffers) {
    if (!t.supports_storage(b.precision)) {
      ctx.Diag(codes::kUnsupportedPrecision, -1, absl::StrCat("buffer '", b.name, "'.precision"), StorageList(t),
               Name(b.precision),
               absl::StrCat("target '", t.name(), "' cannot hold ", Name(b.precision), " in a buffer ('", b.name,
                            "')"));
    }
  }
  for (size_t i = 0; i < s.stages.size(); ++i) {
    const Stage& st = s.stages[i];
    const int si = static_cast<int>(i);
    if (const auto* m = std::get_if<MatmulTiles>(&st.op)) {
      (void)m;
      const auto in = t.matrix_in();
      if (!in) {
        ctx.Diag(codes::kUnsupportedPrecision, si, "", "a matrix engine", "none",
                 absl::StrCat("target '", t.name(), "' has no matrix engine"));
        continue;
      }
      // The engine's own format, or a block float a bf16 engine's unpacker expands (Target::matrix_takes).
      for (size_t k = 0; k < st.ins.size() && k < 2; ++k) {
        const Buffer& b = s.buffers[st.ins[k]];
        if (!t.matrix_takes(b.precision)) {
          ctx.Diag(codes::kUnsupportedPrecision, si, absl::StrCat("ins[", k, "]"), Name(*in), Name(b.precision),
                   absl::StrCat("matrix operand '", b.name, "' is ", Name(b.precision), "; the matrix engine of '",
                                t.name(), "' takes ", Name(*in), *in == Precision::kBf16 ? " (or bfp8_b, bfp4_b)" : ""));
        }
      }
      continue;
    }
    // Loads and stores: an index read by the movement engine is an integer, never a float (bf16 holds integers
    // exactly only up to 256).
    const AccessPattern* pattern = nullptr;
    const Tensor* tensor = nullptr;
    if (const auto* l = std::get_if<Load>(&st.op)) pattern = &l->pattern, tensor = &s.tensors[l->tensor];
    if (const auto* w = std::get_if<Store>(&st.op)) pattern = &w->pattern, tensor = &s.tensors[w->tensor];
    if (pattern) {
      // A movement engine copies tiles, it does not convert between integers and floats: an index table read into
      // a float page, or a float result stored into an integer tensor, would mean different numbers to the VM
      // (which refuses a non-integer index) and to the machine (which truncates).
      const BufferId page = st.is_store() ? st.ins.at(0) : st.outs.at(0);
      const Buffer& b = s.buffers[page];
      if (IsInteger(b.precision) != IsInteger(tensor->precision)) {
        const bool store = st.is_store();
        ctx.Diag(codes::kPrecisionMismatch, si, store ? "ins[0]" : "outs[0]",
                 absl::StrCat(IsInteger(tensor->precision) ? "an integer" : "a float", " page like tensor '",
                              tensor->name, "'"),
                 Name(b.precision),
                 absl::StrCat(store ? "stores " : "loads ", Name(tensor->precision), " tensor '", tensor->name,
                              store ? "' from " : "' into ", Name(b.precision), " buffer '", b.name,
                              "': a Load or Store copies tiles and cannot convert between integer and float"));
      }
      if (pattern->origin.indirect) {
        const Buffer& ib = s.buffers[pattern->origin.indirect->index];
        if (!IsInteger(ib.precision)) {
          ctx.Diag(codes::kUnsupportedPrecision, si, "pattern.origin.indirect.index", "an integer precision",
                   Name(ib.precision),
                   absl::StrCat("index buffer '", ib.name, "' is ", Name(ib.precision),
                                ": a tile index must be an integer"));
        }
      }
      continue;
    }
    const auto* g = std::get_if<Generic>(&st.op);
    if (!g) continue;
    bool integer = IsInteger(s.buffers[st.outs[0]].precision);
    for (BufferId b : st.ins) integer = integer && IsInteger(s.buffers[b].precision);
    const auto path = integer ? t.elementwise_int() : t.elementwise_float();
    if (!path) {
      ctx.Diag(codes::kUnsupportedPrecision, si, "", integer ? "an integer elementwise datapath" : "a float elementwise datapath",
               "none",
               absl::StrCat("target '", t.name(), "' has no ", integer ? "integer" : "float",
                            " elementwise datapath for this Generic"));
    }
    for (size_t k = 0; k < g->ins.size(); ++k) {
      if (!g->ins[k].indirect) continue;
      const int op = g->ins[k].indirect->operand;
      const Buffer& ib = s.buffers[st.ins[op]];
      if (!IsInteger(ib.precision)) {
        ctx.Diag(codes::kUnsupportedPrecision, si, absl::StrCat("ins[", k, "].indirect"), "an integer precision",
                 Name(ib.precision),
                 absl::StrCat("slot ", op, " ('", ib.name, "') indexes slot ", k, " but is ", Name(ib.precision),
                              ": an index must be an integer"));
      }
    }
    if (g->out.indirect) {
      const int op = g->out.indirect->operand;
      const Buffer& ib = s.buffers[st.ins[op]];
      if (!IsInteger(ib.precision)) {
        ctx.Diag(codes::kUnsupportedPrecision, si, "out.indirect", "an integer precision", Name(ib.precision),
                 absl::StrCat("slot ", op, " ('", ib.name, "') indexes the out map but is ", Name(ib.precision),
                              ": an index must be an integer"));
      }
    }
  }
}

}  // namespace

void CheckResources(SectionContext& ctx) {
  CheckFootprint(ctx);
  CheckCircularBuffers(ctx);
  CheckAccumulator(ctx);
  CheckPrecisions(ctx);
}

}  // namespace spatial::certify

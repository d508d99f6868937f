#include "passes/online_softmax.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "lowerings/attention/flash.h"
#include "lowerings/attention/flash_split.h"
#include "lowerings/attention/geometry.h"
#include "lowerings/graph.h"
#include "lowerings/registry.h"
#include "proto/op.pb.h"
#include "spatial/proto_io.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

absl::Status Declined(const std::string& why) {
  return absl::FailedPreconditionError(absl::StrCat("declined: ", why));
}

const Generic* GenericNamed(const Section& s, std::string_view name) {
  const int i = s.FindStage(name);
  return i < 0 ? nullptr : std::get_if<Generic>(&s.stages[static_cast<size_t>(i)].op);
}

// The tensor a Load of `s` fills buffer `b` from, or nullptr.
const Tensor* LoadedInto(const Section& s, BufferId b) {
  for (const Stage& st : s.stages) {
    const auto* ld = std::get_if<Load>(&st.op);
    if (ld != nullptr && !st.outs.empty() && st.outs[0] == b) return &s.tensors[static_cast<size_t>(ld->tensor)];
  }
  return nullptr;
}

bool LoadsTensor(const Section& s, const std::string& name) {
  for (const Stage& st : s.stages) {
    const auto* ld = std::get_if<Load>(&st.op);
    if (ld != nullptr && s.tensors[static_cast<size_t>(ld->tensor)].name == name) return true;
  }
  return false;
}
bool StoresTensor(const Section& s, const std::string& name) {
  for (const Stage& st : s.stages) {
    const auto* sd = std::get_if<Store>(&st.op);
    if (sd != nullptr && s.tensors[static_cast<size_t>(sd->tensor)].name == name) return true;
  }
  return false;
}
// The one tensor `s` stores (a flat section's result).
std::optional<std::string> Stored(const Section& s) {
  std::optional<std::string> out;
  for (const Stage& st : s.stages) {
    const auto* sd = std::get_if<Store>(&st.op);
    if (sd == nullptr) continue;
    const std::string& name = s.tensors[static_cast<size_t>(sd->tensor)].name;
    if (out && *out != name) return std::nullopt;
    out = name;
  }
  return out;
}

// The bands of a Banded body (spatial/body.h): Select(col < end_v, band_v, rest), the last band the fall-through.
// `is_band_chain` tells an outer band's Select from a band body that is itself a Select.
std::vector<Body> Bands(const Body& b, bool nested_selects) {
  std::vector<Body> out;
  Body node = b;
  while (node->op == BodyOp::kSelect && node->pred.kind == PredKind::kAxisLt && node->pred.var == LoopVar::kCol &&
         !node->pred.rhs_is_operand && (!nested_selects || node->c->op == BodyOp::kSelect)) {
    out.push_back(node->b);
    node = node->c;
  }
  out.push_back(node);
  return out;
}

// What the recognizer reads off a three-section attention.
struct Found {
  size_t scores = 0;
  size_t last = 0;  // the weighted sum's section
  // The attention read off the program, once per window it may have (no window first); the rebuild picks.
  std::vector<proto::OpSpec> candidates;
};

absl::StatusOr<Found> Recognize(const Composition& c, size_t i) {
  const Section& s = c.sections[i];
  const Generic* g = GenericNamed(s, "attn_scores");
  const Stage& scores_stage = s.stages[static_cast<size_t>(s.FindStage("attn_scores"))];
  if (g->iters.size() != 2) return Declined(absl::StrCat("section '", s.name, "': attn_scores is not a row fold"));
  const int64_t hd = g->iters[0].extent;
  const int64_t n = g->iters[1].extent;
  const std::vector<Body> bands = Bands(g->body, false);
  const int64_t h = static_cast<int64_t>(bands.size());
  if (h < 1 || n % h != 0) return Declined(absl::StrCat("section '", s.name, "': its score bands do not tile its row"));
  const int64_t l = n / h;
  // Band v: (q . k) * scale, q and k input slots.
  const Body& b0 = bands[0];
  if (b0->op != BodyOp::kMul || b0->b->op != BodyOp::kConst || b0->a->op != BodyOp::kMul ||
      b0->a->a->op != BodyOp::kOperand || b0->a->b->op != BodyOp::kOperand) {
    return Declined(absl::StrCat("section '", s.name, "': a score is not scale * (q . k)"));
  }
  const double scale = b0->b->value;
  const int q_slot = b0->a->a->operand;
  const int k_slot = b0->a->b->operand;
  const int slots = static_cast<int>(std::min(scores_stage.ins.size(), g->ins.size()));
  if (q_slot < 0 || k_slot < 0 || q_slot >= slots || k_slot >= slots) {
    return Declined(absl::StrCat("section '", s.name, "': a score reads a slot the stage does not have"));
  }
  const Tensor* q = LoadedInto(s, scores_stage.ins[static_cast<size_t>(q_slot)]);
  const Tensor* k = LoadedInto(s, scores_stage.ins[static_cast<size_t>(k_slot)]);
  if (q == nullptr || k == nullptr) return Declined(absl::StrCat("section '", s.name, "': q or k is not an input"));
  int64_t j_stride = 0;
  for (const Term& t : g->ins[static_cast<size_t>(k_slot)].terms) {
    if (t.first == LoopVar::kCol) j_stride = t.second;
  }
  if (hd < 1 || j_stride < hd || j_stride % hd != 0) {
    return Declined(absl::StrCat("section '", s.name, "': the keys' stride is not a whole number of heads"));
  }
  const int64_t kv = j_stride / hd;
  const int64_t cache_rows = k->rows * k->cols / j_stride;

  // The probabilities: the one section reading the scores; the weighted sum: the one reading the probabilities.
  const std::optional<std::string> scores_t = Stored(s);
  if (!scores_t) return Declined(absl::StrCat("section '", s.name, "' stores more than its scores"));
  std::optional<size_t> softmax, wv, spread;
  for (size_t j = i + 1; j < c.sections.size(); ++j) {
    if (!LoadsTensor(c.sections[j], *scores_t)) continue;
    if (softmax) {
      return Declined(absl::StrCat("the scores '", *scores_t, "' are read by section '", c.sections[j].name,
                                   "' besides the row softmax: the fold never materializes them"));
    }
    softmax = j;
  }
  if (!softmax) return Declined(absl::StrCat("nothing reads the scores '", *scores_t, "'"));
  const std::optional<std::string> probs_t = Stored(c.sections[*softmax]);
  if (!probs_t) return Declined(absl::StrCat("section '", c.sections[*softmax].name, "' stores more than one tensor"));
  for (size_t j = *softmax + 1; j < c.sections.size(); ++j) {
    if (!LoadsTensor(c.sections[j], *probs_t)) continue;
    if (wv || GenericNamed(c.sections[j], "attn_weighted") == nullptr) {
      return Declined(absl::StrCat("the probabilities '", *probs_t, "' are read by section '", c.sections[j].name,
                                   "', not only by the weighted sum: the fold never materializes them"));
    }
    wv = j;
  }
  if (!wv) return Declined(absl::StrCat("no weighted sum reads the probabilities '", *probs_t, "'"));
  const Section& w = c.sections[*wv];
  const std::optional<std::string> out = Stored(w);
  const Generic* wg = GenericNamed(w, "attn_weighted");
  const std::vector<Body> wbands = Bands(wg->body, false);
  if (!out || wg->iters.size() != 2 || wbands.back()->op != BodyOp::kMul || wbands.back()->b->op != BodyOp::kOperand) {
    return Declined(absl::StrCat("section '", w.name, "' is not a weighted sum of values"));
  }
  const Stage& w_stage = w.stages[static_cast<size_t>(w.FindStage("attn_weighted"))];
  const int v_slot = wbands.back()->b->operand;
  if (v_slot < 0 || v_slot >= static_cast<int>(w_stage.ins.size())) {
    return Declined(absl::StrCat("section '", w.name, "' is not a weighted sum of values"));
  }
  const Tensor* v = LoadedInto(w, w_stage.ins[static_cast<size_t>(v_slot)]);
  if (v == nullptr || wg->iters[1].extent % h != 0) {
    return Declined(absl::StrCat("section '", w.name, "' is not a weighted sum of values"));
  }
  const int64_t vd = wg->iters[1].extent / h;

  // The sinks: an input of the softmax besides the scores (spread over the rows by a section of their own).
  std::optional<std::string> sinks;
  for (const Tensor& t : c.sections[*softmax].tensors) {
    if (t.role != TensorRole::kInput || t.name == *scores_t) continue;
    sinks = t.name;
  }
  if (sinks) {
    for (size_t j = i + 1; j < *softmax; ++j) {
      if (!StoresTensor(c.sections[j], *sinks)) continue;
      spread = j;
      for (const Tensor& t : c.sections[j].tensors) {
        if (t.role == TensorRole::kInput) sinks = t.name;
      }
    }
  }
  // Consecutive, so nothing between them can see the tensors the fold no longer writes.
  if (*softmax != (spread ? *spread : i) + 1 || *wv != *softmax + 1 || (spread && *spread != i + 1)) {
    return Declined("the attention's sections are not consecutive");
  }

  // The mask: each band's threshold is v*l + row_of(v) + P (a literal), or v*l + row_of(v) plus the position
  // operand (the thresholds stage). A window adds floors: literal ones inside a band (kept only where they cut it),
  // or a floors stage computing them from the thresholds; the window is read back from them as candidates, each
  // then proven by the rebuild.
  std::vector<int64_t> row_plus;  // row_of(v) + P, or row_of(v) with the position an operand
  std::optional<std::string> position;
  std::vector<proto::Window> windows;  // candidates, beside "no window"
  if (const Generic* m = GenericNamed(s, "mask"); m != nullptr) {
    const std::vector<Body> mb = Bands(m->body, true);
    std::optional<std::pair<int64_t, int64_t>> cut;  // (band, floor - v*l): the first literal floor
    for (int64_t v = 0; v < static_cast<int64_t>(mb.size()); ++v) {
      const Body& band = mb[static_cast<size_t>(v)];
      if (band->op != BodyOp::kSelect || band->pred.kind != PredKind::kAxisLt) {
        return Declined(absl::StrCat("section '", s.name, "': a mask band that is not a threshold"));
      }
      const Body& kept = band->b;
      if (kept->op == BodyOp::kSelect && kept->pred.kind == PredKind::kAxisGe && !kept->pred.rhs_is_operand &&
          kept->b->op == BodyOp::kOperand) {
        if (!cut) cut = std::make_pair(v, kept->pred.rhs - v * l);
      } else if (kept->op != BodyOp::kOperand && !(kept->op == BodyOp::kSelect && kept->pred.rhs_is_operand)) {
        return Declined(absl::StrCat("section '", s.name, "': a mask band keeps something other than the score"));
      }
      if (!band->pred.rhs_is_operand) row_plus.push_back(band->pred.rhs - v * l);
    }
    if (const Generic* th = GenericNamed(s, "thresholds"); th != nullptr) {
      for (const Body& tb : Bands(th->body, false)) {
        if (tb->op != BodyOp::kAdd || tb->a->op != BodyOp::kConst) return Declined("unrecognized thresholds");
        row_plus.push_back(static_cast<int64_t>(tb->a->value) - static_cast<int64_t>(row_plus.size()) * l);
      }
      for (const Tensor& t : s.tensors) {
        if (t.role == TensorRole::kInput && t.name != q->name && t.name != k->name) position = t.name;
      }
      if (!position) return Declined("a computed threshold without a position operand");
    }
    if (static_cast<int64_t>(row_plus.size()) != h) return Declined("a mask that is not one threshold a head");
    if (const Generic* fl = GenericNamed(s, "floors"); fl != nullptr) {
      // Sliding: threshold - W; chunked: base + floor((threshold - base - 1) / C) * C, band by band.
      const Body f0 = Bands(fl->body, false)[0];  // a copy: the vector is a temporary
      proto::Window w;
      if (f0->op == BodyOp::kSub && f0->b->op == BodyOp::kConst) {
        w.set_sliding(static_cast<int64_t>(f0->b->value));
      } else if (f0->op == BodyOp::kAdd && f0->b->op == BodyOp::kMul && f0->b->b->op == BodyOp::kConst) {
        w.set_chunked(static_cast<int64_t>(f0->b->b->value));
      } else {
        return Declined(absl::StrCat("section '", s.name, "': floors that are neither a sliding window's nor a "
                                     "chunk's"));
      }
      windows.push_back(w);
    } else if (cut) {
      // first(n) - 1 = n - W (sliding), or floor((n - 1) / C) * C (chunked), n the band's limit.
      const int64_t n = row_plus[static_cast<size_t>(cut->first)];
      const int64_t floor_rel = cut->second;
      proto::Window w;
      w.set_sliding(n - floor_rel);
      windows.push_back(w);
      for (int64_t c = 1; c <= floor_rel; ++c) {
        if (floor_rel % c == 0 && (n - 1) / c * c == floor_rel) {
          w.set_chunked(c);
          windows.push_back(w);
        }
      }
    } else if (!position) {
      // A window that cuts no band (W at least every row's limit): the sliding one of the largest limit.
      proto::Window w;
      w.set_sliding(*std::max_element(row_plus.begin(), row_plus.end()));
      windows.push_back(w);
    }
  }
  int64_t per_row = h;
  if (!row_plus.empty()) {
    per_row = 0;
    while (per_row < h && row_plus[static_cast<size_t>(per_row)] == row_plus[0]) ++per_row;
  }
  const int64_t rows = h / per_row;

  proto::OpSpec spec;
  spec.set_out(*out);
  for (const std::string& name : {q->name, k->name, v->name}) spec.add_operands()->set_name(name);
  proto::AttentionSpec* a = spec.mutable_attention();
  a->set_h(per_row);
  a->set_kv(kv);
  a->set_hd(hd);
  a->set_vd(vd);
  a->set_l(cache_rows);
  a->set_rows(rows);
  a->set_scale(scale);
  if (position) {
    a->mutable_pos()->set_named(*position);
    spec.add_operands()->set_name(*position);
  } else if (!row_plus.empty()) {
    a->mutable_pos()->set_literal(row_plus[0]);
  } else if (l < cache_rows) {
    a->mutable_pos()->set_literal(l);
  }
  if (sinks) {
    a->set_sinks(true);
    spec.add_operands()->set_name(*sinks);
  }
  if (const Generic* cap = GenericNamed(s, "attn_cap"); cap != nullptr) {
    if (cap->body->op != BodyOp::kSub || cap->body->b->op != BodyOp::kConst) return Declined("unrecognized soft cap");
    a->set_softcap(cap->body->b->value);
  }
  Found f{i, *wv, {spec}};
  for (const proto::Window& w : windows) {
    proto::OpSpec with = spec;
    *with.mutable_attention()->mutable_window() = w;
    f.candidates.push_back(std::move(with));
  }
  return f;
}

// The program's sections [first, last] against `rebuilt`'s, field by field: "" when equal, else the first
// difference.
std::string Difference(const Composition& c, size_t first, size_t last, const Composition& rebuilt) {
  if (rebuilt.sections.size() != last - first + 1) {
    return absl::StrCat(last - first + 1, " sections where the attention has ", rebuilt.sections.size());
  }
  for (size_t j = 0; j < rebuilt.sections.size(); ++j) {
    const Section& program = c.sections[first + j];
    // A composition renames a table an op embeds after the op when another op declared its name first
    // (lowerings/graph.h: "{label}__{name}"); the rebuild, alone, did not.
    Section same = rebuilt.sections[j];
    for (size_t t = 0; t < same.tensors.size() && t < program.tensors.size(); ++t) {
      Tensor& mine = same.tensors[t];
      const std::string& theirs = program.tensors[t].name;
      if (mine.role == TensorRole::kParam && program.tensors[t].role == TensorRole::kParam &&
          absl::EndsWith(theirs, absl::StrCat("__", mine.name))) {
        mine.name = theirs;
      }
    }
    const proto::Section have = SectionToProto(program);
    const proto::Section want = SectionToProto(same);
    google::protobuf::util::MessageDifferencer d;
    std::string diff;
    d.ReportDifferencesToString(&diff);
    if (!d.Compare(want, have)) {
      const size_t nl = diff.find('\n');
      return absl::StrCat("section '", c.sections[first + j].name, "': ", diff.substr(0, nl));
    }
  }
  return "";
}

// ── The attention composed from its parts ─────────────────────────────────────────────────────────────────────

// The MatmulTiles stage named "matmul" of `s`, or nullptr.
const MatmulTiles* MatmulNamed(const Section& s) {
  const int i = s.FindStage("matmul");
  return i < 0 ? nullptr : std::get_if<MatmulTiles>(&s.stages[static_cast<size_t>(i)].op);
}

// A row softmax's section (lowerings/rows/softmax.h): its chain's stages.
bool IsRowSoftmax(const Section& s) {
  return GenericNamed(s, "row_max") != nullptr && GenericNamed(s, "exp_centred") != nullptr &&
         GenericNamed(s, "recip") != nullptr;
}

// The run inputs a section reads (its Input tensors), in declaration order.
std::vector<std::string> InputsOf(const Section& s) {
  std::vector<std::string> out;
  for (const Tensor& t : s.tensors) {
    if (t.role == TensorRole::kInput) out.push_back(t.name);
  }
  return out;
}

// The sections after `from` that read `name`.
std::vector<size_t> ReadersOf(const Composition& c, const std::string& name, size_t from) {
  std::vector<size_t> out;
  for (size_t j = from + 1; j < c.sections.size(); ++j) {
    if (LoadsTensor(c.sections[j], name)) out.push_back(j);
  }
  return out;
}

// A move LowerGraph put between a matrix and its flat rows (lowerings/graph.h): its result "{name}__rows" or
// "{name}__matrix".
bool IsMove(const Section& s) {
  const std::optional<std::string> out = Stored(s);
  return out && (absl::EndsWith(*out, "__rows") || absl::EndsWith(*out, "__matrix"));
}

// Of two or more `readers`, the one to name as too many: the first off the attention's path (`on_path`, when known)
// that is neither a move nor a product (those lead on to the value pass); a move is named by the section it moves
// them for.
size_t OtherReader(const Composition& c, const std::vector<size_t>& readers,
                   std::optional<size_t> on_path = std::nullopt) {
  size_t other = readers[0] == on_path ? readers[1] : readers[0];
  for (size_t j : readers) {
    if (j != on_path && !IsMove(c.sections[j]) && MatmulNamed(c.sections[j]) == nullptr) {
      other = j;
      break;
    }
  }
  while (IsMove(c.sections[other])) {
    const std::vector<size_t> next = ReadersOf(c, *Stored(c.sections[other]), other);
    if (next.empty()) break;
    other = next[0];
  }
  return other;
}

// A section of one input and one result: a scale, a relayout. Its input, or nullopt.
std::optional<std::string> PassThrough(const Section& s) {
  const std::vector<std::string> in = InputsOf(s);
  if (in.size() != 1 || !Stored(s)) return std::nullopt;
  return in[0];
}

// The factor of a scale's section (lowerings/elementwise: Generic 'scale', body x0 * factor), or nullopt.
std::optional<double> ScaleFactor(const Section& s) {
  const Generic* g = GenericNamed(s, "scale");
  if (g == nullptr || IsRowSoftmax(s) || g->body->op != BodyOp::kMul || g->body->a->op != BodyOp::kOperand ||
      g->body->b->op != BodyOp::kConst) {
    return std::nullopt;
  }
  return g->body->b->value;
}

// What the recognizer reads off an attention composed from ops: S = q·kᵀ (a matmul whose keys are read
// transposed), optionally scaled (before the product, on q, or after it, on S), P = the row softmax of the scores,
// O = P·v, with the relayouts between a matrix and a flat row a graph puts between them.
struct Composed {
  size_t first = 0, last = 0;  // its sections, consecutive
  std::string q, k, v, out;
  int64_t rows = 0, hd = 0, l = 0, vd = 0;
  double scale = 1.0;
  std::vector<std::vector<GraphOp>> candidates;  // the ops it may be composed of; the rebuild picks
};

// Section `i` of `c` is a matmul by keys read transposed: the composed attention it starts, nullopt when its scores
// reach no row softmax (a product that is not an attention's), or a decline when it is an attention the fold cannot
// take as composed.
absl::StatusOr<std::optional<Composed>> RecognizeComposed(const Composition& c, size_t i) {
  const Section& s = c.sections[i];
  const Stage& mm = s.stages[static_cast<size_t>(s.FindStage("matmul"))];
  const Tensor* a = mm.ins.size() == 2 ? LoadedInto(s, mm.ins[0]) : nullptr;
  const Tensor* b = mm.ins.size() == 2 ? LoadedInto(s, mm.ins[1]) : nullptr;
  const std::optional<std::string> scores = Stored(s);
  if (a == nullptr || b == nullptr || !scores) return std::nullopt;

  // Forward from the scores through one-input sections (a scale, a relayout) to a row softmax.
  std::vector<size_t> chain{i};
  std::optional<double> post;
  std::optional<size_t> post_at;  // the scale's section
  std::string cur = *scores;
  std::optional<size_t> softmax;
  while (!softmax) {
    const std::vector<size_t> readers = ReadersOf(c, cur, chain.back());
    std::optional<size_t> next;
    for (size_t j : readers) {
      if (IsRowSoftmax(c.sections[j]) || PassThrough(c.sections[j])) next = j;
    }
    if (!next) return std::nullopt;
    if (readers.size() > 1) {
      const size_t other = OtherReader(c, readers, *next);
      return Declined(absl::StrCat("the scores '", cur, "' are read by section '", c.sections[other].name,
                                   "' besides the row softmax: the fold never materializes them"));
    }
    chain.push_back(*next);
    const Section& n = c.sections[*next];
    if (IsRowSoftmax(n)) {
      softmax = *next;
      if (InputsOf(n).size() != 1) {
        return Declined(absl::StrCat("section '", n.name, "': a softmax with sinks over composed scores (the fold "
                                     "takes a sink per head, not per row of a softmax)"));
      }
    } else if (const std::optional<double> f = ScaleFactor(n)) {
      if (post) return Declined(absl::StrCat("section '", n.name, "': the scores are scaled twice"));
      post = f;
      post_at = *next;
    }
    cur = *Stored(n);
  }
  // Forward from the probabilities through relayouts to the matmul by the values.
  const std::string probs = cur;
  std::optional<size_t> value_pass;
  while (!value_pass) {
    const std::vector<size_t> readers = ReadersOf(c, cur, chain.back());
    if (readers.empty()) return Declined(absl::StrCat("nothing reads the probabilities '", probs, "'"));
    if (readers.size() > 1) {
      return Declined(absl::StrCat("the probabilities '", probs, "' are read by section '",
                                   c.sections[OtherReader(c, readers)].name,
                                   "', not only by the value pass: the fold never materializes them"));
    }
    const Section& n = c.sections[readers[0]];
    chain.push_back(readers[0]);
    const MatmulTiles* pv = MatmulNamed(n);
    if (pv != nullptr) {
      const Stage& st = n.stages[static_cast<size_t>(n.FindStage("matmul"))];
      const Tensor* pa = st.ins.size() == 2 ? LoadedInto(n, st.ins[0]) : nullptr;
      if (pv->transpose_b || pa == nullptr || pa->name != cur) {
        return Declined(absl::StrCat("section '", n.name, "' reads the probabilities '", probs,
                                     "' but is not their product by the values"));
      }
      value_pass = readers[0];
    } else if (!IsMove(n)) {
      return Declined(absl::StrCat("the probabilities '", probs, "' are read by section '", n.name,
                                   "', not only by the value pass: the fold never materializes them"));
    } else {
      cur = *Stored(n);
    }
  }
  const Section& w = c.sections[*value_pass];
  const Stage& wst = w.stages[static_cast<size_t>(w.FindStage("matmul"))];
  const Tensor* v = LoadedInto(w, wst.ins[1]);
  const std::optional<std::string> out = Stored(w);
  if (v == nullptr || !out) return Declined(absl::StrCat("section '", w.name, "' is not a product by the values"));

  // A scale before the product: q's producer just before it, read by nothing else.
  std::optional<double> pre;
  std::string q = a->name;
  if (i > 0 && ScaleFactor(c.sections[i - 1]) && Stored(c.sections[i - 1]) == a->name &&
      ReadersOf(c, a->name, i - 1).size() == 1) {
    pre = ScaleFactor(c.sections[i - 1]);
    q = *PassThrough(c.sections[i - 1]);
    chain.insert(chain.begin(), i - 1);
  }
  std::sort(chain.begin(), chain.end());
  for (size_t j = 1; j < chain.size(); ++j) {
    if (chain[j] != chain[j - 1] + 1) return Declined("the composed attention's sections are not consecutive");
  }

  Composed f;
  f.first = chain.front();
  f.last = chain.back();
  f.q = q;
  f.k = b->name;
  f.v = v->name;
  f.out = *out;
  f.rows = a->rows;
  f.hd = a->cols;
  f.l = b->rows;
  f.vd = v->cols;
  f.scale = pre.value_or(1.0) * post.value_or(1.0);

  // The ops it may be composed of, one candidate per layout of each scale: over the matrix or over its flat row
  // (a scale op's shape_rows x shape_cols, or unset).
  auto spec = [](const std::string& result, const std::vector<std::string>& operands) {
    proto::OpSpec o;
    o.set_out(result);
    for (const std::string& n : operands) o.add_operands()->set_name(n);
    return o;
  };
  auto scale_op = [&](const std::string& result, const std::string& x, double factor, int64_t r, int64_t cols,
                      bool dense) {
    proto::OpSpec o = spec(result, {x});
    o.mutable_scale()->set_factor(factor);
    o.mutable_scale()->set_n(r * cols);
    if (dense) {
      o.set_shape_rows(r);
      o.set_shape_cols(cols);
    }
    return GraphOp{result, o};
  };
  const std::string softmax_in = post ? *Stored(c.sections[*post_at]) : *scores;
  for (const bool pre_dense : {true, false}) {
    if (!pre && !pre_dense) continue;
    for (const bool post_dense : {true, false}) {
      if (!post && !post_dense) continue;
      std::vector<GraphOp> ops;
      if (pre) ops.push_back(scale_op(a->name, q, *pre, f.rows, f.hd, pre_dense));
      proto::OpSpec qk = spec(*scores, {a->name, f.k});
      qk.mutable_matmul()->set_m(f.rows);
      qk.mutable_matmul()->set_k(f.hd);
      qk.mutable_matmul()->set_n(f.l);
      qk.mutable_matmul()->set_transpose_b(true);
      ops.push_back({*scores, qk});
      if (post) ops.push_back(scale_op(softmax_in, *scores, *post, f.rows, f.l, post_dense));
      proto::OpSpec sm = spec(probs, {softmax_in});
      sm.mutable_softmax()->set_rows(f.rows);
      sm.mutable_softmax()->set_cols(f.l);
      ops.push_back({probs, sm});
      proto::OpSpec pv = spec(f.out, {probs, f.v});
      pv.mutable_matmul()->set_m(f.rows);
      pv.mutable_matmul()->set_k(f.l);
      pv.mutable_matmul()->set_n(f.vd);
      ops.push_back({f.out, pv});
      f.candidates.push_back(std::move(ops));
    }
  }
  return f;
}


// The three sections' fold: the first candidate whose sections equal the program's, lowered as the flash form.
absl::StatusOr<Composition> ThreeSectionFold(const Composition& c, const Found& f, const Target& target) {
  std::optional<proto::OpSpec> proven;
  std::string first_reason;
  for (proto::OpSpec candidate : f.candidates) {
    candidate.mutable_attention()->set_form(proto::AttentionSpec::FORM_SECTIONS);
    absl::StatusOr<Composition> sections = Lower(candidate, target);
    std::string reason;
    if (!sections.ok()) {
      reason = absl::StrCat("the attention read off section '", c.sections[f.scores].name,
                            "' does not lower as three sections: ", sections.status().message());
    } else if (const std::string diff = Difference(c, f.scores, f.last, *sections); !diff.empty()) {
      reason = absl::StrCat("the sections differ from the attention they resemble (",
                            candidate.attention().ShortDebugString(), "): ", diff);
    } else {
      proven = candidate;
      break;
    }
    if (first_reason.empty()) first_reason = reason;
  }
  if (!proven) return Declined(first_reason);
  proto::OpSpec spec = *proven;
  spec.mutable_attention()->set_form(proto::AttentionSpec::FORM_FLASH);
  absl::StatusOr<Composition> flash = Lower(spec, target);
  if (!flash.ok()) return Declined(absl::StrCat("the fold does not apply: ", flash.status().message()));
  return flash;
}

// The composed attention's fold: the first candidate whose ops lower to the program's sections, then the flash fold
// of one head over its rows (every row sees every position: unmasked), its scale the product of the scales found.
absl::StatusOr<Composition> ComposedFold(const Composition& c, const Composed& f, const Target& target) {
  bool proven = false;
  std::string first_reason;
  for (const std::vector<GraphOp>& ops : f.candidates) {
    absl::StatusOr<LoweredGraph> g = LowerGraph("composed_attention", ops, nullptr, target);
    std::string reason;
    if (!g.ok()) {
      reason = absl::StrCat("the attention read off section '", c.sections[f.first].name,
                            "' does not lower as its parts: ", g.status().message());
    } else if (const std::string diff = Difference(c, f.first, f.last, g->program); !diff.empty()) {
      reason = absl::StrCat("the sections differ from the composed attention they resemble (", f.rows, " rows, hd ",
                            f.hd, ", ", f.l, " positions, vd ", f.vd, ", scale ", f.scale, "): ", diff);
    } else {
      proven = true;
      break;
    }
    if (first_reason.empty()) first_reason = reason;
  }
  if (!proven) return Declined(first_reason);
  if (!FlashApplies(f.hd, f.vd, target)) {
    return Declined(absl::StrCat("the fold does not apply: keys of ", f.hd, " and values of ", f.vd,
                                 " are not whole tiles of ", target.tile_rows(), " x ", target.tile_cols()));
  }
  FlashGeometry g;
  g.q = QueryHeads{f.rows, 1, 1};
  g.kvw = 1;
  g.hd = f.hd;
  g.vd = f.vd;
  g.rows = f.l;
  g.l = f.l;
  g.scale = f.scale;
  // A decode row's cache split across sites (flash-decoding, flash_split.h), as an attention op's decode is.
  g.split = DecodeSplit(g, target);
  const AttentionNames names{f.out, {OperandRef{f.q, {}}, OperandRef{f.k, {}}, OperandRef{f.v, {}}}};
  absl::StatusOr<Composition> flash = FlashAttention(names, g, "attn", target);
  if (!flash.ok()) return Declined(absl::StrCat("the fold does not apply: ", flash.status().message()));
  return flash;
}

}  // namespace

absl::Status OnlineSoftmax(Composition& c, const Target& target) {
  Composition out = c;
  int rewritten = 0;
  for (size_t i = 0; i < out.sections.size(); ++i) {
    // The sections [first, last] to replace by `flash`.
    size_t first = 0, last = 0;
    std::optional<Composition> flash;
    if (GenericNamed(out.sections[i], "attn_scores") != nullptr) {
      ASSIGN_OR_RETURN(const Found f, Recognize(out, i));
      ASSIGN_OR_RETURN(flash, ThreeSectionFold(out, f, target));
      first = f.scores;
      last = f.last;
    } else if (const MatmulTiles* mm = MatmulNamed(out.sections[i]); mm != nullptr && mm->transpose_b) {
      ASSIGN_OR_RETURN(const std::optional<Composed> f, RecognizeComposed(out, i));
      if (!f) continue;
      ASSIGN_OR_RETURN(flash, ComposedFold(out, *f, target));
      first = f->first;
      last = f->last;
    } else {
      continue;
    }
    // The fold reads Q, K, V and writes the result dense; another section must not hold them flat.
    for (const Section& fs : flash->sections) {
      for (const Tensor& t : fs.tensors) {
        for (size_t j = 0; j < out.sections.size(); ++j) {
          if (j >= first && j <= last) continue;
          const int at = out.sections[j].FindTensor(t.name);
          if (at < 0) continue;
          const Tensor& other = out.sections[j].tensors[static_cast<size_t>(at)];
          if (other.rows != t.rows || other.cols != t.cols) {
            return Declined(absl::StrCat("section '", out.sections[j].name, "' holds '", t.name, "' as ", other.rows,
                                         " x ", other.cols, "; the fold reads it as ", t.rows, " x ", t.cols));
          }
        }
      }
    }
    std::vector<Section> next(out.sections.begin(), out.sections.begin() + static_cast<std::ptrdiff_t>(first));
    const size_t resume = next.size() + flash->sections.size();
    for (Section& fs : flash->sections) next.push_back(std::move(fs));
    for (size_t j = last + 1; j < out.sections.size(); ++j) next.push_back(std::move(out.sections[j]));
    out.sections = std::move(next);
    i = resume - 1;
    ++rewritten;
  }
  if (rewritten == 0) {
    return Declined("no attention in the program: neither the three sections (scores, row softmax, weighted sum) "
                    "nor one composed of a matmul by keys read transposed, a row softmax and a matmul by values");
  }
  DeclareStateOrder(out);
  c = std::move(out);
  return absl::OkStatus();
}

}  // namespace spatial

#include "passes/online_softmax.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
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
    const proto::Section have = SectionToProto(c.sections[first + j]);
    const proto::Section want = SectionToProto(rebuilt.sections[j]);
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

}  // namespace

absl::Status OnlineSoftmax(Composition& c, const Target& target) {
  Composition out = c;
  int rewritten = 0;
  for (size_t i = 0; i < out.sections.size(); ++i) {
    if (GenericNamed(out.sections[i], "attn_scores") == nullptr) continue;
    ASSIGN_OR_RETURN(const Found f, Recognize(out, i));
    // The first candidate whose three sections equal the program's; else the first's reason.
    std::optional<proto::OpSpec> proven;
    std::string first_reason;
    for (proto::OpSpec candidate : f.candidates) {
      candidate.mutable_attention()->set_form(proto::AttentionSpec::FORM_SECTIONS);
      absl::StatusOr<Composition> sections = Lower(candidate, target);
      std::string reason;
      if (!sections.ok()) {
        reason = absl::StrCat("the attention read off section '", out.sections[i].name,
                              "' does not lower as three sections: ", sections.status().message());
      } else if (const std::string diff = Difference(out, f.scores, f.last, *sections); !diff.empty()) {
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
    // The fold reads Q, K, V and writes the result dense; another section must not hold them flat.
    for (const Section& fs : flash->sections) {
      for (const Tensor& t : fs.tensors) {
        for (size_t j = 0; j < out.sections.size(); ++j) {
          if (j >= f.scores && j <= f.last) continue;
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
    std::vector<Section> next(out.sections.begin(), out.sections.begin() + static_cast<std::ptrdiff_t>(f.scores));
    const size_t resume = next.size() + flash->sections.size();
    for (Section& fs : flash->sections) next.push_back(std::move(fs));
    for (size_t j = f.last + 1; j < out.sections.size(); ++j) next.push_back(std::move(out.sections[j]));
    out.sections = std::move(next);
    i = resume - 1;
    ++rewritten;
  }
  if (rewritten == 0) {
    return Declined("no three-section attention (scores, row softmax, weighted sum) in the program");
  }
  DeclareStateOrder(out);
  c = std::move(out);
  return absl::OkStatus();
}

}  // namespace spatial

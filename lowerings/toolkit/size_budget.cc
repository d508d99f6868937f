#include "lowerings/toolkit/size_budget.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/common.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

std::string Names(std::initializer_list<SizeFactor> factors) {
  std::string names;
  std::string values;
  for (const SizeFactor& f : factors) {
    absl::StrAppend(&names, names.empty() ? "" : " x ", std::string(f.name));
    absl::StrAppend(&values, values.empty() ? "" : " x ", f.value);
  }
  return absl::StrCat(names, " = ", values);
}

bool AllPositive(std::initializer_list<SizeFactor> factors) {
  for (const SizeFactor& f : factors) {
    if (f.value <= 0) return false;
  }
  return true;
}

absl::Status TooLarge(std::string_view kind, const std::string& sizes, std::optional<int64_t> product,
                      std::string_view what, bool show_product = true) {
  if (!product) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(kind), ": ", sizes, " elements (", std::string(what),
                                                   ") overflow int64, more than the ", kMaxTensorElems,
                                                   " a tensor holds"));
  }
  return absl::InvalidArgumentError(absl::StrCat(std::string(kind), ": ", sizes,
                                                 show_product ? absl::StrCat(" = ", *product) : std::string(),
                                                 " elements (", std::string(what), ") exceed the ", kMaxTensorElems,
                                                 " a tensor holds"));
}

// The n of a pointwise kind (the kinds whose program takes the spec's shape_rows x shape_cols), else nullopt.
std::optional<int64_t> PointwiseN(const proto::OpSpec& spec) {
  switch (spec.kind_case()) {
    case proto::OpSpec::kSilu: return spec.silu().n();
    case proto::OpSpec::kRelu: return spec.relu().n();
    case proto::OpSpec::kSigmoid: return spec.sigmoid().n();
    case proto::OpSpec::kGelu: return spec.gelu().n();
    case proto::OpSpec::kScale: return spec.scale().n();
    case proto::OpSpec::kSoftcap: return spec.softcap().n();
    case proto::OpSpec::kIntRequant: return spec.int_requant().n();
    case proto::OpSpec::kIntClamp: return spec.int_clamp().n();
    case proto::OpSpec::kBinary: return spec.binary().n();
    default: return std::nullopt;
  }
}

}  // namespace

SizeBudget& SizeBudget::Tensor(std::string_view what, std::initializer_list<SizeFactor> factors) {
  for (const SizeFactor& f : factors) negative_ |= f.value < 0;
  if (!status_.ok() || !AllPositive(factors)) return *this;
  std::optional<int64_t> product = 1;
  for (const SizeFactor& f : factors) product = CheckedMul(product, f.value);
  if (!product || *product > kMaxTensorElems) {
    status_ = TooLarge(kind_, Names(factors), product, what, factors.size() > 1);
  }
  return *this;
}

SizeBudget& SizeBudget::TensorOfSum(std::string_view what, std::initializer_list<SizeFactor> factors, SizeFactor a,
                                    SizeFactor b) {
  for (const SizeFactor& f : factors) negative_ |= f.value < 0;
  negative_ |= a.value < 0 || b.value < 0;
  if (!status_.ok() || !AllPositive(factors) || a.value < 0 || b.value < 0) return *this;
  std::optional<int64_t> product = CheckedAdd(a.value, b.value);
  if (product == 0) return *this;
  for (const SizeFactor& f : factors) product = CheckedMul(product, f.value);
  if (!product || *product > kMaxTensorElems) {
    std::string sizes = Names(factors);
    // "rows x (wa + wb) = 4 x (2 + 3)"
    std::string names;
    std::string values;
    for (const SizeFactor& f : factors) {
      absl::StrAppend(&names, std::string(f.name), " x ");
      absl::StrAppend(&values, f.value, " x ");
    }
    sizes = absl::StrCat(names, "(", std::string(a.name), " + ", std::string(b.name), ") = ", values, "(", a.value,
                         " + ", b.value, ")");
    status_ = TooLarge(kind_, sizes, product, what);
  }
  return *this;
}

absl::StatusOr<int64_t> CheckedElements(std::string_view what, std::optional<int64_t> a, std::optional<int64_t> b) {
  const std::optional<int64_t> n = CheckedMul(a, b);
  if (n && *n <= kMaxTensorElems) return *n;
  auto factor = [](std::optional<int64_t> f) { return f ? absl::StrCat(*f) : std::string("(an int64 overflow)"); };
  return TooLarge(what, absl::StrCat(factor(a), " x ", factor(b)), n, "a tensor");
}

absl::Status WorkItemBudget(std::string_view what, std::optional<int64_t> items) {
  if (items && *items <= kMaxWorkItems) return absl::OkStatus();
  if (!items) {
    return NotLowered(absl::StrCat(std::string(what), " needs more work items than the ", kMaxWorkItems,
                                   " a section holds"));
  }
  return NotLowered(absl::StrCat(std::string(what), " needs ", *items, " work items, more than the ", kMaxWorkItems,
                                 " a section holds"));
}

absl::Status TableBudget(std::string_view what, std::optional<int64_t> values) {
  if (values && *values <= kMaxFillValues) return absl::OkStatus();
  if (!values) {
    return NotLowered(absl::StrCat(std::string(what), " needs a compile-time table of more values than the ",
                                   kMaxFillValues, " a program embeds"));
  }
  return NotLowered(absl::StrCat(std::string(what), " needs a compile-time table of ", *values,
                                 " values, more than the ", kMaxFillValues, " a program embeds"));
}

absl::Status UnrollBudget(std::string_view what, std::string_view unit, std::optional<int64_t> count) {
  if (count && *count <= kMaxUnrolled) return absl::OkStatus();
  if (!count) {
    return NotLowered(absl::StrCat(std::string(what), " needs more ", std::string(unit), " than the ", kMaxUnrolled,
                                   " a lowering unrolls"));
  }
  return NotLowered(absl::StrCat(std::string(what), " needs ", *count, " ", std::string(unit), ", more than the ",
                                 kMaxUnrolled, " a lowering unrolls"));
}

absl::Status CheckSpecSizes(const proto::OpSpec& spec) {
  using K = proto::OpSpec;
  if (std::optional<int64_t> n = PointwiseN(spec)) {
    // The kind's name is the oneof field's (silu, int_requant): the same word the family's own messages use.
    const std::string kind = spec.GetDescriptor()->FindFieldByNumber(static_cast<int>(spec.kind_case()))->name();
    // The shape itself is the family's to read (PointwiseShape, after its own checks of n); its product is checked.
    return SizeBudget(kind).Tensor("operand x", {{"n", *n}}).status();
  }
  // Only a pointwise op takes a program shape: on any other kind it would be silently ignored.
  if (spec.shape_rows() != 0 || spec.shape_cols() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shape_rows x shape_cols = ", spec.shape_rows(), " x ", spec.shape_cols(),
        " is the program shape of a pointwise op; a ",
        spec.GetDescriptor()->FindFieldByNumber(static_cast<int>(spec.kind_case()))->name(),
        " spec takes its sizes from its own fields"));
  }
  switch (spec.kind_case()) {
    case K::kDecay: {
      const auto& d = spec.decay();
      return SizeBudget("decay").Tensor("each operand", {{"n", d.n()}}).status();
    }
    case K::kMatmul: {
      const auto& m = spec.matmul();
      return SizeBudget("matmul")
          .Tensor("operand a", {{"m", m.m()}, {"k", m.k()}})
          .Tensor("operand b", {{"k", m.k()}, {"n", m.n()}})
          .Tensor("the result", {{"m", m.m()}, {"n", m.n()}})
          .status();
    }
    case K::kTranspose: {
      const auto& t = spec.transpose();
      return SizeBudget("transpose").Tensor("operand x", {{"rows", t.rows()}, {"cols", t.cols()}}).status();
    }
    case K::kHeadSlice: {
      const auto& h = spec.head_slice();
      SizeBudget b("head_slice");
      b.Tensor("operand x", {{"n", h.n()}});
      // The result is n / every groups of `width`: a width past its group is the family's refusal, but the product
      // is formed first.
      if (h.every() > 0) b.Tensor("the result", {{"n / every", h.n() / h.every()}, {"width", h.width()}});
      return b.status();
    }
    case K::kJoin: {
      const auto& j = spec.join();
      return SizeBudget("join")
          .Tensor("operand a", {{"rows", j.rows()}, {"wa", j.wa()}})
          .Tensor("operand b", {{"rows", j.rows()}, {"wb", j.wb()}})
          .TensorOfSum("the result", {{"rows", j.rows()}}, {"wa", j.wa()}, {"wb", j.wb()})
          // rows x heads units, each a band of the result: more of them than the result has elements is a width
          // that does not divide (refused by the family), but the product is formed first.
          .Tensor("its units", {{"rows", j.rows()}, {"heads", j.heads()}})
          .status();
    }
    case K::kHeadMatmul: {
      const auto& h = spec.head_matmul();
      return SizeBudget("head_matmul")
          .Tensor("operand x", {{"m", h.m()}, {"heads", h.heads()}, {"a", h.a()}})
          .Tensor("operand w", {{"heads", h.heads()}, {"a", h.a()}, {"b", h.b()}})
          .Tensor("the result", {{"m", h.m()}, {"heads", h.heads()}, {"b", h.b()}})
          .status();
    }
    case K::kL2Norm: {
      const auto& l = spec.l2norm();
      return SizeBudget("l2norm").Tensor("operand x", {{"rows", l.rows()}, {"cols", l.cols()}}).status();
    }
    case K::kFusedRow: {
      const auto& f = spec.fused_row();
      return SizeBudget("fused_row").Tensor("operand x", {{"rows", f.rows()}, {"cols", f.cols()}}).status();
    }
    case K::kSoftmax: {
      const auto& s = spec.softmax();
      return SizeBudget("softmax").Tensor("operand x", {{"rows", s.rows()}, {"cols", s.cols()}}).status();
    }
    case K::kRope: {
      const auto& r = spec.rope();
      return SizeBudget("rope")
          .Tensor("operand x", {{"h", r.h()}, {"hd", r.hd()}})
          .Tensor("the tables", {{"cache", r.cache()}, {"half", r.half()}})
          .Tensor("the tables", {{"rows", r.rows()}, {"half", r.half()}})
          .status();
    }
    case K::kCausalConv: {
      const auto& c = spec.causal_conv();
      return SizeBudget("causal_conv")
          .Tensor("the ring", {{"taps", c.taps()}, {"chan", c.chan()}})
          .Tensor("operand x", {{"rows", c.rows()}, {"chan", c.chan()}})
          .status();
    }
    case K::kGatedDelta: {
      const auto& g = spec.gated_delta();
      return SizeBudget("gated_delta")
          .Tensor("the memory", {{"hv", g.hv()}, {"d", g.d()}, {"d", g.d()}})
          .Tensor("operands q and k", {{"rows", g.rows()}, {"hk", g.hk()}, {"d", g.d()}})
          .Tensor("operand v", {{"rows", g.rows()}, {"hv", g.hv()}, {"d", g.d()}})
          .status();
    }
    case K::kAttention: {
      const auto& a = spec.attention();
      return SizeBudget("attention")
          .Tensor("operand q", {{"rows", a.rows()}, {"h", a.h()}, {"hd", a.hd()}})
          .Tensor("operand k", {{"l", a.l()}, {"kv", a.kv()}, {"hd", a.hd()}})
          .Tensor("operand v", {{"l", a.l()}, {"kv", a.kv()}, {"vd", a.vd()}})
          .Tensor("the result", {{"rows", a.rows()}, {"h", a.h()}, {"vd", a.vd()}})
          .status();
    }
    case K::kLutAttention: {
      const auto& a = spec.lut_attention();
      return SizeBudget("lut_attention")
          .Tensor("operand q", {{"h", a.h()}, {"hd", a.hd()}})
          .Tensor("operand k", {{"l", a.l()}, {"kv", a.kv()}, {"hd", a.hd()}})
          .Tensor("the table", {{"table_len", a.table_len()}})
          .Tensor("the scores", {{"h", a.h()}, {"l", a.l()}})
          .status();
    }
    case K::kFullAttention: {
      const auto& f = spec.full_attention();
      return SizeBudget("full_attention")
          .Tensor("each operand", {{"t", f.t()}, {"h", f.h()}, {"hd", f.hd()}})
          .status();
    }
    case K::kRowGather: {
      const auto& g = spec.row_gather();
      return SizeBudget("row_gather").Tensor("the table", {{"rows", g.rows()}, {"cols", g.cols()}}).status();
    }
    case K::kRowsGather: {
      const auto& g = spec.rows_gather();
      return SizeBudget("rows_gather")
          .Tensor("the table", {{"rows", g.rows()}, {"cols", g.cols()}})
          .Tensor("the result", {{"count", g.count()}, {"cols", g.cols()}})
          .status();
    }
    case K::kSetRow: {
      const auto& s = spec.set_row();
      return SizeBudget("set_row")
          .Tensor("the table", {{"rows", s.rows()}, {"cols", s.cols()}})
          .Tensor("the rows written", {{"count", s.count()}, {"cols", s.cols()}})
          .status();
    }
    case K::kMoe: {
      const proto::MoeSpec& m = spec.moe();
      return SizeBudget("moe")
          .Tensor("the router", {{"d", m.d()}, {"ne", m.ne()}})
          .Tensor("the gate and up tables", {{"ne", m.ne()}, {"dff", m.dff()}, {"d", m.d()}})
          .Tensor("operand x", {{"tokens", m.tokens()}, {"d", m.d()}})
          .Tensor("a prefill's hidden rows", {{"tokens", m.tokens()}, {"ne", m.ne()}, {"dff", m.dff()}})
          .status();
    }
    case K::kMla: {
      const proto::MlaSpec& m = spec.mla();
      // Each part of a sum of widths is bounded, so the sums (nope + rope, rank + rope) cannot overflow.
      return SizeBudget("mla")
          .Tensor("operand q", {{"heads", m.heads()}, {"nope", m.nope()}})
          .Tensor("operand q", {{"heads", m.heads()}, {"rope", m.rope()}})
          .Tensor("operand w_uk", {{"heads", m.heads()}, {"nope", m.nope()}, {"rank", m.rank()}})
          .Tensor("operand w_uv", {{"heads", m.heads()}, {"rank", m.rank()}, {"vd", m.vd()}})
          .Tensor("the cache", {{"l", m.l()}, {"rank", m.rank()}})
          .Tensor("the cache", {{"l", m.l()}, {"rope", m.rope()}})
          .Tensor("the latent queries", {{"heads", m.heads()}, {"rank", m.rank()}})
          .Tensor("a prefill's latent queries", {{"rows", m.rows()}, {"heads", m.heads()}, {"rank", m.rank()}})
          .Tensor("a prefill's queries", {{"rows", m.rows()}, {"heads", m.heads()}, {"nope", m.nope()}})
          .Tensor("a prefill's queries", {{"rows", m.rows()}, {"heads", m.heads()}, {"rope", m.rope()}})
          .status();
    }
    case K::kAttentionBackward: {
      const proto::AttentionBackwardSpec& a = spec.attention_backward();
      const int64_t vd = a.vd() != 0 ? a.vd() : a.hd();
      const int64_t l = a.l() != 0 ? a.l() : a.rows();
      return SizeBudget("attention_backward")
          .Tensor("operand q", {{"rows", a.rows()}, {"h", a.h()}, {"hd", a.hd()}})
          .Tensor("operand o", {{"rows", a.rows()}, {"h", a.h()}, {"vd", vd}})
          .Tensor("operand k", {{"l", l}, {"kv", a.kv()}, {"hd", a.hd()}})
          .Tensor("operand v", {{"l", l}, {"kv", a.kv()}, {"vd", vd}})
          .Tensor("a query head's dk", {{"l", l}, {"h", a.h()}, {"hd", a.hd()}})
          .Tensor("a query head's dv", {{"l", l}, {"h", a.h()}, {"vd", vd}})
          .status();
    }
    case K::kScan:
      return SizeBudget("scan").Tensor("operand x", {{"steps", spec.scan().steps()}, {"lanes", spec.scan().lanes()}})
          .status();
    case K::kArgmax:
      return SizeBudget("argmax").Tensor("operand x", {{"n", spec.argmax().n()}}).status();
    default: return absl::OkStatus();
  }
}

}  // namespace spatial

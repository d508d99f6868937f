// Shared by the attention tests: an AttentionSpec built from a compact case, lowered through the flash entry points
// with the geometry from_attention builds (AttentionShapeOf -> FlashGeometryOf), validated, certified on its target
// (and every shipped target that does not refuse it), run on the f64 VM and compared with the naive reference.
#ifndef TESTS_LOWERINGS_ATTENTION_CHECK_H_
#define TESTS_LOWERINGS_ATTENTION_CHECK_H_

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "certify/certify.h"
#include "gtest/gtest.h"
#include "lowerings/attention/flash.h"
#include "lowerings/attention/geometry.h"
#include "lowerings/attention/grouped_decode.h"
#include "lowerings/attention/reference_attention.h"
#include "tests/lowerings/harness.h"

namespace spatial::testing {

enum class Pos { kNone, kLiteral, kNamed };
enum class Form { kFlash, kGrouped, kFlashForm };

struct AttnCase {
  int64_t h = 1, kv = 1, hd = 8, vd = 8, l = 8, rows = 1;
  Pos pos = Pos::kNone;
  int64_t p = 0;        // the literal P, or the named operand's value
  int64_t sliding = 0;  // a sliding window of this many positions
  int64_t chunked = 0;  // a chunked window of this many positions
  bool sinks = false;
  double scale = 0.0;  // 0: 1/sqrt(hd)
  double cap = 0.0;    // 0: none
  proto::AttentionSpec::ProbsExp probs_exp = proto::AttentionSpec::PROBS_EXP_TARGET;
  int64_t kv_chunk = 0;  // positions a flash block covers; 0: the lowering's choice
};

inline std::string CaseText(const AttnCase& c) {
  return "h=" + std::to_string(c.h) + " kv=" + std::to_string(c.kv) + " hd=" + std::to_string(c.hd) +
         " vd=" + std::to_string(c.vd) + " l=" + std::to_string(c.l) + " rows=" + std::to_string(c.rows) +
         " pos=" + std::to_string(static_cast<int>(c.pos)) + " p=" + std::to_string(c.p) +
         " sliding=" + std::to_string(c.sliding) + " chunked=" + std::to_string(c.chunked) + (c.sinks ? " sinks" : "") +
         (c.cap != 0 ? " cap=" + std::to_string(c.cap) : "") +
         (c.kv_chunk != 0 ? " kv_chunk=" + std::to_string(c.kv_chunk) : "");
}

// Result "y", operands q, k, v, [pos], [sinks].
inline proto::OpSpec AttnSpec(const AttnCase& c) {
  proto::OpSpec s;
  s.set_out("y");
  for (const char* o : {"q", "k", "v"}) s.add_operands()->set_name(o);
  proto::AttentionSpec* a = s.mutable_attention();
  a->set_h(c.h);
  a->set_kv(c.kv);
  a->set_hd(c.hd);
  a->set_vd(c.vd);
  a->set_l(c.l);
  a->set_rows(c.rows);
  if (c.pos == Pos::kLiteral) a->mutable_pos()->set_literal(c.p);
  if (c.pos == Pos::kNamed) {
    a->mutable_pos()->set_named("pos");
    s.add_operands()->set_name("pos");
  }
  if (c.sliding) a->mutable_window()->set_sliding(c.sliding);
  if (c.chunked) a->mutable_window()->set_chunked(c.chunked);
  if (c.sinks) {
    a->set_sinks(true);
    s.add_operands()->set_name("sinks");
  }
  a->set_scale(c.scale);
  a->set_softcap(c.cap);
  a->set_probs_exp(c.probs_exp);
  a->set_kv_chunk(c.kv_chunk);
  return s;
}

// The composition `form` lowers `spec` to on `target`, its geometry built as from_attention builds it.
inline absl::StatusOr<Composition> LowerAttention(const proto::OpSpec& spec, const Target& target, Form form) {
  absl::StatusOr<AttentionShape> shape = AttentionShapeOf(spec);
  if (!shape.ok()) return shape.status();
  absl::StatusOr<AttentionNames> names = AttentionNamesOf(spec);
  if (!names.ok()) return names.status();
  const FlashGeometry g = FlashGeometryOf(*shape);
  switch (form) {
    case Form::kFlash: return FlashAttention(*names, g, shape->tag, target);
    case Form::kGrouped: return GroupedDecodeAttention(*names, g, shape->tag, target);
    case Form::kFlashForm: return FlashFormAttention(*names, g, shape->tag, target);
  }
  return absl::InternalError("unknown form");
}

// Every input of `c`: Q, K, V and sinks uniform in [-1, 1) (sinks in [-2, 2)), the position `p`.
inline TensorMap AttnInputs(const Composition& c, int64_t p, uint64_t seed) {
  return MakeInputs(
      c,
      [p](const std::string& name, Rng& r) {
        if (name == "pos") return static_cast<double>(p);
        if (name == "sinks") return r.Real(-2, 2);
        return r.Real(-1, 1);
      },
      seed);
}

// Certifies `c` on `target`: every diagnostic fails the test.
inline void ExpectAttnCertifies(const Composition& c, const Target& target) {
  CertifyResult r = Certify(c, target);
  for (const proto::Diagnostic& d : r.diagnostics) {
    ADD_FAILURE() << "certify on " << target.name() << ": " << FormatDiagnostic(d, c.name);
  }
}

// Runs `c` on the VM and compares "y" with the naive reference: |got - want| <= 1e-12 * max(|want|, 1), or both NaN
// where `nan_ok` says a NaN is expected.
inline void ExpectMatchesReference(const proto::OpSpec& spec, const Composition& c, const Target& target,
                                   const TensorMap& inputs, bool nan_ok = false) {
  absl::StatusOr<TensorMap> vm = RunComposition(c, target.tile_rows(), target.tile_cols(), inputs);
  ASSERT_TRUE(vm.ok()) << vm.status();
  absl::StatusOr<TensorMap> ref = ReferenceAttention(spec, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  const TensorData& got = vm->at("y");
  const TensorData& want = ref->at("y");
  ASSERT_EQ(got.rows, want.rows);
  ASSERT_EQ(got.cols, want.cols);
  int bad = 0;
  for (size_t i = 0; i < want.values.size() && bad < 5; ++i) {
    if (nan_ok && std::isnan(want.values[i]) && std::isnan(got.values[i])) continue;
    if (!Near(got.values[i], want.values[i], 1e-12)) {
      ++bad;
      ADD_FAILURE() << "element " << i << ": VM " << got.values[i] << ", reference " << want.values[i];
    }
  }
}

// Lowers `c` on every shipped target through `form`: each either refuses (IsRefusal) or validates and certifies.
// Returns how many certified.
inline int CertifyOnShipped(const proto::OpSpec& spec, Form form) {
  int certified = 0;
  for (const char* name : {"test_tiny", "wormhole_n150", "blackhole_p150", "grayskull_e150"}) {
    const Target& target = Shipped(name);
    absl::StatusOr<Composition> c = LowerAttention(spec, target, form);
    if (!c.ok()) {
      EXPECT_TRUE(IsRefusal(c.status())) << name << ": " << c.status();
      continue;
    }
    EXPECT_TRUE(ValidateComposition(*c, target.tile_rows(), target.tile_cols()).ok()) << name;
    ExpectAttnCertifies(*c, target);
    ++certified;
  }
  return certified;
}

// The whole check of one case on `target`: lower, validate, certify, VM against the reference. Returns the program.
inline Composition CheckAttention(const AttnCase& ac, const Target& target, Form form, uint64_t seed = 7) {
  SCOPED_TRACE(CaseText(ac) + " on " + target.name());
  const proto::OpSpec spec = AttnSpec(ac);
  absl::StatusOr<Composition> c = LowerAttention(spec, target, form);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return {};
  absl::Status valid = ValidateComposition(*c, target.tile_rows(), target.tile_cols());
  EXPECT_TRUE(valid.ok()) << valid;
  ExpectAttnCertifies(*c, target);
  ExpectMatchesReference(spec, *c, target, AttnInputs(*c, ac.p, seed));
  return *c;
}

// The section of `c` whose name contains `part` (nullptr when none does).
inline const Section* SectionNamed(const Composition& c, const std::string& part) {
  for (const Section& s : c.sections) {
    if (s.name.find(part) != std::string::npos) return &s;
  }
  return nullptr;
}

}  // namespace spatial::testing

#endif  // TESTS_LOWERINGS_ATTENTION_CHECK_H_

// The three-way check of DESIGN §10 for EVERY lowered op kind, end to end through the public entry points, at a few
// small shapes on test_tiny and wormhole_n150:
//   1. Lower(spec) validates, and Certify accepts it on every shipped target that does not refuse the op (a refusal
//      is fine; a certifier diagnostic is a failure);
//   2. the f64 VM equals ReferenceOp(spec) to f64 rounding (|vm - ref| <= 1e-12 * max(|ref|, 1)), exactly for
//      Exact-claimed programs and pure data movement;
//   3. Simulate (forked, SystemC timing) under MakeTargetModel(target) stays within the kind's tolerance of the exact
//      VM (tolerances.cc: relative L2, justified per kind), bit-equal for Exact-claimed outputs.
// The kinds come from LoweredKinds(): a kind with no entry in the tolerance table fails, so every new family gets a
// measured, justified tolerance. A tolerance more than kMaxHeadroom times the largest error measured over its cases
// fails too: a bound that loose could not catch a regression of the numerics.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "lowerings/reference.h"
#include "lowerings/registry.h"
#include "sim/numerics/target_model.h"
#include "sim/simulate.h"
#include "sim/vm/vm.h"
#include "spatial/proto_file.h"
#include "spatial/validate.h"
#include "tests/integration/tolerances.h"
#include "tests/lowerings/three_way.h"

namespace spatial::integration {
namespace {

using testing::CertifyWhereLowered;
using testing::MakeInputs;
using testing::Near;
using testing::Shipped;

bool AllSectionsExact(const Composition& c) {
  return std::all_of(c.sections.begin(), c.sections.end(), [](const Section& s) { return s.claim.exact; });
}

TEST(OpToleranceTable, EveryLoweredKindHasAnEntry) {
  const std::vector<std::string> kinds = LoweredKinds();
  ASSERT_FALSE(kinds.empty());
  for (const std::string& kind : kinds) {
    EXPECT_NE(FindTolerance(kind), nullptr)
        << "op kind '" << kind << "' is lowered but has no tolerance in tests/integration/tolerances.cc: add an entry "
        << "with small cases on test_tiny and wormhole_n150 and a tolerance set from the measured error";
  }
}

TEST(OpToleranceTable, EveryEntryIsALoweredKindWithCasesOnBothTargets) {
  const std::vector<std::string> kinds = LoweredKinds();
  for (const OpTolerance& t : ToleranceTable()) {
    SCOPED_TRACE(t.kind);
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), t.kind), kinds.end()) << "stale entry: not a lowered kind";
    EXPECT_GE(t.rel_l2, 0.0);
    EXPECT_LT(t.rel_l2, 0.1);  // anything looser is not a bf16 tolerance
    ASSERT_NE(t.cases, nullptr);
    std::set<std::string> targets;
    for (const OpCase& c : t.cases()) {
      EXPECT_EQ(OpKindName(c.spec), t.kind) << c.spec.ShortDebugString();
      targets.insert(c.target);
    }
    EXPECT_EQ(targets, (std::set<std::string>{"test_tiny", "wormhole_n150"}));
  }
}

// The shipped examples (one OpSpec per lowered kind, at real model shapes) name kinds the table covers, and lower and
// certify on every shipped target that does not refuse them.
TEST(OpToleranceTable, EveryExampleIsCoveredAndCertifies) {
  const std::filesystem::path dir = std::filesystem::path(SPATIAL_SOURCE_DIR) / "examples" / "ops";
  int examples = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".textproto") continue;
    SCOPED_TRACE(entry.path().string());
    proto::OpSpec spec;
    absl::Status st = ReadProtoFile(entry.path().string(), &spec);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_NE(FindTolerance(OpKindName(spec)), nullptr) << "example of kind '" << OpKindName(spec) << "'";
    testing::Outcomes o = CertifyWhereLowered(spec);
    EXPECT_NE(std::find(o.certified.begin(), o.certified.end(), "wormhole_n150"), o.certified.end())
        << "the example does not lower on wormhole_n150";
    ++examples;
  }
  EXPECT_GE(examples, 10);
}

class KindTest : public ::testing::TestWithParam<std::string> {};

TEST_P(KindTest, ThreeWayWithinTolerance) {
  const std::string kind = GetParam();
  const OpTolerance* tol = FindTolerance(kind);
  ASSERT_NE(tol, nullptr) << "no tolerance entry for '" << kind << "'";
  const std::vector<OpCase> cases = tol->cases();
  ASSERT_GE(cases.size(), 2u);
  double worst = 0.0;  // the largest relative L2 of an Approx-claimed output over the cases
  bool any_approx = false;
  // Every case runs with 3 seeds; SPATIAL_TOLERANCE_SEEDS=N asks for N (the table was measured with 30).
  int seeds = 3;
  if (const char* env = std::getenv("SPATIAL_TOLERANCE_SEEDS"); env != nullptr) seeds = std::max(1, std::atoi(env));
  for (size_t run = 0; run < cases.size() * seeds; ++run) {
    const size_t i = run % cases.size();
    const uint64_t seed = 1000 + run;
    // Fresh cases per run: a draw may keep state (rope's table rows count positions from 0).
    const std::vector<OpCase> fresh = tol->cases();
    const OpCase& k = fresh[i];
    SCOPED_TRACE(absl::StrCat(k.spec.ShortDebugString(), " on ", k.target, " seed ", seed));
    const Target& target = Shipped(k.target);
    absl::StatusOr<Composition> c = Lower(k.spec, target);
    ASSERT_TRUE(c.ok()) << c.status();
    absl::Status valid = ValidateComposition(*c, target.tile_rows(), target.tile_cols());
    ASSERT_TRUE(valid.ok()) << valid;

    // 1. Certified wherever it lowers, including here.
    testing::Outcomes o = CertifyWhereLowered(k.spec);
    EXPECT_NE(std::find(o.certified.begin(), o.certified.end(), k.target), o.certified.end());

    // 2. The VM against the op reference, on the values as drawn (the reference may assume exact tables: rope's
    // cos/sin rows).
    const TensorMap inputs = MakeInputs(*c, k.draw, seed);
    absl::StatusOr<TensorMap> vm = RunComposition(*c, target.tile_rows(), target.tile_cols(), inputs);
    ASSERT_TRUE(vm.ok()) << vm.status();
    absl::StatusOr<TensorMap> ref = ReferenceOp(k.spec, inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(vm->count(k.spec.out()) && ref->count(k.spec.out())) << "no result '" << k.spec.out() << "'";
    const TensorData& got = vm->at(k.spec.out());
    const TensorData& want = ref->at(k.spec.out());
    ASSERT_EQ(got.values.size(), want.values.size());
    const bool exact = AllSectionsExact(*c);
    const double vm_tol = exact ? 0.0 : tol->vm_tol;
    int bad = 0;
    for (size_t e = 0; e < got.values.size() && bad < 5; ++e) {
      if (!Near(got.values[e], want.values[e], vm_tol)) {
        ++bad;
        ADD_FAILURE() << "VM vs reference, element " << e << ": " << got.values[e] << " vs " << want.values[e]
                      << " (tolerance " << vm_tol << ")";
      }
    }

    // 3. The simulator under the target's numerics against the exact VM. The inputs are first stored at their
    // tensors' precisions under the target's rounding, as the op before would have stored them, so the exact VM
    // and the simulator start from the same values and the error is what the program adds.
    std::unique_ptr<ValueModel> model = MakeTargetModel(target);
    TensorMap stored = inputs;
    for (auto& [name, t] : stored)
      model->StoreRound(t.precision, t.values.data(), static_cast<int64_t>(t.values.size()));
    // A program whose every section claims Exact must reproduce the VM bit for bit; any other is held to the kind's
    // tolerance on every result (a section that only moves values claims Exact for itself, but what it moves may
    // have been rounded upstream).
    SimOptions so;
    so.model = model.get();
    so.compare_vm = true;
    for (const Tensor& t : CompositionResults(*c)) so.tolerance[t.name] = tol->rel_l2;
    absl::StatusOr<SimResult> sim = Simulate(*c, target, stored, so);
    ASSERT_TRUE(sim.ok()) << sim.status();
    const proto::SimReport& rep = sim->report;
    EXPECT_GT(rep.total_cycles(), 0);
    EXPECT_EQ(rep.numerics(), "target");
    ASSERT_EQ(rep.errors_size(), static_cast<int>(CompositionResults(*c).size()));
    bool saw_out = false;
    for (const proto::OutputError& e : rep.errors()) {
      SCOPED_TRACE(e.ShortDebugString());
      saw_out |= e.tensor() == k.spec.out();
      EXPECT_GT(e.elements(), 0);
      EXPECT_EQ(e.mismatched_nans(), 0);
      if (exact) {
        EXPECT_EQ(e.max_abs(), 0.0) << "an Exact-claimed output must be bit-equal to the VM";
      } else {
        any_approx = true;
        worst = std::max(worst, e.rel_l2());
        if (std::getenv("SPATIAL_TOLERANCE_VERBOSE") != nullptr) {
          std::printf("  %s %s on %s seed %llu: %s rel L2 %.3e\n", kind.c_str(), k.spec.ShortDebugString().c_str(),
                      k.target.c_str(), static_cast<unsigned long long>(seed), e.tensor().c_str(), e.rel_l2());
        }
        EXPECT_LE(e.rel_l2(), tol->rel_l2) << "outside the tolerance of '" << kind << "'";
      }
      EXPECT_TRUE(e.within());
    }
    EXPECT_TRUE(saw_out) << "no error entry for the result '" << k.spec.out() << "'";
  }
  std::printf("measured %-14s max rel L2 %.3e over %zu runs (tolerance %.3e)\n", kind.c_str(), worst,
              cases.size() * seeds, tol->rel_l2);
  if (!any_approx) {
    EXPECT_EQ(tol->rel_l2, 0.0) << "every output of '" << kind << "' is Exact-claimed: its tolerance is 0";
  } else if (worst == 0.0) {
    EXPECT_EQ(tol->rel_l2, 0.0) << "'" << kind << "' showed no rounding at all: tighten its tolerance to 0";
  } else {
    EXPECT_LE(tol->rel_l2, kMaxHeadroom * worst)
        << "the tolerance of '" << kind << "' is more than " << kMaxHeadroom << "x the largest measured error "
        << worst << ": tighten it";
  }
}

INSTANTIATE_TEST_SUITE_P(Lowered, KindTest, ::testing::ValuesIn(LoweredKinds()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace spatial::integration

// Property: a program the certifier accepts never faults on the f64 VM for inputs inside the ranges its guards
// admit. Random small programs (bands with shifted maps, gathered tiles, gathered elements, folds with carries and
// run-time trips, several items) are generated; some certify, some do not; every certified one runs clean.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "certify/certify.h"
#include "gtest/gtest.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/tensor_data.h"
#include "tests/certify/test_programs.h"

#if SPATIAL_HAVE_VM
#include "sim/vm/vm.h"
#endif

namespace spatial {
namespace {

using certify_testing::Explain;
using certify_testing::Tiny;

class Rng {
 public:
  explicit Rng(uint64_t seed) : g_(seed) {}
  int64_t In(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g_); }
  bool Coin() { return In(0, 1) == 1; }
  double Real() { return std::uniform_real_distribution<double>(-2.0, 2.0)(g_); }

 private:
  std::mt19937_64 g_;
};

// The admitted range of each integer input, so random inputs can be drawn inside it.
struct Admitted {
  std::string tensor;
  int64_t lo, hi;
};

struct RandomProgram {
  Composition c;
  std::vector<Admitted> admitted;
};

// Every range choice is made safe unless it is the one fault this program plants (about half plant one), so
// both certified and rejected programs are common.
enum Plant { kXLoad, kGather, kElemBase, kElemModulus, kBand, kTrip, kNone };

RandomProgram Generate(Rng& r) {
  RandomProgram out;
  const Plant plant = static_cast<Plant>(std::min<int64_t>(r.In(0, 11), kNone));
  Template t(8, 8);
  const int64_t items = r.In(1, 3);
  const int64_t nb = r.In(1, 3);  // fold blocks
  const bool fold = nb > 1;
  const bool trip = fold && r.Coin();

  // One tile of x per item (and block): base + cx * ITEM_X + ck * KBLOCK, inside x unless planted.
  const int64_t xbase = r.In(0, 2), cx = r.In(0, 2), ck = fold ? r.In(0, 1) : 0;
  const int64_t x_reach = xbase + cx * (items - 1) + ck * (nb - 1);
  const int64_t xt = plant == kXLoad ? x_reach : x_reach + 1 + r.In(0, 1);  // tiles of x
  const TensorId x = t.AddTensor("x", TensorRole::kInput, 1, 8 * std::max<int64_t>(xt, 1), Precision::kBf16,
                                 TensorInit::External());
  const TensorId y = t.AddTensor("y", TensorRole::kOutput, 1, 8 * items, Precision::kBf16, TensorInit::Zero());
  const BufferId xb = t.AddBuffer("x_page", 1, Precision::kBf16);
  const BufferId gb = t.AddBuffer("g_page", 1, Precision::kBf16);
  const BufferId eb = t.AddBuffer("e_idx", 1, Precision::kInt32);
  const BufferId sum = t.AddBuffer("sum", 1, Precision::kFp32);
  const BufferId res = t.AddBuffer("res", 1, Precision::kBf16);

  // Prologue: a gathered tile of `table` at gbase + tile_stride * v, v admitted in [lo, hi]; an element index.
  const int64_t lo = r.In(0, 1), hi = lo + r.In(0, 3), stride = r.In(1, 2), gbase = r.In(0, 1);
  const int64_t g_reach = gbase + stride * hi;
  const int64_t tt = plant == kGather ? g_reach : g_reach + 1 + r.In(0, 1);
  const TensorId table = t.AddTensor("table", TensorRole::kInput, 1, 8 * tt, Precision::kBf16, TensorInit::External());
  const TensorId ti = t.AddTensor("tile_idx", TensorRole::kInput, 1, 1, Precision::kInt32, TensorInit::External());
  const TensorId ei = t.AddTensor("elem_idx", TensorRole::kInput, 1, 1, Precision::kInt32, TensorInit::External());
  const BufferId tb = t.AddBuffer("t_idx", 1, Precision::kInt32);
  out.admitted.push_back({"tile_idx", lo, hi});
  const StageId lt = t.AddLoad("load_tile_idx", ti, {}, 1, tb);
  const StageId gather = t.AddLoadPattern(
      "gather", table, AccessPattern{TileAddr{gbase, {}, IndirectTile{tb, stride, lo, hi}}, 1, 1, 1, 1}, gb);
  t.AddEdge(lt, tb, gather);
  // A 64-element page: the gathered element base + v is inside it for base 0 and modulus <= 64.
  const int64_t modulus = plant == kElemModulus ? r.In(65, 72) : r.In(1, 64);
  const int64_t ebase = plant == kElemBase ? -1 : 0;
  out.admitted.push_back({"elem_idx", 0, modulus - 1});
  t.AddLoad("load_elem_idx", ei, {}, 1, eb);

  BufferId carry = -1;
  if (fold) {
    carry = t.AddScratchDeep("carry", 2, 1, Precision::kFp32);
    t.AddGeneric("init", TileSpace(8, 8), {}, {}, IdentMap(8), Const(0.0), carry);
    t.SetPhase(Phase::kBody);
  }
  std::vector<Term> steps = {{LoopVar::kItemX, cx}};
  if (fold) steps.push_back({LoopVar::kKBlock, ck});
  t.AddLoadBlockAt("load_x", x, xbase, steps, {}, xb);

  // Bands over COL: band [start, end) reads the x page at row * 8 + c + base, inside the page exactly when
  // base lies in [-start, 8 - end] (outside it in the band that is planted).
  const int64_t bands = r.In(1, 3);
  std::vector<int64_t> cuts;
  for (int64_t k = 1; k < bands; ++k) cuts.push_back(r.In(1, 7));
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  const int64_t bad_band = r.In(0, static_cast<int64_t>(cuts.size()));
  std::vector<BufferId> ins;
  std::vector<ElemAccess> maps;
  std::vector<std::pair<int64_t, Body>> body_bands;
  int64_t start = 0;
  for (size_t k = 0; k <= cuts.size(); ++k) {
    const int64_t end = k < cuts.size() ? cuts[k] : 8;
    int64_t base = r.In(-start, 8 - end);
    if (plant == kBand && static_cast<int64_t>(k) == bad_band) base = r.Coin() ? -start - 1 : 8 - end + 1;
    ins.push_back(xb);
    maps.push_back(Map2(base, 8, 1));
    body_bands.emplace_back(end, Op(static_cast<int>(ins.size() - 1)));
    start = end;
  }
  const int slot_e = static_cast<int>(ins.size());
  ins.push_back(eb);
  maps.push_back(Fixed(0));
  const int slot_g = static_cast<int>(ins.size());
  ins.push_back(gb);
  maps.push_back(WithIndirect(Fixed(ebase), slot_e, 1, modulus));
  const int slot_t = static_cast<int>(ins.size());
  ins.push_back(gb);
  maps.push_back(IdentMap(8));
  Body body = Add(Add(Banded(body_bands), Op(slot_g)), Op(slot_t));
  t.AddGeneric("mix", TileSpace(8, 8), ins, maps, IdentMap(8), body, sum);

  if (fold) {
    t.AddGeneric("fold", TileSpace(8, 8), {sum, carry}, {IdentMap(8), IdentMap(8)}, IdentMap(8), Add(Op(0), Op(1)),
                 carry);
    t.SetPhase(Phase::kEpilogue);
    t.AddGeneric("copy", TileSpace(8, 8), {carry}, {IdentMap(8)}, IdentMap(8), Op(0), res);
    if (trip) {
      // ceil((pos + bias) / 8) <= nb exactly when pos <= 8 * nb - bias.
      const TensorId pos = t.AddTensor("pos", TensorRole::kInput, 1, 1, Precision::kInt32, TensorInit::External());
      const int64_t bias = r.In(0, 7), plo = r.In(0, 8);
      const int64_t phi = plant == kTrip ? 8 * nb - bias + r.In(1, 8) : r.In(plo, 8 * nb - bias);
      t.SetTrip(Trip{pos, 0, plo, phi, bias, 8}, nb);
      out.admitted.push_back({"pos", plo, phi});
    } else {
      t.Fold(nb);
    }
  } else {
    t.AddGeneric("copy", TileSpace(8, 8), {sum}, {IdentMap(8)}, IdentMap(8), Op(0), res);
  }
  t.AddStore("store_y", y, {{LoopVar::kItemX, 1}}, 1, res);

  Section s = t.Finish("random", ItemsPerTile(items), Precision::kFp32, NumericsClaim::Approx("sums in fp32"));
  out.c = certify_testing::Compose(std::move(s));
  return out;
}

#if SPATIAL_HAVE_VM
TensorMap RandomInputs(const RandomProgram& p, Rng& r) {
  TensorMap inputs;
  for (const Tensor& t : CompositionInputs(p.c)) {
    TensorData d;
    d.rows = t.rows;
    d.cols = t.cols;
    d.precision = t.precision;
    for (int64_t i = 0; i < t.rows * t.cols; ++i) {
      double v = r.Real();
      for (const Admitted& a : p.admitted) {
        if (a.tensor == t.name) v = static_cast<double>(r.In(a.lo, a.hi));
      }
      d.values.push_back(v);
    }
    inputs.emplace(t.name, std::move(d));
  }
  return inputs;
}

TEST(Property, CertifiedProgramsNeverFaultOnAdmittedInputs) {
  Rng r(20240611);
  int certified = 0, rejected = 0;
  for (int n = 0; n < 400; ++n) {
    RandomProgram p = Generate(r);
    CertifyResult cert = Certify(p.c, Tiny());
    if (!cert.ok()) {
      ++rejected;
      continue;
    }
    ++certified;
    for (int run = 0; run < 4; ++run) {
      absl::StatusOr<TensorMap> out = RunComposition(p.c, 8, 8, RandomInputs(p, r));
      ASSERT_TRUE(out.ok()) << "program " << n << " certified but faulted: " << out.status();
    }
  }
  RecordProperty("certified", certified);
  RecordProperty("rejected", rejected);
  // Both outcomes must be common, or the property says little.
  EXPECT_GE(certified, 60);
  EXPECT_GE(rejected, 60);
}

// The other direction, on the same generator: a program rejected for an address (not for a resource) has an
// input inside its admitted ranges that makes the VM fault, found by trying the range's ends.
TEST(Property, AddressRejectionsAreRealFaults) {
  Rng r(777);
  int checked = 0;
  for (int n = 0; n < 400 && checked < 40; ++n) {
    RandomProgram p = Generate(r);
    CertifyResult cert = Certify(p.c, Tiny());
    bool address_only = !cert.ok();
    for (const auto& d : cert.diagnostics) address_only = address_only && d.code() == "INDEX_OUT_OF_RANGE";
    if (!address_only) continue;
    ++checked;
    bool faulted = false;
    // Extreme admitted values (all lows, all highs, mixed) and random ones.
    for (int trial = 0; trial < 24 && !faulted; ++trial) {
      TensorMap in = RandomInputs(p, r);
      for (size_t k = 0; k < p.admitted.size(); ++k) {
        const Admitted& a = p.admitted[k];
        auto it = in.find(a.tensor);
        if (it == in.end()) continue;
        if (trial < 8) it->second.values[0] = static_cast<double>(((trial >> (k % 3)) & 1) ? a.hi : a.lo);
      }
      faulted = !RunComposition(p.c, 8, 8, in).ok();
    }
    EXPECT_TRUE(faulted) << "program " << n << " was rejected but never faulted:\n" << Explain(cert);
  }
  EXPECT_GE(checked, 20);
}
#else
TEST(Property, NeedsTheVm) { GTEST_SKIP() << "sim/vm is not built: the property test needs RunComposition"; }
#endif

}  // namespace
}  // namespace spatial

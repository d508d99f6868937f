// Malformed and hostile programs: every one is an error status naming what is wrong, never a crash or a hang.
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/vm/vm.h"
#include "spatial/builder.h"
#include "spatial/maps.h"

namespace spatial {
namespace {

constexpr Precision kF = Precision::kFp32;
constexpr int64_t kBig = std::numeric_limits<int64_t>::max();

// load x -> a; g: b = a * 2 (+ a guard slot reading a); store b -> y. Stages #0 load, #1 g, #2 store.
Composition Valid() {
  Template t(4, 4);
  TensorId x = t.AddTensor("x", TensorRole::kInput, 1, 6, kF, TensorInit::External());
  TensorId y = t.AddTensor("y", TensorRole::kOutput, 1, 6, kF, TensorInit::Zero());
  BufferId a = t.AddBuffer("a", 2, kF);
  BufferId b = t.AddBuffer("b", 2, kF);
  t.AddLoad("load", x, {}, 2, a);
  t.AddGeneric("g", FlatSpace(6), {a}, {At(0)}, At(0), Mul(Op(0), Const(2)), b);
  t.AddStore("store", y, {}, 2, b);
  return Single(t.Finish("s", WholeRow(2), kF, NumericsClaim::Exact()));
}

TensorMap Input() { return {{"x", TensorData{1, 6, kF, {1, 2, 3, 4, 5, 6}}}}; }

Section& S(Composition& c) { return c.sections[0]; }
Generic& G(Composition& c) { return std::get<Generic>(S(c).stages[1].op); }
Load& L(Composition& c) { return std::get<Load>(S(c).stages[0].op); }

// Runs `c` and expects an error whose message starts with `prefix` and contains `text`.
void ExpectError(const Composition& c, const std::string& prefix, const std::string& text, int64_t tr = 4,
                 int64_t tc = 4) {
  auto out = RunComposition(c, tr, tc, Input());
  ASSERT_FALSE(out.ok()) << "expected " << prefix << " " << text;
  std::string msg(out.status().message());
  EXPECT_EQ(msg.rfind(prefix, 0), 0u) << msg;
  EXPECT_NE(msg.find(text), std::string::npos) << msg;
}

TEST(VmHostile, TheBaseProgramRuns) {
  auto out = RunComposition(Valid(), 4, 4, Input());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("y").values, (std::vector<double>{2, 4, 6, 8, 10, 12}));
}

TEST(VmHostile, BufferAndTensorIdsOutOfRange) {
  Composition c = Valid();
  S(c).stages[1].ins[0] = 99;
  ExpectError(c, "BadProgram: section 's' stage 'g' (#1)", "input buffer id 99 out of range (2 buffers)");
  c = Valid();
  S(c).stages[0].outs[0] = -1;
  ExpectError(c, "BadProgram", "output buffer id -1 out of range");
  c = Valid();
  L(c).tensor = -1;
  ExpectError(c, "BadProgram: section 's' stage 'load' (#0)", "tensor id -1 out of range (2 tensors)");
  c = Valid();
  std::get<Store>(S(c).stages[2].op).tensor = 7;
  ExpectError(c, "BadProgram", "tensor id 7 out of range");
  c = Valid();
  S(c).stages[2].ins.clear();
  ExpectError(c, "BadProgram", "a Store has no input buffer");
  c = Valid();
  S(c).stages[0].outs.clear();
  ExpectError(c, "BadProgram", "a Load has 1 output buffer, not 0");
  c = Valid();
  L(c).pattern.origin.indirect = IndirectTile{5, 1, 0, 0};
  ExpectError(c, "BadProgram", "index buffer id 5 out of range");
  c = Valid();
  S(c).stages[1].phase = static_cast<Phase>(9);
  ExpectError(c, "BadProgram", "unknown phase 9");
}

TEST(VmHostile, GenericSlotsAndMaps) {
  Composition c = Valid();
  G(c).body = Op(5);
  ExpectError(c, "BadProgram: section 's' stage 'g' (#1)", "body reads slot 5 but the stage has 1 input slots");
  c = Valid();
  G(c).body = Select(Pred::LtOperand(LoopVar::kCol, 3), Op(0), Op(0));
  ExpectError(c, "BadProgram", "Select compares with slot 3");
  c = Valid();
  G(c).ins[0] = WithIndirect(At(0), 4, 1, 2);
  ExpectError(c, "BadProgram", "slot 0: indirect operand 4 is not an input slot");
  c = Valid();
  G(c).ins[0] = WithIndirect(At(0), 0, 1, 2);  // slot 0's index is read through slot 0
  ExpectError(c, "BadProgram", "slot 0: its indirect index chain does not end");
  c = Valid();
  G(c).ins.push_back(At(0));  // two maps, one buffer
  ExpectError(c, "BadProgram", "Generic has 2 input maps but 1 input buffers");
  c = Valid();
  G(c).body = Body();
  ExpectError(c, "BadProgram", "Generic has no body");
  c = Valid();
  G(c).body = Add(Op(0), Body());
  ExpectError(c, "BadProgram", "body has an undefined node");
  c = Valid();
  S(c).stages[1].outs.push_back(0);
  ExpectError(c, "BadProgram", "a Generic has 1 output buffer, not 2");
}

TEST(VmHostile, IterationSpaces) {
  Composition c = Valid();
  G(c).iters = {{LoopVar::kItemX, 4, IterKind::kParallel}};
  ExpectError(c, "BadProgram", "iteration axis 0 is ITEM_X; a Generic iterates ROW, COL or K");
  c = Valid();
  G(c).iters = {{LoopVar::kCol, -3, IterKind::kParallel}};
  ExpectError(c, "BadProgram", "negative extent -3");
  c = Valid();
  G(c).iters = {{LoopVar::kCol, 4, IterKind::kParallel}, {LoopVar::kCol, 4, IterKind::kParallel}};
  ExpectError(c, "BadProgram", "iteration axis COL appears twice");
  c = Valid();
  G(c).iters = {{LoopVar::kRow, 2, IterKind::kReduceSum}, {LoopVar::kCol, 2, IterKind::kReduceMax}};
  ExpectError(c, "BadProgram", "different pools");
  c = Valid();
  G(c).iters = {{LoopVar::kCol, 4, static_cast<IterKind>(42)}};
  ExpectError(c, "BadProgram", "unknown kind 42");
  c = Valid();
  G(c).iters = {{LoopVar::kRow, 1000000, IterKind::kParallel}, {LoopVar::kCol, 1000000, IterKind::kParallel},
                {LoopVar::kK, 1000000, IterKind::kParallel}};
  G(c).ins[0] = ConstMap();
  G(c).out = ConstMap();
  ExpectError(c, "TooLarge: section 's'", "refuses more than");
}

TEST(VmHostile, CoefficientsThatWouldOverflow) {
  Composition c = Valid();
  G(c).ins[0] = ElemAccess{0, {{LoopVar::kCol, kBig / 2}}, std::nullopt};
  ExpectError(c, "BadProgram", "slot 0: offsets can reach");
  c = Valid();
  G(c).ins[0] = ElemAccess{0, {{LoopVar::kCol, kBig}, {LoopVar::kCol, kBig}}, std::nullopt};
  ExpectError(c, "BadProgram", "coefficients of COL overflow");
  c = Valid();
  G(c).out = WithIndirect(At(0), 0, kBig, kBig);
  ExpectError(c, "BadProgram", "out map: offsets can reach");
  // A load address that overflows int64 is a fault, not undefined behaviour.
  c = Valid();
  L(c).pattern.origin.steps = {{LoopVar::kItemX, kBig}};
  S(c).items[0].x = 3;
  ExpectError(c, "TileOutOfRange: section 's' item 0 stage 'load' (#0)", "overflows int64");
  c = Valid();
  L(c).pattern.stride_w = kBig;
  ExpectError(c, "TileOutOfRange", "");
}

TEST(VmHostile, BodiesTooDeepOrTooLarge) {
  Composition c = Valid();
  Body deep = Op(0);
  for (int i = 0; i < 3000; ++i) deep = Add(deep, Const(1));
  G(c).body = deep;
  ExpectError(c, "BadProgram", "body is deeper than");
  // A DAG that shares nodes expands exponentially when flattened.
  c = Valid();
  Body wide = Op(0);
  for (int i = 0; i < 40; ++i) wide = Add(wide, wide);
  G(c).body = wide;
  ExpectError(c, "BadProgram", "body expands to more than");
  c = Valid();
  auto node = std::make_shared<BodyNode>();
  node->op = static_cast<BodyOp>(77);
  G(c).body = Body(node);
  ExpectError(c, "BadProgram", "unknown op 77");
  c = Valid();
  G(c).body = Unary(SfpuKind{static_cast<SfpuOp>(10)}, Op(0));
  ExpectError(c, "BadProgram", "unknown SFPU kind 10");
}

TEST(VmHostile, SizesAndShapes) {
  Composition c = Valid();
  S(c).buffers[0].page_tiles = 0;
  ExpectError(c, "BadProgram", "buffer 'a' has 0 tiles per page");
  c = Valid();
  S(c).buffers[0].page_tiles = int64_t{1} << 40;
  ExpectError(c, "BadProgram", "buffer 'a' has 1099511627776 tiles per page");
  c = Valid();
  L(c).pattern.block_w = 3;
  ExpectError(c, "BadProgram", "a block of 1x3 tiles does not fit a page of buffer 'a' (2 tiles)");
  c = Valid();
  S(c).tensors[1].rows = -1;
  ExpectError(c, "BadProgram", "tensor 'y' has shape -1x6");
  c = Valid();
  S(c).tensors[1].rows = 1 << 20;
  S(c).tensors[1].cols = 1 << 20;
  ExpectError(c, "TooLarge", "elements");
  ExpectError(Valid(), "BadProgram", "tile shape 0x4", 0, 4);
  ExpectError(Valid(), "BadProgram", "tile shape 100000x4", 100000, 4);
  c = Valid();
  S(c).num_blocks = -2;
  ExpectError(c, "BadProgram", "num_blocks is -2");
  c = Valid();
  S(c).tensors[1].init = TensorInit::Values({1, 2, 3, 4, 5, 6, 7});
  ExpectError(c, "BadProgram", "7 init values for 1x6");
}

TEST(VmHostile, MatmulShapes) {
  Composition c = Valid();
  S(c).stages[1].op = MatmulTiles{1, 1, 1, false, false};
  ExpectError(c, "BadProgram", "MatmulTiles reads [A, B] and writes [C], not 1 inputs and 1 outputs");
  c = Valid();
  S(c).stages[1].op = MatmulTiles{1, 1, 3, false, false};
  S(c).stages[1].ins = {0, 0};
  ExpectError(c, "BadProgram", "needs 3 tiles of buffer 'a' (pages of 2)");
  c = Valid();
  S(c).stages[1].op = MatmulTiles{1, 1, 1, false, false};
  S(c).stages[1].ins = {0, 0};
  ExpectError(c, "BadProgram", "MatmulTiles needs square tiles, not 4x8", 4, 8);
}

TEST(VmHostile, Trips) {
  Composition c = Valid();
  S(c).trip = Trip{9, 0, 0, 1, 0, 1};
  ExpectError(c, "BadProgram", "trip tensor id 9 out of range");
  c = Valid();
  S(c).trip = Trip{0, 6, 0, 1, 0, 1};
  ExpectError(c, "BadProgram", "trip element 6 outside tensor 'x' (6 elements)");
  c = Valid();
  S(c).trip = Trip{0, 0, 0, 10, 0, 0};
  ExpectError(c, "BadProgram", "trip per is 0");
  // A trip admitting a huge count is stopped by the work cap, not run.
  c = Valid();
  S(c).stages[1].phase = Phase::kBody;
  S(c).num_blocks = kBig;
  S(c).trip = Trip{0, 0, 0, kBig, kBig - 10, 1};
  ExpectError(c, "TooLarge", "refuses more than");
  // A trip that would fold past the section's num_blocks faults, as the certifier refuses it (one rule for both,
  // spatial/semantics/trip.h): the loads are proven for num_blocks only.
  S(c).num_blocks = 4;
  ExpectError(c, "TripOutOfRange: section 's'", "more than the fold's 4");
  // Many empty items are work too.
  c = Valid();
  S(c).stages.clear();
  S(c).items.assign(1, WorkItem{});
  S(c).num_blocks = int64_t{1} << 50;
  ExpectError(c, "TooLarge", "");
}

// Values at the edge of int64 (from the data, not the program) are range faults, never undefined conversions.
TEST(VmHostile, HugeDataValues) {
  TensorMap huge = {{"x", TensorData{1, 6, kF, {1e19, 2, 3, 4, 5, 6}}}};
  Composition c = Valid();
  S(c).trip = Trip{0, 0, std::numeric_limits<int64_t>::min(), kBig, 0, 1};
  auto trip = RunComposition(c, 4, 4, huge);
  ASSERT_FALSE(trip.ok());
  EXPECT_EQ(std::string(trip.status().message()).rfind("TripOutOfRange: section 's': trip value 1e+19 not in", 0), 0u)
      << trip.status();
  // x's first element indexes a load of x itself.
  c = Valid();
  S(c).buffers.push_back(Buffer{"idx", 1, 1, kF, BufferKind::kBuffer});
  S(c).stages.insert(S(c).stages.begin(), Stage{"load_idx", Phase::kPrologue, {}, {2}, Load{0, {}, 1}});
  std::get<Load>(S(c).stages[1].op).pattern.origin.indirect =
      IndirectTile{2, 1, std::numeric_limits<int64_t>::min(), kBig};
  S(c).stages[1].ins = {2};
  auto load = RunComposition(c, 4, 4, huge);
  ASSERT_FALSE(load.ok());
  EXPECT_NE(std::string(load.status().message()).find("IndexOutOfRange: section 's' item 0 stage 'load' (#1): index "
                                                      "value 1e+19"),
            std::string::npos)
      << load.status();
  c = Valid();
  S(c).tensors[1].cols = int64_t{1} << 50;
  S(c).tensors[1].rows = 0;
  ExpectError(c, "BadProgram", "tensor 'y' has shape 0x1125899906842624");
}

// Random mutations of a small program: ids, extents, coefficients, bodies and item coordinates drawn from
// ranges that straddle the valid ones. Every run must return (ok or an error) without crashing.
TEST(VmHostile, RandomMutationsNeverCrash) {
  std::mt19937_64 rng(12345);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int ok = 0, failed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    Composition c = Valid();
    const int mutations = static_cast<int>(pick(1, 3));
    for (int m = 0; m < mutations; ++m) {
      switch (pick(0, 11)) {
        case 0: S(c).stages[pick(0, 2)].ins.assign(1, static_cast<int>(pick(-1, 2))); break;
        case 1: L(c).tensor = static_cast<int>(pick(-1, 2)); break;
        case 2: G(c).iters[1].extent = pick(-1, 40); break;
        case 3: G(c).ins[0].base = pick(-10, 40); break;
        case 4: G(c).out.terms = {{LoopVar::kCol, pick(-3, 6)}}; break;
        case 5: G(c).body = Select(Pred::Lt(LoopVar::kCol, pick(0, 8)), Op(static_cast<int>(pick(0, 1))),
                                   FloorDiv(Op(0), Const(static_cast<double>(pick(-1, 1))))); break;
        case 6: G(c).ins[0] = WithIndirect(At(0), static_cast<int>(pick(-1, 1)), pick(-2, 2), pick(-1, 8)); break;
        case 7: L(c).pattern.origin.steps = {{LoopVar::kItemX, pick(-2, 2)}}; S(c).items[0].x = pick(-3, 3); break;
        case 8: S(c).buffers[pick(0, 1)].page_tiles = pick(-1, 3); break;
        case 9: L(c).pattern.block_w = pick(-1, 3); L(c).pattern.stride_w = pick(-2, 2); break;
        case 10: S(c).stages[pick(0, 2)].phase = static_cast<Phase>(pick(0, 4)); S(c).num_blocks = pick(-1, 3); break;
        case 11: S(c).trip = Trip{static_cast<int>(pick(-1, 2)), pick(-1, 6), pick(0, 3), pick(0, 9), pick(-3, 3),
                                  pick(-1, 3)}; break;
      }
    }
    auto out = RunComposition(c, 4, 4, Input());
    (out.ok() ? ok : failed)++;
  }
  // Both outcomes occur: the mutations are neither all harmless nor all rejected.
  EXPECT_GT(ok, 100);
  EXPECT_GT(failed, 100);
}

}  // namespace
}  // namespace spatial

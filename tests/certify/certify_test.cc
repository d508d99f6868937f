// The certifier's checks one by one on small hand-built programs: each test plants one fault (or none) and
// asserts the code, where it points, and the numbers the certificate or diagnostic carries.
#include "certify/certify.h"

#include <utility>

#include "certify/codes.h"
#include "certify/diagnostics.h"
#include "gtest/gtest.h"
#include "spatial/builder.h"
#include "spatial/diagnostic_status.h"
#include "spatial/validate.h"
#include "spatial/proto_io.h"
#include "tests/certify/test_programs.h"

namespace spatial {
namespace {

using certify_testing::Compose;
using certify_testing::Explain;
using certify_testing::Fold2;
using certify_testing::OnlyCode;
using certify_testing::Scale2;
using certify_testing::Tiny;

// ── A program that certifies, and what its certificate says ─────────────────────────────────────────────────

TEST(Certificate, RecordsFootprintAccumulatorAndAddresses) {
  Scale2 p;
  CertifyResult r = Certify(p.Build(), Tiny());
  ASSERT_TRUE(r.ok()) << Explain(r);
  const proto::Certificate& c = r.certificate;
  EXPECT_TRUE(c.certified());
  EXPECT_EQ(c.target(), "test_tiny");
  EXPECT_EQ(c.stages(), 3);
  ASSERT_EQ(c.sections_size(), 1);
  const proto::SectionProof& s = c.sections(0);
  // Two buffers of 2 pages x 2 tiles x 128 bytes (8x8 bf16); 96 KiB - 8 KiB reserved.
  EXPECT_EQ(s.footprint_bytes(), 1024);
  EXPECT_EQ(s.local_mem_bytes(), 90112);
  EXPECT_EQ(s.footprint_margin_bytes(), 89088);
  EXPECT_EQ(s.buffers(), 2);
  // The scale is elementwise: its 2-tile page streams through Dst a tile at a time.
  EXPECT_EQ(s.acc_tiles_used(), 1);
  EXPECT_EQ(s.acc_tiles_capacity(), 4);
  EXPECT_EQ(s.acc_widest_stage(), "scale");
  ASSERT_EQ(s.tile_accesses_size(), 2);
  EXPECT_EQ(s.tile_accesses(0).stage(), "load_x");
  EXPECT_EQ(s.tile_accesses(0).reach().lo(), 0);
  EXPECT_EQ(s.tile_accesses(0).reach().hi(), 1);
  EXPECT_EQ(s.tile_accesses(0).tiles(), 2);
  EXPECT_EQ(s.element_reads_proven(), 1);
  EXPECT_EQ(s.element_writes_proven(), 1);
  EXPECT_TRUE(s.items_disjoint());
  EXPECT_TRUE(s.closed_algebra());
}

// ── Resources ───────────────────────────────────────────────────────────────────────────────────────────────

TEST(Footprint, ExceededNamesBytesAndLargestBuffer) {
  Scale2 p;
  p.t.AddBufferDeep("huge", 64, 16, Precision::kFp32);  // 64 x 16 x 256 B = 262144 B
  CertifyResult r = Certify(p.Build(), Tiny());
  ASSERT_TRUE(OnlyCode(r, "FOOTPRINT_EXCEEDED"));
  ASSERT_EQ(r.diagnostics.size(), 1u);
  const proto::Diagnostic& d = r.diagnostics[0];
  EXPECT_EQ(d.section(), "scale2");
  EXPECT_EQ(d.expected(), "<= 90112 bytes");
  EXPECT_EQ(d.actual(), "263168 bytes");
  EXPECT_NE(d.message().find("'huge'"), std::string::npos) << d.message();
  EXPECT_EQ(r.certificate.sections(0).footprint_margin_bytes(), 90112 - 263168);
}

TEST(Footprint, ExactlyFullFits) {
  Scale2 p;
  // 90112 - 1024 = 89088 bytes = 348 fp32 8x8 tiles: 4 pages of 87 tiles.
  p.t.AddBufferDeep("fill", 4, 87, Precision::kFp32);
  CertifyResult r = Certify(p.Build(), Tiny());
  EXPECT_TRUE(r.ok()) << Explain(r);
  EXPECT_EQ(r.certificate.sections(0).footprint_margin_bytes(), 0);
}

Composition WideOut(Precision acc) {
  Template t(8, 8);
  const TensorId x = t.AddTensor("x", TensorRole::kInput, 1, 16, Precision::kBf16, TensorInit::External());
  const TensorId y = t.AddTensor("y", TensorRole::kOutput, 1, 16, Precision::kBf16, TensorInit::Zero());
  const BufferId in = t.AddBuffer("in", 2, Precision::kBf16);
  const BufferId out = t.AddBuffer("out", 5, Precision::kBf16);
  const StageId l = t.AddLoad("load_x", x, {}, 2, in);
  // A reduction (of extent 1) holds its whole page in Dst; an elementwise page would stream through it.
  std::vector<IterSpec> space = FlatSpace(16);
  space.push_back({LoopVar::kK, 1, IterKind::kReduceSum});
  const StageId g = t.AddGeneric("scale", std::move(space), {in}, {At(0)}, At(0), Op(0), out);
  const StageId s = t.AddStore("store_y", y, {}, 2, out);
  t.AddEdge(l, in, g);
  t.AddEdge(g, out, s);
  return Compose(t.Finish("wide", WholeRow(2), acc, NumericsClaim::Approx("copy")));
}

TEST(Accumulator, OutputPageWiderThanDst) {
  CertifyResult r = Certify(WideOut(Precision::kFp32), Tiny());
  ASSERT_TRUE(OnlyCode(r, "ACC_TILES_EXCEEDED"));
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].stage(), "scale");
  EXPECT_EQ(r.diagnostics[0].stage_index(), 1);
  EXPECT_EQ(r.diagnostics[0].expected(), "<= 4 tiles");
  EXPECT_EQ(r.diagnostics[0].actual(), "5 tiles");
  // A bf16 Dst holds twice the tiles (8).
  CertifyResult bf16 = Certify(WideOut(Precision::kBf16), Tiny());
  EXPECT_TRUE(bf16.ok()) << Explain(bf16);
  EXPECT_EQ(bf16.certificate.sections(0).acc_tiles_capacity(), 8);
  EXPECT_EQ(bf16.certificate.sections(0).acc_tiles_used(), 5);
}

TEST(Precision, AccumulatorPrecisionTheTargetLacks) {
  CertifyResult r = Certify(WideOut(Precision::kInt8), Tiny());
  ASSERT_TRUE(OnlyCode(r, "UNSUPPORTED_PRECISION"));
  EXPECT_EQ(r.diagnostics[0].field(), "acc_precision");
}

TEST(Precision, BufferPrecisionNotStorable) {
  Scale2 p;
  p.t.mutable_section().buffers[p.out].precision = Precision::kInt16;  // test_tiny stores no int16
  p.t.mutable_section().tensors[p.y].precision = Precision::kInt16;
  CertifyResult r = Certify(p.Build(), Tiny());
  ASSERT_TRUE(OnlyCode(r, "UNSUPPORTED_PRECISION")) << Explain(r);
  EXPECT_EQ(r.diagnostics.size(), 2u);  // the tensor and the buffer
  EXPECT_EQ(r.diagnostics[0].actual(), "int16");
}

Composition Matmul(Precision b_precision) {
  Template t(8, 8);
  const TensorId a = t.AddTensor("a", TensorRole::kInput, 8, 8, Precision::kBf16, TensorInit::External());
  const TensorId b = t.AddTensor("b", TensorRole::kInput, 8, 8, b_precision, TensorInit::External());
  const TensorId y = t.AddTensor("y", TensorRole::kOutput, 8, 8, Precision::kFp32, TensorInit::Zero());
  const BufferId ab = t.AddBuffer("ab", 1, Precision::kBf16);
  const BufferId bb = t.AddBuffer("bb", 1, b_precision);
  const BufferId cb = t.AddBuffer("cb", 1, Precision::kFp32);
  const StageId la = t.AddLoad("load_a", a, {}, 1, ab);
  const StageId lb = t.AddLoad("load_b", b, {}, 1, bb);
  const StageId mm = t.AddMatmul("mm", MatmulTiles{1, 1, 1, false, false}, ab, bb, cb);
  const StageId st = t.AddStore("store_y", y, {}, 1, cb);
  t.AddEdge(la, ab, mm);
  t.AddEdge(lb, bb, mm);
  t.AddEdge(mm, cb, st);
  return Compose(t.Finish("mm", WholeRow(1), Precision::kFp32, NumericsClaim::Approx("matmul")));
}

TEST(Precision, MatmulOperandsAtMatrixInPrecision) {
  CertifyResult ok = Certify(Matmul(Precision::kBf16), Tiny());
  EXPECT_TRUE(ok.ok()) << Explain(ok);
  CertifyResult r = Certify(Matmul(Precision::kFp32), Tiny());
  ASSERT_TRUE(OnlyCode(r, "UNSUPPORTED_PRECISION"));
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].stage(), "mm");
  EXPECT_EQ(r.diagnostics[0].field(), "ins[1]");
  EXPECT_EQ(r.diagnostics[0].expected(), "bf16");
  EXPECT_EQ(r.diagnostics[0].actual(), "fp32");
}

TEST(Precision, NoFloatDatapath) {
  proto::Target t = Tiny().proto();
  t.mutable_datapaths()->set_elementwise_float(proto::PRECISION_UNSPECIFIED);
  Scale2 p;
  CertifyResult r = Certify(p.Build(), Target(t));
  ASSERT_TRUE(OnlyCode(r, "UNSUPPORTED_PRECISION"));
  EXPECT_EQ(r.diagnostics[0].stage(), "scale");
  EXPECT_EQ(r.diagnostics[0].expected(), "a float elementwise datapath");
}

// ── Dataflow ────────────────────────────────────────────────────────────────────────────────────────────────

TEST(Carry, InitializedInPrologueCertifies) {
  Fold2 p;
  CertifyResult r = Certify(p.Build(), Tiny());
  ASSERT_TRUE(r.ok()) << Explain(r);
  ASSERT_EQ(r.certificate.sections(0).carried_buffers_size(), 1);
  EXPECT_EQ(r.certificate.sections(0).carried_buffers(0), "carry");
  // The body load is proven for both blocks: tiles [0, 1] of x.
  EXPECT_EQ(r.certificate.sections(0).tile_accesses(0).reach().hi(), 1);
}

TEST(Carry, BodyReadsCarryNoPrologueWrote) {
  Fold2 p(/*with_init=*/false);
  CertifyResult r = Certify(p.Build(), Tiny());
  ASSERT_TRUE(OnlyCode(r, "UNINITIALIZED_CARRY"));
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].stage(), "fold");
  EXPECT_EQ(r.diagnostics[0].field(), "ins[1]");
}

TEST(Carry, EpilogueReadsBodyOnlyBufferWhenTripAdmitsZeroBlocks) {
  Fold2 p(/*with_init=*/false);
  // Make the body's sum a fresh page each block (not a carry), read by the epilogue.
  Section& s = p.t.mutable_section();
  std::get<Generic>(s.stages[p.fold].op).body = Op(0);
  s.stages[p.fold].ins = {p.in};
  std::get<Generic>(s.stages[p.fold].op).ins = {At(0)};
  const TensorId pos = p.t.AddTensor("pos", TensorRole::kInput, 1, 1, Precision::kInt32, TensorInit::External());
  p.t.SetTrip(Trip{pos, 0, 0, 9, 7, 8}, 2);  // [ceil(7/8), ceil(16/8)] = [1, 2] blocks: fine
  CertifyResult one = Certify(p.Build(), Tiny());
  EXPECT_TRUE(one.ok()) << Explain(one);

  Fold2 q(/*with_init=*/false);
  Section& s2 = q.t.mutable_section();
  std::get<Generic>(s2.stages[q.fold].op).body = Op(0);
  s2.stages[q.fold].ins = {q.in};
  std::get<Generic>(s2.stages[q.fold].op).ins = {At(0)};
  const TensorId pos2 = q.t.AddTensor("pos", TensorRole::kInput, 1, 1, Precision::kInt32, TensorInit::External());
  q.t.SetTrip(Trip{pos2, 0, 0, 16, 0, 8}, 2);  // [0, 2] blocks: with 0 the epilogue reads an unwritten page
  CertifyResult r = Certify(q.Build(), Tiny());
  ASSERT_TRUE(OnlyCode(r, "UNINITIALIZED_CARRY"));
  EXPECT_EQ(r.diagnostics[0].stage(), "copy");
}

// The same where an item folds no block of its own (WorkItem.blocks = 0): its epilogue reads an unwritten page.
TEST(Carry, EpilogueReadsBodyOnlyBufferWhenAnItemFoldsZeroBlocks) {
  for (const int64_t own : {1, 0}) {
    Fold2 p(/*with_init=*/false);
    Section& s = p.t.mutable_section();
    std::get<Generic>(s.stages[p.fold].op).body = Op(0);
    s.stages[p.fold].ins = {p.in};
    std::get<Generic>(s.stages[p.fold].op).ins = {At(0)};
    Composition c = p.Build();
    c.sections[0].items[0].blocks = own;
    CertifyResult r = Certify(c, Tiny());
    if (own == 1) {
      EXPECT_TRUE(r.ok()) << Explain(r);
      continue;
    }
    ASSERT_TRUE(OnlyCode(r, "UNINITIALIZED_CARRY"));
    EXPECT_EQ(r.diagnostics[0].stage(), "copy");
    EXPECT_NE(r.diagnostics[0].message().find("an item folds 0 blocks of its own"), std::string::npos)
        << r.diagnostics[0].message();
  }
}

TEST(Dangling, ReadButNeverWritten) {
  Scale2 p;
  const BufferId ghost = p.t.AddBuffer("ghost", 1, Precision::kBf16);
  Section& s = p.t.mutable_section();
  s.stages[p.gen].ins.push_back(ghost);
  std::get<Generic>(s.stages[p.gen].op).ins.push_back(At(0));
  CertifyResult r = Certify(p.Build(), Tiny());
  ASSERT_TRUE(OnlyCode(r, "DANGLING_BUFFER"));
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].stage(), "scale");
  EXPECT_EQ(r.diagnostics[0].field(), "ins[1]");
}

TEST(Dangling, WrittenButNeverRead) {
  Scale2 p;
  const BufferId spare = p.t.AddBuffer("spare", 2, Precision::kBf16);
  p.t.AddLoad("load_spare", p.x, {}, 2, spare);
  CertifyResult r = Certify(p.Build(), Tiny());
  ASSERT_TRUE(OnlyCode(r, "DANGLING_BUFFER"));
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].stage(), "load_spare");
  EXPECT_EQ(r.diagnostics[0].actual(), "no reader");
}

TEST(StageOrder, ReadOfWhatOnlyALaterStageWrites) {
  Scale2 p;
  Composition c = p.Build();
  Section& s = c.sections[0];
  std::swap(s.stages[0], s.stages[1]);  // the Generic now runs before the load that feeds it
  s.edges = {Edge{0, p.out, 2}};
  CertifyResult r = Certify(c, Tiny());
  ASSERT_TRUE(OnlyCode(r, "STAGE_ORDER"));
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].stage(), "scale");
  EXPECT_EQ(r.diagnostics[0].stage_index(), 0);
}

TEST(StageOrder, EdgePointingBackwards) {
  Scale2 p;
  // An in-place rescale of `in` after the Generic read it, with its hand-off edge pointing back at that reader.
  const StageId again = p.t.AddGeneric("again", FlatSpace(16), {p.in}, {At(0)}, At(0), Op(0), p.in);
  p.t.AddEdge(again, p.in, p.gen);
  CertifyResult r = Certify(p.Build(), Tiny());
  ASSERT_TRUE(OnlyCode(r, "STAGE_ORDER")) << Explain(r);
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].field(), "edges[2]");
}

Composition Gather(int64_t hi, bool second_reader) {
  Template t(8, 8);
  const TensorId table = t.AddTensor("table", TensorRole::kInput, 1, 64, Precision::kBf16, TensorInit::External());
  const TensorId idx = t.AddTensor("idx", TensorRole::kParam, 1, 1, Precision::kInt32, TensorInit::Values({5}));
  const TensorId y = t.AddTensor("y", TensorRole::kOutput, 1, 8, Precision::kBf16, TensorInit::Zero());
  const BufferId ib = t.AddBuffer("idx_buf", 1, Precision::kInt32);
  const BufferId row = t.AddBuffer("row", 1, Precision::kBf16);
  const StageId li = t.AddLoad("load_idx", idx, {}, 1, ib);
  const StageId g = t.AddLoadPattern("gather", table, AccessPattern{TileAddr{0, {}, IndirectTile{ib, 1, 0, hi}}, 1, 1,
                                                                    1, 1}, row);
  BufferId src = row;
  if (second_reader) {
    const BufferId mixed = t.AddBuffer("mixed", 1, Precision::kBf16);
    t.AddGeneric("mix", FlatSpace(8), {row, ib}, {At(0), Fixed(0)}, At(0), Add(Op(0), Op(1)), mixed);
    src = mixed;
  }
  const StageId st = t.AddStore("store_y", y, {}, 1, src);
  t.AddEdge(li, ib, g);
  (void)st;
  return Compose(t.Finish("gather", WholeRow(1), Precision::kFp32, NumericsClaim::Exact()));
}

TEST(Fifo, IndexPageWithTwoReaders) {
  CertifyResult ok = Certify(Gather(7, false), Tiny());
  EXPECT_TRUE(ok.ok()) << Explain(ok);
  CertifyResult r = Certify(Gather(7, true), Tiny());
  ASSERT_TRUE(OnlyCode(r, "FIFO_TWO_READERS")) << Explain(r);
  EXPECT_EQ(r.diagnostics[0].stage(), "mix");
}

// ── Tile addresses ──────────────────────────────────────────────────────────────────────────────────────────

TEST(TileAddress, IndirectTileGuardRecordedAndBounded) {
  CertifyResult ok = Certify(Gather(7, false), Tiny());
  ASSERT_TRUE(ok.ok()) << Explain(ok);
  const proto::SectionProof& s = ok.certificate.sections(0);
  ASSERT_EQ(s.guards_size(), 1);
  EXPECT_EQ(s.guards(0).stage(), "gather");
  EXPECT_EQ(s.guards(0).field(), "pattern.origin.indirect");
  EXPECT_EQ(s.guards(0).admitted().lo(), 0);
  EXPECT_EQ(s.guards(0).admitted().hi(), 7);
  // The index page holds the Param table's 5 and tile padding's 0.
  EXPECT_EQ(s.guards(0).proven().lo(), 0);
  EXPECT_EQ(s.guards(0).proven().hi(), 5);
  EXPECT_TRUE(s.guards(0).always_holds());

  CertifyResult r = Certify(Gather(8, false), Tiny());  // admits tile 8 of an 8-tile table
  ASSERT_TRUE(OnlyCode(r, "INDEX_OUT_OF_RANGE"));
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].stage(), "gather");
  EXPECT_EQ(r.diagnostics[0].field(), "pattern.origin.indirect");
  EXPECT_EQ(r.diagnostics[0].expected(), "in [0, 8)");
  EXPECT_EQ(r.diagnostics[0].actual(), "[0, 8]");
}

TEST(TileAddress, EveryItemChecked) {
  Scale2 p;
  Section& s = p.t.mutable_section();
  // One tile per item, at tile 2 * ITEM_X: item 1 loads tile 2 of a 2-tile tensor.
  std::get<Load>(s.stages[p.load].op).pattern = AccessPattern{TileAddr{0, {{LoopVar::kItemX, 2}}, {}}, 1, 1, 1, 1};
  std::get<Store>(s.stages[p.store].op).pattern = AccessPattern{TileAddr{0, {{LoopVar::kItemX, 1}}, {}}, 1, 1, 1, 1};
  CertifyResult r = Certify(p.Build(ItemsPerTile(2)), Tiny());
  ASSERT_TRUE(OnlyCode(r, "INDEX_OUT_OF_RANGE"));
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].stage(), "load_x");
  EXPECT_EQ(r.diagnostics[0].field(), "pattern.origin");
  EXPECT_EQ(r.diagnostics[0].actual(), "[2, 2]");
  EXPECT_NE(r.diagnostics[0].message().find("item 1"), std::string::npos) << r.diagnostics[0].message();
}

TEST(TileAddress, ItemByItemWhenTheBoxIsLoose) {
  Scale2 p;
  Section& s = p.t.mutable_section();
  // Address ITEM_Y - ITEM_X: 0 for items (0,0) and (1,1), though the box over them reaches [-1, 1].
  std::get<Load>(s.stages[p.load].op).pattern =
      AccessPattern{TileAddr{0, {{LoopVar::kItemY, 1}, {LoopVar::kItemX, -1}}, {}}, 1, 1, 1, 1};
  std::get<Store>(s.stages[p.store].op).pattern = AccessPattern{TileAddr{0, {{LoopVar::kItemX, 1}}, {}}, 1, 1, 1, 1};
  std::vector<WorkItem> items = {{0, 0, 0, TileRect{0, 0, 1, 1}}, {1, 1, 1, TileRect{0, 1, 1, 1}}};
  CertifyResult r = Certify(p.Build(items), Tiny());
  ASSERT_TRUE(r.ok()) << Explain(r);
  EXPECT_EQ(r.certificate.sections(0).tile_accesses(0).reach().lo(), 0);
  EXPECT_EQ(r.certificate.sections(0).tile_accesses(0).reach().hi(), 0);
}

// ── Work items and the trip ─────────────────────────────────────────────────────────────────────────────────

TEST(Items, OverlappingRects) {
  Scale2 p;
  std::vector<WorkItem> items = {{0, 0, 0, TileRect{0, 0, 1, 2}}, {1, 0, 1, TileRect{0, 1, 1, 1}}};
  CertifyResult r = Certify(p.Build(items), Tiny());
  ASSERT_TRUE(OnlyCode(r, "ITEMS_OVERLAP"));
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].field(), "items[1].out");
  EXPECT_FALSE(r.certificate.sections(0).items_disjoint());
}

TEST(Items, RectOutsideTheResult) {
  Scale2 p;
  CertifyResult r = Certify(p.Build(WholeRow(3)), Tiny());  // y is 1 x 2 tiles
  ASSERT_TRUE(OnlyCode(r, "ITEMS_OVERLAP"));
  EXPECT_EQ(r.diagnostics[0].field(), "items[0].out");
  EXPECT_EQ(r.diagnostics[0].expected(), "inside rows [0, 1) x cols [0, 2)");
}

TEST(Trip, MoreBlocksThanTheFold) {
  auto build = [](int64_t hi) {
    Fold2 p;
    const TensorId pos = p.t.AddTensor("pos", TensorRole::kInput, 1, 1, Precision::kInt32, TensorInit::External());
    p.t.SetTrip(Trip{pos, 0, 1, hi, 7, 8}, 2);
    return Certify(p.Build(), Tiny());
  };
  CertifyResult ok = build(9);  // ceil(16 / 8) = 2 blocks
  ASSERT_TRUE(ok.ok()) << Explain(ok);
  EXPECT_EQ(ok.certificate.sections(0).trip().blocks().lo(), 1);
  EXPECT_EQ(ok.certificate.sections(0).trip().blocks().hi(), 2);
  CertifyResult r = build(10);  // ceil(17 / 8) = 3 blocks
  ASSERT_TRUE(OnlyCode(r, "TRIP_OUT_OF_RANGE"));
  EXPECT_EQ(r.diagnostics[0].field(), "trip.hi");
  EXPECT_EQ(r.diagnostics[0].actual(), "3 blocks");
  EXPECT_EQ(r.diagnostics[0].expected(), "<= 2 blocks");
}

// ── State order ─────────────────────────────────────────────────────────────────────────────────────────────

// Section 0 reads and rewrites the State ring; section 1 reads the new ring.
Composition Ring() {
  Composition c;
  for (int k = 0; k < 2; ++k) {
    Template t(8, 8);
    const TensorId ring = t.AddTensor("ring", TensorRole::kState, 1, 8, Precision::kBf16, TensorInit::Zero());
    const TensorId y = t.AddTensor(k == 0 ? "ring" : "y", k == 0 ? TensorRole::kState : TensorRole::kOutput, 1, 8,
                                   Precision::kBf16, TensorInit::Zero());
    const BufferId in = t.AddBuffer("in", 1, Precision::kBf16);
    const BufferId out = t.AddBuffer("out", 1, Precision::kBf16);
    t.AddLoad("load_ring", ring, {}, 1, in);
    t.AddGeneric("shift", FlatSpace(8), {in}, {At(0)}, At(0), Op(0), out);
    t.AddStore(k == 0 ? "store_ring" : "store_y", y, {}, 1, out);
    c.sections.push_back(t.Finish(k == 0 ? "update" : "read", WholeRow(1), Precision::kFp32,
                                  NumericsClaim::Exact()));
  }
  c.name = "ring";
  c.target = "test_tiny";
  c.tile_rows = c.tile_cols = 8;
  DeclareStateOrder(c);
  return c;
}

TEST(StateOrder, DeclaredOrderRecorded) {
  Composition c = Ring();
  CertifyResult r = Certify(c, Tiny());
  ASSERT_TRUE(r.ok()) << Explain(r);
  ASSERT_EQ(r.certificate.state_order_size(), 3);
  EXPECT_EQ(r.certificate.state_order(0).access(), proto::READ);
  EXPECT_EQ(r.certificate.state_order(1).access(), proto::WRITE);
  EXPECT_EQ(r.certificate.state_order(2).section_name(), "read");
}

TEST(StateOrder, ReadDeclaredBeforeTheWriteItFollows) {
  Composition c = Ring();
  std::swap(c.state_order[1], c.state_order[2]);  // section 1's read declared before section 0's write
  CertifyResult r = Certify(c, Tiny());
  ASSERT_TRUE(OnlyCode(r, "STATE_ORDER"));
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].field(), "state_order[2]");
  EXPECT_EQ(r.diagnostics[0].section(), "update");
}

TEST(StateOrder, UndeclaredAccess) {
  Composition c = Ring();
  c.state_order.pop_back();
  CertifyResult r = Certify(c, Tiny());
  ASSERT_TRUE(OnlyCode(r, "STATE_ORDER"));
  EXPECT_EQ(r.diagnostics[0].section(), "read");
}

TEST(StateOrder, DeclaredAccessThatDoesNotHappen) {
  Composition c = Ring();
  c.state_order.push_back(StateStep{"ring", 1, StateAccess::kWrite});
  CertifyResult r = Certify(c, Tiny());
  ASSERT_TRUE(OnlyCode(r, "STATE_ORDER"));
  EXPECT_EQ(r.diagnostics[0].field(), "state_order[3]");
}

// ── Structure, the wire, formatting ─────────────────────────────────────────────────────────────────────────

TEST(Structure, TileOfAnotherTarget) {
  Scale2 p;
  Composition c = p.Build();
  c.tile_rows = c.tile_cols = 32;
  CertifyResult r = Certify(c, Tiny());
  ASSERT_TRUE(OnlyCode(r, "TARGET_MISMATCH"));
}

TEST(Structure, ValidationErrorIsMalformedAndNamesTheStage) {
  Scale2 p;
  Composition c = p.Build();
  c.sections[0].stages[1].ins[0] = 9;
  CertifyResult r = Certify(c, Tiny());
  ASSERT_TRUE(OnlyCode(r, "MALFORMED"));
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].section(), "scale2");
  EXPECT_EQ(r.diagnostics[0].section_index(), 0);
  EXPECT_EQ(r.diagnostics[0].stage(), "scale");
  EXPECT_EQ(r.diagnostics[0].stage_index(), 1);
  EXPECT_EQ(r.diagnostics[0].field(), "ins[0]");
}

TEST(Proto, RoundTripCertifies) {
  Scale2 p;
  CertifyResult r = CertifyProto(ToProto(p.Build()), Tiny());
  EXPECT_TRUE(r.ok()) << Explain(r);
}

TEST(Proto, StageWithoutKindIsOpenAlgebra) {
  Scale2 p;
  proto::Composition pc = ToProto(p.Build());
  pc.mutable_sections(0)->mutable_stages(1)->clear_generic();
  CertifyResult r = CertifyProto(pc, Tiny());
  ASSERT_TRUE(OnlyCode(r, "OPEN_ALGEBRA"));
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].stage(), "scale");
  EXPECT_EQ(r.diagnostics[0].stage_index(), 1);
  EXPECT_EQ(r.diagnostics[0].section_index(), 0);
}

TEST(Proto, UnspecifiedEnumIsMalformed) {
  Scale2 p;
  proto::Composition pc = ToProto(p.Build());
  pc.mutable_sections(0)->mutable_buffers(0)->set_precision(proto::PRECISION_UNSPECIFIED);
  CertifyResult r = CertifyProto(pc, Tiny());
  ASSERT_TRUE(OnlyCode(r, "MALFORMED"));
  EXPECT_FALSE(r.diagnostics[0].message().empty());
}

TEST(Format, StructuralErrorsAreSplitIntoSectionStageAndField) {
  proto::Diagnostic d = certify::DiagnosticFromStatus(
      "MALFORMED", Malformed(DiagWhere::Composition("c").Section("rope").Stage("rotate", 3), "ins[1]",
                             "buffer 9 out of range"));
  EXPECT_EQ(d.code(), "MALFORMED");
  EXPECT_EQ(d.section(), "rope");
  EXPECT_EQ(d.stage(), "rotate");
  EXPECT_EQ(d.stage_index(), 3);
  EXPECT_EQ(d.field(), "ins[1]");
  EXPECT_EQ(d.message(), "buffer 9 out of range");

  // A stage's body: the inner failure's field, under the stage.
  const absl::Status inner = Malformed(DiagWhere{}.Part("nodes[2] "), "op", "UNSPECIFIED");
  proto::Diagnostic e = certify::DiagnosticFromStatus(
      "MALFORMED", MalformedWithin(DiagWhere{}.Section("s").Stage("g", 1), "body.", inner));
  EXPECT_EQ(e.section(), "s");
  EXPECT_EQ(e.stage_index(), 1);
  EXPECT_EQ(e.field(), "body.nodes[2] op");
  EXPECT_EQ(e.message(), "UNSPECIFIED");

  proto::Diagnostic f = certify::DiagnosticFromStatus("MALFORMED", absl::InvalidArgumentError("no structure here"));
  EXPECT_EQ(f.section(), "");
  EXPECT_EQ(f.message(), "no structure here");
}

// Validation's failures are typed (spatial/diagnostic_status.h): the certifier takes the diagnostic they carry,
// not a parse of their message, and a message shaped to fool the parser cannot move its fields.
TEST(Format, ValidationFailuresCarryTheirDiagnostic) {
  Scale2 p;
  Composition c = p.Build();
  c.sections[0].stages[1].ins[0] = 99;
  c.sections[0].name = "odd: name 'with' (#7) quotes";
  const absl::Status st = ValidateComposition(c);
  ASSERT_FALSE(st.ok());
  const std::optional<proto::Diagnostic> typed = DiagnosticOf(st);
  ASSERT_TRUE(typed.has_value()) << st;
  EXPECT_EQ(typed->section(), "odd: name 'with' (#7) quotes");
  EXPECT_EQ(typed->stage(), c.sections[0].stages[1].name);
  EXPECT_EQ(typed->stage_index(), 1);
  CertifyResult r = Certify(c, Tiny());
  ASSERT_TRUE(OnlyCode(r, "MALFORMED"));
  EXPECT_EQ(r.diagnostics[0].section(), "odd: name 'with' (#7) quotes");
  EXPECT_EQ(r.diagnostics[0].stage_index(), 1);
  EXPECT_EQ(r.diagnostics[0].field(), typed->field());
  EXPECT_EQ(r.diagnostics[0].message(), typed->message());
}

TEST(Format, GnuStyleWithEveryPart) {
  proto::Diagnostic d;
  d.set_code("INDEX_OUT_OF_RANGE");
  d.set_section("rope");
  d.set_stage("rotate");
  d.set_stage_index(3);
  d.set_field("ins[1]");
  d.set_message("slot 1 reads outside its page");
  d.set_expected("[0, 64)");
  d.set_actual("[-8, 63]");
  EXPECT_EQ(FormatDiagnostic(d, "prog.textproto"),
            "prog.textproto: error: [INDEX_OUT_OF_RANGE] section 'rope' stage 'rotate' (#3) ins[1]: slot 1 reads "
            "outside its page (expected [0, 64), got [-8, 63])");
}

TEST(Format, SectionLevelWithoutStageOrValues) {
  proto::Diagnostic d;
  d.set_code("STATE_ORDER");
  d.set_section("update");
  d.set_field("state_order");
  d.set_message("undeclared");
  EXPECT_EQ(FormatDiagnostic(d, "-"), "-: error: [STATE_ORDER] section 'update' state_order: undeclared");
}

// ── Items are independent for reads too (issue #16) ──

// Two items updating a 1 x 2-tile State in place: item x reads tile `read_of(x)` and writes tile x.
Composition InPlace(int64_t (*read_of)(int64_t)) {
  Template t(8, 8);
  const TensorId st = t.AddTensor("s", TensorRole::kState, 8, 16, Precision::kFp32, TensorInit::Zero());
  const BufferId b = t.AddBufferDeep("b", 1, 1, Precision::kFp32);
  const StageId l = t.AddLoadBlockAt("load", st, 0, {}, {}, b);
  std::get<Load>(t.mutable_section().stages[l].op).pattern.origin.steps = {{LoopVar::kItemX, 1}};
  const StageId w = t.AddStore("store", st, {{LoopVar::kItemX, 1}}, 1, b);
  t.AddEdge(l, b, w);
  Section sec = t.Finish("update", {WorkItem{0, 0, 0, TileRect{0, 0, 1, 1}}, WorkItem{1, 0, 1, TileRect{0, 1, 1, 1}}},
                         Precision::kFp32, NumericsClaim::Exact());
  // The planted read: item x's load at tile read_of(x) (base + coef * x).
  auto& origin = std::get<Load>(sec.stages[l].op).pattern.origin;
  origin.base = read_of(0);
  origin.steps = {{LoopVar::kItemX, read_of(1) - read_of(0)}};
  Composition c = certify_testing::Compose(std::move(sec));
  DeclareStateOrder(c);
  return c;
}

TEST(ItemReads, AnItemMayRewriteItsOwnTiles) {
  const CertifyResult r = Certify(InPlace([](int64_t x) { return x; }), Tiny());
  EXPECT_TRUE(r.ok()) << certify_testing::Explain(r);
  EXPECT_TRUE(r.certificate.sections(0).reads_independent());
}

TEST(ItemReads, AnItemMayNotReadWhatAnotherStores) {
  const CertifyResult r = Certify(InPlace([](int64_t x) { return 1 - x; }), Tiny());
  ASSERT_TRUE(OnlyCode(r, "ITEMS_OVERLAP")) << certify_testing::Explain(r);
  EXPECT_EQ(r.diagnostics[0].stage(), "load");
  EXPECT_EQ(r.diagnostics[0].message(),
            "item 0 loads tile 1 of 's', which item 1 of the same section stores: items run at the same time on "
            "different sites, so a section's items must be independent");
  EXPECT_FALSE(r.certificate.sections(0).reads_independent());
}

}  // namespace
}  // namespace spatial

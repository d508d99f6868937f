#include "spatial/proto_io.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "spatial/print.h"
#include "spatial/proto_file.h"
#include "spatial/validate.h"
#include "tests/spatial/io_test_program.h"

namespace spatial {
namespace {

using ::spatial::testing::RichComposition;
using ::spatial::testing::RichIds;
using ::testing::HasSubstr;

void ExpectStagesEqual(const Stage& a, const Stage& b) {
  SCOPED_TRACE(a.name);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.phase, b.phase);
  EXPECT_EQ(a.last_blocks, b.last_blocks);
  EXPECT_EQ(a.ins, b.ins);
  EXPECT_EQ(a.outs, b.outs);
  ASSERT_EQ(a.op.index(), b.op.index());
  if (const auto* ga = std::get_if<Generic>(&a.op)) {
    const auto& gb = std::get<Generic>(b.op);
    EXPECT_EQ(ga->iters, gb.iters);
    EXPECT_EQ(ga->ins, gb.ins);
    EXPECT_EQ(ga->out, gb.out);
    EXPECT_TRUE(BodyEqual(ga->body, gb.body)) << BodyToString(ga->body) << " vs " << BodyToString(gb.body);
  } else if (const auto* la = std::get_if<Load>(&a.op)) {
    EXPECT_EQ(*la, std::get<Load>(b.op));
  } else if (const auto* sa = std::get_if<Store>(&a.op)) {
    EXPECT_EQ(*sa, std::get<Store>(b.op));
  } else {
    EXPECT_EQ(std::get<MatmulTiles>(a.op), std::get<MatmulTiles>(b.op));
  }
}

void ExpectCompositionsEqual(const Composition& a, const Composition& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.target, b.target);
  EXPECT_EQ(a.tile_rows, b.tile_rows);
  EXPECT_EQ(a.tile_cols, b.tile_cols);
  EXPECT_EQ(a.state_order, b.state_order);
  ASSERT_EQ(a.sections.size(), b.sections.size());
  for (size_t i = 0; i < a.sections.size(); ++i) {
    const Section& x = a.sections[i];
    const Section& y = b.sections[i];
    SCOPED_TRACE(x.name);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.tensors, y.tensors);
    EXPECT_EQ(x.buffers, y.buffers);
    EXPECT_EQ(x.edges, y.edges);
    EXPECT_EQ(x.items, y.items);
    EXPECT_EQ(x.num_blocks, y.num_blocks);
    EXPECT_EQ(x.trip, y.trip);
    EXPECT_EQ(x.plan, y.plan);
    EXPECT_EQ(x.claim, y.claim);
    EXPECT_EQ(x.acc_precision, y.acc_precision);
    ASSERT_EQ(x.stages.size(), y.stages.size());
    for (size_t k = 0; k < x.stages.size(); ++k) ExpectStagesEqual(x.stages[k], y.stages[k]);
  }
}

TEST(ProtoIo, RichProgramIsValid) {
  // The fixture must itself be valid, or every "plant one fault" test below proves nothing.
  Composition c = RichComposition();
  EXPECT_TRUE(ValidateComposition(c, 32, 32).ok()) << ValidateComposition(c, 32, 32);
  // It covers what it claims to cover.
  const Section& s = c.sections[0];
  int kinds[4] = {0, 0, 0, 0};
  for (const Stage& st : s.stages) ++kinds[st.op.index()];
  for (int k : kinds) EXPECT_GT(k, 0);
  EXPECT_TRUE(s.trip.has_value());
  EXPECT_TRUE(s.plan.has_value());
  EXPECT_EQ(c.state_order.size(), 3u);  // cache: read+write in #0, read in #1
}

TEST(ProtoIo, RoundTripIsByteIdenticalAndFieldsCompareEqual) {
  RichIds ids;
  Composition c = RichComposition(&ids);
  c.sections[0].stages[ids.mix].last_blocks = 2;  // a stage run on each item's last 2 blocks only
  proto::Composition p1 = ToProto(c);
  EXPECT_EQ(p1.ir_version(), proto::IR_VERSION_1);
  EXPECT_EQ(p1.target(), "wormhole_n150");
  EXPECT_EQ(p1.tile_rows(), 32);
  std::string bytes1;
  ASSERT_TRUE(p1.SerializeToString(&bytes1));
  proto::Composition parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes1));
  absl::StatusOr<Composition> back = FromProto(parsed);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectCompositionsEqual(c, *back);
  std::string bytes2;
  ASSERT_TRUE(ToProto(*back).SerializeToString(&bytes2));
  EXPECT_EQ(bytes1, bytes2);
}

TEST(ProtoIo, EnumsAreNumericallyIdentical) {
  RichIds ids;
  Composition c = RichComposition(&ids);
  proto::Composition p = ToProto(c);
  const proto::Section& s = p.sections(0);
  EXPECT_EQ(s.tensors(ids.idx).precision(), proto::INT32);
  EXPECT_EQ(s.tensors(ids.cache).role(), proto::STATE);
  EXPECT_EQ(s.buffers(ids.carry).kind(), proto::SCRATCH);
  EXPECT_EQ(s.stages(ids.mm).phase(), proto::BODY);
  EXPECT_EQ(s.stages(ids.finish).generic().iters(1).kind(), proto::REDUCE_SUM);
  EXPECT_EQ(s.stages(ids.load_x).load().pattern().origin().steps(0).var(), proto::KBLOCK);
  EXPECT_EQ(s.stages(ids.load_x).load().num_blocks(), 4);
  EXPECT_EQ(p.state_order(1).access(), proto::WRITE);
  EXPECT_EQ(s.acc_precision(), proto::FP32);
  // Indirect parts are present exactly where the model has them.
  EXPECT_TRUE(s.stages(ids.gather).load().pattern().origin().has_indirect());
  EXPECT_FALSE(s.stages(ids.load_x).load().pattern().origin().has_indirect());
  EXPECT_TRUE(s.stages(ids.mix).generic().ins(1).has_indirect());
  EXPECT_EQ(s.stages(ids.mix).generic().ins(1).indirect().modulus(), 16);
  EXPECT_FALSE(p.sections(1).has_trip());
  EXPECT_FALSE(p.sections(1).has_plan());
}

TEST(ProtoIo, TensorInitKindsMapToTheOneof) {
  RichIds ids;
  proto::Section s = ToProto(RichComposition(&ids)).sections(0);
  EXPECT_EQ(s.tensors(ids.x).init().kind_case(), proto::TensorInit::kExternal);
  EXPECT_EQ(s.tensors(ids.idx).init().kind_case(), proto::TensorInit::kValues);
  EXPECT_THAT(s.tensors(ids.idx).init().values().v(), ::testing::ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(s.tensors(ids.scaler).init().kind_case(), proto::TensorInit::kConstF);
  EXPECT_EQ(s.tensors(ids.w).init().kind_case(), proto::TensorInit::kFloatValues);
  EXPECT_EQ(s.tensors(ids.cache).init().kind_case(), proto::TensorInit::kZero);
}

TEST(ProtoIo, SharedSubtreeIsEmittedOnceAndStaysShared) {
  Body x = Mul(Op(0), Const(2.0));
  Body root = Add(x, x);
  proto::TensorBody p = BodyToProto(root);
  ASSERT_EQ(p.nodes_size(), 4);  // x0, 2, mul, add
  EXPECT_EQ(p.nodes(3).op(), proto::BodyNode::ADD);
  EXPECT_EQ(p.nodes(3).a(), 2);
  EXPECT_EQ(p.nodes(3).b(), 2);
  absl::StatusOr<Body> back = BodyFromProto(p);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->a.get(), (*back)->b.get());
  EXPECT_TRUE(BodyEqual(*back, root));
}

// Load.multicast and MatmulTiles.fidelity survive the wire; an unset fidelity is the target's default, a present
// multicast message without an axis is malformed (not "no multicast").
TEST(ProtoIo, MulticastAndFidelityRoundTrip) {
  RichIds ids;
  Composition c = RichComposition(&ids);
  std::get<Load>(c.sections[0].stages[ids.load_x].op).multicast = LoopVar::kItemX;
  std::get<MatmulTiles>(c.sections[0].stages[ids.mm].op).fidelity = MathFidelity::kLoFi;
  proto::Composition p = ToProto(c);
  EXPECT_EQ(p.sections(0).stages(ids.load_x).load().multicast().axis(), proto::ITEM_X);
  EXPECT_EQ(p.sections(0).stages(ids.mm).matmul().fidelity(), proto::LOFI);
  absl::StatusOr<Composition> back = FromProto(p);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectCompositionsEqual(c, *back);
  p.mutable_sections(0)->mutable_stages(ids.load_x)->mutable_load()->mutable_multicast()->clear_axis();
  absl::StatusOr<Composition> bad = FromProto(p);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("load.multicast.axis"));
  EXPECT_THAT(bad.status().message(), HasSubstr("UNSPECIFIED"));
}

TEST(ProtoIo, SfpuParametersRoundTripOnlyForRsqrt) {
  Body r = Unary(SfpuKind::Rsqrt(1000, 128), Op(0));
  proto::TensorBody p = BodyToProto(r);
  EXPECT_EQ(p.nodes(1).eps_nano(), 1000);
  EXPECT_EQ(p.nodes(1).over(), 128);
  // A hand-written EXP node with stray parameters parses to the builders' Exp().
  p.mutable_nodes(1)->set_sfpu(proto::EXP);
  absl::StatusOr<Body> back = BodyFromProto(p);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(BodyEqual(*back, Unary(SfpuKind::Exp(), Op(0))));
}

TEST(ProtoIo, DeepBodyRoundTripsWithoutRecursion) {
  // As deep as every reader admits (spatial/limits.h).
  Body b = Op(0);
  for (int64_t i = 1; i < kMaxBodyDepth; ++i) b = Shr(b, 1);
  proto::TensorBody p = BodyToProto(b);
  EXPECT_EQ(p.nodes_size(), kMaxBodyDepth);
  absl::StatusOr<Body> back = BodyFromProto(p);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(BodyToProto(*back).SerializeAsString(), p.SerializeAsString());
}

TEST(ProtoIo, WriteAndReadFilesInBothFormats) {
  Composition c = RichComposition();
  const std::string dir = ::testing::TempDir();
  for (const char* name : {"rich.textproto", "rich.binpb"}) {
    const std::string path = dir + "/" + name;
    ASSERT_TRUE(WriteComposition(path, c).ok());
    absl::StatusOr<Composition> back = ReadComposition(path);
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectCompositionsEqual(c, *back);
    std::remove(path.c_str());
  }
}

TEST(ProtoIo, ReadCompositionNamesTheFile) {
  const std::string path = ::testing::TempDir() + "/bad_version.textproto";
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("ir_version: IR_VERSION_UNSPECIFIED\nname: \"x\"\ntile_rows: 32\ntile_cols: 32\n", f);
  std::fclose(f);
  absl::StatusOr<Composition> c = ReadComposition(path);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr(path + ": error: "));
  EXPECT_THAT(c.status().message(), HasSubstr("ir_version"));
  std::remove(path.c_str());
  EXPECT_EQ(ReadComposition(path + ".missing").status().code(), absl::StatusCode::kNotFound);
}

// ── Hostile input ─────────────────────────────────────────────────────────────────────────────────────────────

absl::Status FromProtoStatus(const proto::Composition& p) { return FromProto(p).status(); }

TEST(ProtoIoHostile, UnknownIrVersion) {
  proto::Composition p = ToProto(RichComposition());
  p.set_ir_version(proto::IR_VERSION_UNSPECIFIED);
  EXPECT_THAT(FromProtoStatus(p).message(), HasSubstr("ir_version: 0"));
  p.set_ir_version(static_cast<proto::IrVersion>(2));
  EXPECT_THAT(FromProtoStatus(p).message(), HasSubstr("ir_version: 2"));
}

// The text parser takes escaped bytes into string fields; a name that is not UTF-8 is refused at the parse, by its
// path, as the wire parser refuses it (found by the program fuzzer: such a section name certified and ran on the
// VM, then the simulator's report, which carries the name, could not be read back).
TEST(ProtoIoHostile, TextStringsMustBeUtf8) {
  struct Case {
    const char* text;
    const char* expect;  // "" when it parses
  };
  const Case cases[] = {
      {"name: \"a\\377b\"", "f.textproto: error: Composition.name is not valid UTF-8"},
      {"sections { name: \"ok\" } sections { name: \"x\\300\\200\" }",  // an overlong NUL
       "f.textproto: error: Composition.sections[1].name is not valid UTF-8"},
      {"sections { tensors { name: \"\\355\\240\\200\" } }",  // a surrogate
       "f.textproto: error: Composition.sections[0].tensors[0].name is not valid UTF-8"},
      {"name: \"\\342\\202\"", "f.textproto: error: Composition.name is not valid UTF-8"},  // cut short
      {"name: \"caf\\303\\251 \\360\\237\\230\\200\"", ""},                    // two and four bytes
  };
  for (const Case& c : cases) {
    proto::Composition p;
    const absl::Status st = ParseTextProto(c.text, "f.textproto", &p);
    if (*c.expect == '\0') {
      EXPECT_TRUE(st.ok()) << c.text << ": " << st;
    } else {
      EXPECT_EQ(st, absl::InvalidArgumentError(c.expect)) << c.text;
    }
  }
}

// An Approx claim's error growth survives the wire; below 1, not finite, or on an Exact claim it is malformed.
TEST(ProtoIo, ClaimErrorGrowthRoundTripsAndIsChecked) {
  Composition c = RichComposition();
  c.sections[0].claim = NumericsClaim::Approx("a power by squaring", 8);
  proto::Composition p = ToProto(c);
  EXPECT_EQ(p.sections(0).claim().error_growth(), 8);
  absl::StatusOr<Composition> back = FromProto(p);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->sections[0].claim.error_growth, 8);
  ExpectCompositionsEqual(c, *back);
  for (double bad : {0.5, -1.0, std::numeric_limits<double>::infinity(), std::nan("")}) {
    p.mutable_sections(0)->mutable_claim()->set_error_growth(bad);
    EXPECT_THAT(FromProtoStatus(p).message(), HasSubstr("claim.error_growth"));
    EXPECT_THAT(FromProtoStatus(p).message(), HasSubstr("must be >= 1, or 0: none"));
  }
  p.mutable_sections(0)->mutable_claim()->set_error_growth(2);
  p.mutable_sections(0)->mutable_claim()->set_exact(true);
  EXPECT_THAT(FromProtoStatus(p).message(), HasSubstr("2 on an exact claim"));
}

TEST(ProtoIoHostile, NonPositiveTile) {
  proto::Composition p = ToProto(RichComposition());
  p.set_tile_cols(0);
  EXPECT_THAT(FromProtoStatus(p).message(), HasSubstr("tile_rows x tile_cols: 32 x 0"));
}

TEST(ProtoIoHostile, StageWithoutKind) {
  RichIds ids;
  proto::Composition p = ToProto(RichComposition(&ids));
  p.mutable_sections(0)->mutable_stages(ids.mm)->clear_matmul();
  absl::Status s = FromProtoStatus(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("section 'rich_fold' stage 'mm' (#8) stage has no kind (open algebra)"));
}

TEST(ProtoIoHostile, UnspecifiedEnumsAreRejectedWhereTheyAre) {
  RichIds ids;
  const proto::Composition good = ToProto(RichComposition(&ids));
  struct Case {
    const char* expect;
    std::function<void(proto::Composition&)> plant;
  };
  const std::vector<Case> cases = {
      {"section 'rich_fold' tensors[4] 'cache' role: UNSPECIFIED",
       [&](proto::Composition& p) { p.mutable_sections(0)->mutable_tensors(ids.cache)->set_role({}); }},
      {"tensors[0] 'x' precision: unknown value 99",
       [&](proto::Composition& p) {
         p.mutable_sections(0)->mutable_tensors(ids.x)->set_precision(static_cast<proto::Precision>(99));
       }},
      {"buffers[4] 'carry' kind: UNSPECIFIED",
       [&](proto::Composition& p) { p.mutable_sections(0)->mutable_buffers(ids.carry)->set_kind({}); }},
      {"buffers[0] 'idx_buf' precision: UNSPECIFIED",
       [&](proto::Composition& p) { p.mutable_sections(0)->mutable_buffers(ids.idx_buf)->set_precision({}); }},
      {"stage 'gather' (#3) phase: UNSPECIFIED",
       [&](proto::Composition& p) { p.mutable_sections(0)->mutable_stages(ids.gather)->set_phase({}); }},
      {"stage 'load_x' (#5) load.pattern.origin.steps[0].var: UNSPECIFIED",
       [&](proto::Composition& p) {
         p.mutable_sections(0)->mutable_stages(ids.load_x)->mutable_load()->mutable_pattern()->mutable_origin()
             ->mutable_steps(0)->set_var({});
       }},
      {"stage 'mix' (#7) ins[1].terms[0].var: UNSPECIFIED",
       [&](proto::Composition& p) {
         p.mutable_sections(0)->mutable_stages(ids.mix)->mutable_generic()->mutable_ins(1)->mutable_terms(0)->set_var(
             {});
       }},
      {"stage 'finish' (#9) iters[1].kind: UNSPECIFIED",
       [&](proto::Composition& p) {
         p.mutable_sections(0)->mutable_stages(ids.finish)->mutable_generic()->mutable_iters(1)->set_kind({});
       }},
      {"stage 'finish' (#9) body.nodes[0] op: UNSPECIFIED",
       [&](proto::Composition& p) {
         p.mutable_sections(0)->mutable_stages(ids.finish)->mutable_generic()->mutable_body()->mutable_nodes(0)
             ->set_op({});
       }},
      {"section 'rich_fold' acc_precision: UNSPECIFIED",
       [&](proto::Composition& p) { p.mutable_sections(0)->set_acc_precision({}); }},
      {"state_order[0].access: UNSPECIFIED",
       [&](proto::Composition& p) { p.mutable_state_order(0)->set_access({}); }},
      {"tensors[1] 'idx' init: no kind",
       [&](proto::Composition& p) { p.mutable_sections(0)->mutable_tensors(ids.idx)->clear_init(); }},
  };
  for (const Case& c : cases) {
    proto::Composition p = good;
    c.plant(p);
    absl::Status s = FromProtoStatus(p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.expect;
    EXPECT_THAT(s.message(), HasSubstr(c.expect));
  }
}

proto::TensorBody Nodes(std::initializer_list<proto::BodyNode> nodes) {
  proto::TensorBody b;
  for (const auto& n : nodes) *b.add_nodes() = n;
  return b;
}

proto::BodyNode Node(proto::BodyNode::Op op, int a = 0, int b = 0) {
  proto::BodyNode n;
  n.set_op(op);
  n.set_a(a);
  n.set_b(b);
  return n;
}

TEST(ProtoIoHostile, BodyChildIndices) {
  EXPECT_THAT(BodyFromProto(proto::TensorBody()).status().message(), HasSubstr("empty body"));
  // A child must be an earlier node: itself, a later node and a negative index are all cycles or garbage.
  EXPECT_THAT(BodyFromProto(Nodes({Node(proto::BodyNode::OPERAND), Node(proto::BodyNode::ADD, 0, 1)}))
                  .status()
                  .message(),
              HasSubstr("nodes[1] b: child index 1 must name an earlier node (0..0)"));
  EXPECT_THAT(BodyFromProto(Nodes({Node(proto::BodyNode::OPERAND), Node(proto::BodyNode::SHR, -3)})).status().message(),
              HasSubstr("nodes[1] a: child index -3"));
  EXPECT_THAT(BodyFromProto(Nodes({Node(proto::BodyNode::ADD, 0, 0)})).status().message(),
              HasSubstr("nodes[0] a: child index 0"));
  proto::BodyNode sel = Node(proto::BodyNode::SELECT);
  sel.set_b(0);
  sel.set_c(0);
  sel.set_pred(proto::BodyNode::AXIS_LT);
  EXPECT_THAT(BodyFromProto(Nodes({Node(proto::BodyNode::CONST), sel})).status().message(),
              HasSubstr("nodes[1] pred_var: UNSPECIFIED"));
  proto::BodyNode un = Node(proto::BodyNode::UNARY, 0);
  EXPECT_THAT(BodyFromProto(Nodes({Node(proto::BodyNode::CONST), un})).status().message(),
              HasSubstr("nodes[1] sfpu: UNSPECIFIED"));
}

TEST(ProtoIoHostile, BodyChildErrorNamesTheStage) {
  RichIds ids;
  proto::Composition p = ToProto(RichComposition(&ids));
  proto::TensorBody* body = p.mutable_sections(0)->mutable_stages(ids.finish)->mutable_generic()->mutable_body();
  body->mutable_nodes(body->nodes_size() - 1)->set_a(body->nodes_size() + 5);
  EXPECT_THAT(FromProtoStatus(p).message(), HasSubstr("section 'rich_fold' stage 'finish' (#9) body.nodes[3] a:"));
}

TEST(ProtoIoHostile, BodySizeLimits) {
  proto::TensorBody huge;
  huge.mutable_nodes()->Reserve(kMaxBodyNodes + 1);
  for (int64_t i = 0; i <= kMaxBodyNodes; ++i) huge.add_nodes()->set_op(proto::BodyNode::CONST);
  EXPECT_THAT(BodyFromProto(huge).status().message(), HasSubstr("1048577 nodes; the limit is 1048576"));

  proto::TensorBody deep;
  deep.add_nodes()->set_op(proto::BodyNode::OPERAND);
  for (int i = 1; i <= kMaxBodyDepth; ++i) *deep.add_nodes() = Node(proto::BodyNode::SHR, i - 1);
  EXPECT_THAT(BodyFromProto(deep).status().message(), HasSubstr("depth 2001 exceeds the limit of 2000"));

  // 40 nodes, each adding the previous one to itself: 2^40 nodes once shared subtrees are expanded.
  proto::TensorBody wide;
  wide.add_nodes()->set_op(proto::BodyNode::OPERAND);
  for (int i = 1; i < 40; ++i) *wide.add_nodes() = Node(proto::BodyNode::ADD, i - 1, i - 1);
  EXPECT_THAT(BodyFromProto(wide).status().message(), HasSubstr("expands to more than"));
}

// Random byte damage to a valid program: parse, convert, validate and print must return, never crash.
TEST(ProtoIoHostile, DamagedBytesNeverCrash) {
  std::string good;
  ASSERT_TRUE(ToProto(RichComposition()).SerializeToString(&good));
  google::protobuf::LogSilencer quiet;  // damaged strings are invalid UTF-8; protobuf logs each one
  std::mt19937 rng(12345);
  int parsed = 0, converted = 0, valid = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bytes = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng() & 0xff);
    proto::Composition p;
    if (!p.ParseFromString(bytes)) continue;
    ++parsed;
    absl::StatusOr<Composition> c = FromProto(p);
    if (!c.ok()) {
      EXPECT_FALSE(c.status().message().empty());
      continue;
    }
    ++converted;
    if (ValidateComposition(*c, c->tile_rows, c->tile_cols).ok()) ++valid;
    EXPECT_FALSE(PrintComposition(*c).empty());
  }
  // The damage must reach every layer, or this test checks nothing.
  EXPECT_GT(parsed, 100);
  EXPECT_GT(converted, 50);
  EXPECT_GT(converted, valid);
}

}  // namespace
}  // namespace spatial

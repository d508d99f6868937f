// Hostile input: random mutations of valid programs on the wire (ids out of range, absurd sizes, negative
// extents, cycles, unknown enums, cleared oneofs) must give diagnostics with known codes, never a crash or a hang.
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "certify/certify.h"
#include "certify/codes.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/reflection.h"
#include "gtest/gtest.h"
#include "spatial/proto_io.h"
#include "spatial/limits.h"
#include "tests/certify/test_programs.h"
#ifdef SPATIAL_HAVE_VM
#include "sim/vm/vm.h"
#endif

namespace spatial {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr int64_t kNasty[] = {-1, 0, 1, 2, 3, 7, 64, 1 << 20, int64_t{1} << 40, std::numeric_limits<int64_t>::max(),
                              std::numeric_limits<int64_t>::min()};

// Every message reachable from `m` (present submessages only), for picking a mutation site.
void Collect(Message* m, std::vector<Message*>& out) {
  out.push_back(m);
  const Reflection* r = m->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(*m, &fields);
  for (const FieldDescriptor* f : fields) {
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int i = 0; i < r->FieldSize(*m, f); ++i) Collect(r->MutableRepeatedMessage(m, f, i), out);
    } else {
      Collect(r->MutableMessage(m, f), out);
    }
  }
}

// Sets one scalar field of `m` (or one element of a repeated one) to a nasty value, or clears a field.
void Mutate(Message* m, std::mt19937_64& g) {
  const Reflection* r = m->GetReflection();
  const auto* d = m->GetDescriptor();
  if (d->field_count() == 0) return;
  const FieldDescriptor* f = d->field(static_cast<int>(g() % d->field_count()));
  const int64_t v = kNasty[g() % std::size(kNasty)];
  if (g() % 8 == 0) {
    r->ClearField(m, f);
    return;
  }
  if (f->is_repeated()) {
    const int n = r->FieldSize(*m, f);
    if (n == 0) return;
    const int i = static_cast<int>(g() % n);
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: r->SetRepeatedInt32(m, f, i, static_cast<int32_t>(v)); break;
      case FieldDescriptor::CPPTYPE_INT64: r->SetRepeatedInt64(m, f, i, v); break;
      case FieldDescriptor::CPPTYPE_ENUM: r->SetRepeatedEnumValue(m, f, i, static_cast<int>(v % 12)); break;
      case FieldDescriptor::CPPTYPE_MESSAGE: r->RemoveLast(m, f); break;
      default: break;
    }
    return;
  }
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: r->SetInt32(m, f, static_cast<int32_t>(v)); break;
    case FieldDescriptor::CPPTYPE_INT64: r->SetInt64(m, f, v); break;
    case FieldDescriptor::CPPTYPE_DOUBLE: r->SetDouble(m, f, static_cast<double>(v)); break;
    case FieldDescriptor::CPPTYPE_BOOL: r->SetBool(m, f, !r->GetBool(*m, f)); break;
    case FieldDescriptor::CPPTYPE_ENUM: r->SetEnumValue(m, f, static_cast<int>(v % 12)); break;
    case FieldDescriptor::CPPTYPE_STRING: r->SetString(m, f, "x"); break;
    default: break;
  }
}

const std::set<std::string>& KnownCodes() {
  static const std::set<std::string> codes(codes::kAllCodes.begin(), codes::kAllCodes.end());
  return codes;
}

TEST(Hostile, RandomMutationsGiveDiagnosticsNotCrashes) {
  std::vector<proto::Composition> seeds;
  seeds.push_back(ToProto(certify_testing::Scale2().Build()));
  seeds.push_back(ToProto(certify_testing::Fold2().Build()));
  {
    certify_testing::Fold2 f;
    const TensorId pos = f.t.AddTensor("pos", TensorRole::kInput, 1, 1, Precision::kInt32, TensorInit::External());
    f.t.SetTrip(Trip{pos, 0, 1, 9, 7, 8}, 2);
    seeds.push_back(ToProto(f.Build()));
  }
  std::mt19937_64 g(12345);
  int rejected = 0;
  for (int n = 0; n < 3000; ++n) {
    proto::Composition p = seeds[n % seeds.size()];
    const int mutations = 1 + static_cast<int>(g() % 3);
    for (int k = 0; k < mutations; ++k) {
      std::vector<Message*> sites;
      Collect(&p, sites);
      Mutate(sites[g() % sites.size()], g);
    }
    CertifyResult r = CertifyProto(p, certify_testing::Tiny());
    rejected += !r.ok();
    for (const auto& d : r.diagnostics) {
      ASSERT_TRUE(KnownCodes().count(d.code())) << d.code();
      ASSERT_FALSE(d.message().empty()) << d.code();
    }
  }
  // Most single-field mutations of a tight program break something.
  EXPECT_GE(rejected, 1500);
}

TEST(Hostile, HugeCoefficientsAndExtentsSaturateInsteadOfOverflowing) {
  certify_testing::Scale2 p;
  Section& s = p.t.mutable_section();
  std::get<Load>(s.stages[p.load].op).pattern.origin.steps = {{LoopVar::kItemX, std::numeric_limits<int64_t>::max()},
                                                               {LoopVar::kItemX, std::numeric_limits<int64_t>::max()}};
  Generic& g = std::get<Generic>(s.stages[p.gen].op);
  g.ins[0].base = std::numeric_limits<int64_t>::min();
  g.ins[0].terms.push_back({LoopVar::kCol, std::numeric_limits<int64_t>::max()});
  std::vector<WorkItem> items = {{0, 0, std::numeric_limits<int64_t>::max(), TileRect{0, 0, 1, 2}}};
  CertifyResult r = Certify(p.Build(items), certify_testing::Tiny());
  ASSERT_TRUE(certify_testing::OnlyCode(r, "INDEX_OUT_OF_RANGE"));
  EXPECT_EQ(r.diagnostics.size(), 2u);
}

TEST(Hostile, DeepBodyIsRefusedNotRecursedToDeath) {
  certify_testing::Scale2 p;
  Body b = Op(0);
  for (int i = 0; i < 20000; ++i) b = Add(b, Const(1.0));
  std::get<Generic>(p.t.mutable_section().stages[p.gen].op).body = b;
  CertifyResult r = Certify(p.Build(), certify_testing::Tiny());
  ASSERT_TRUE(certify_testing::OnlyCode(r, "MALFORMED")) << certify_testing::Explain(r);
}

TEST(Hostile, SelectsNestedInThenBranchesAreRefusedWithinBoundedStack) {
  certify_testing::Scale2 p;
  Body b = Op(0);
  for (int i = 0; i < 20000; ++i) b = Select(Pred::Lt(LoopVar::kCol, 16 - i % 2), b, Op(0));
  std::get<Generic>(p.t.mutable_section().stages[p.gen].op).body = b;
  CertifyResult r = Certify(p.Build(), certify_testing::Tiny());
  ASSERT_TRUE(certify_testing::OnlyCode(r, "MALFORMED")) << certify_testing::Explain(r);
}

TEST(Hostile, SharedSubtreesWithExponentialExpansionAreBounded) {
  certify_testing::Scale2 p;
  Body b = Op(0);
  for (int i = 0; i < 60; ++i) b = Add(b, b);  // 2^60 nodes when expanded
  std::get<Generic>(p.t.mutable_section().stages[p.gen].op).body = b;
  CertifyResult r = Certify(p.Build(), certify_testing::Tiny());
  ASSERT_TRUE(certify_testing::OnlyCode(r, "MALFORMED")) << certify_testing::Explain(r);
}

}  // namespace
}  // namespace spatial

namespace spatial {
namespace {

using namespace certify_testing;  // NOLINT: the shared builders (Template helpers, Tiny, Explain)

// y = x + 1 + 1 + ... : a body `depth` nodes deep, built in C++ (not through the wire parser).
Composition DeepBody(int64_t depth) {
  Body b = Op(0);
  for (int64_t i = 1; i < depth; ++i) b = Add(b, Const(1.0));
  Template t{8, 8};
  const TensorId x = t.AddTensor("x", TensorRole::kInput, 1, 16, Precision::kBf16, TensorInit::External());
  const TensorId y = t.AddTensor("y", TensorRole::kOutput, 1, 16, Precision::kBf16, TensorInit::Zero());
  const BufferId in = t.AddBuffer("in", 2, Precision::kBf16);
  const BufferId out = t.AddBuffer("out", 2, Precision::kBf16);
  const StageId load = t.AddLoad("load_x", x, {}, 2, in);
  const StageId gen = t.AddGeneric("deep", FlatSpace(16), {in}, {At(0)}, At(0), b, out);
  const StageId store = t.AddStore("store_y", y, {}, 2, out);
  t.AddEdge(load, in, gen);
  t.AddEdge(gen, out, store);
  return Compose(t.Finish("deep", WholeRow(2), Precision::kFp32, NumericsClaim::Approx("adds")));
}

// The finding: a body 2002 nodes deep certified and the VM refused it (three limits: 8192, 2000, 10000). Now one
// limit (spatial/limits.h): at the limit it certifies and runs; one past it neither certifies nor runs.
TEST(HostileLimits, CertifiedBodiesRunAndRefusedOnesDoNot) {
  const Composition at = DeepBody(kMaxBodyDepth);
  EXPECT_TRUE(Certify(at, Tiny()).ok()) << Explain(Certify(at, Tiny()));
#ifdef SPATIAL_HAVE_VM
  TensorMap in;
  in["x"] = TensorData{1, 16, Precision::kBf16, std::vector<double>(16, 0.5)};
  EXPECT_TRUE(RunComposition(at, 8, 8, in).ok());
#endif
  const Composition past = DeepBody(kMaxBodyDepth + 2);
  const CertifyResult r = Certify(past, Tiny());
  EXPECT_TRUE(OnlyCode(r, "MALFORMED"));
  EXPECT_NE(Explain(r).find("exceeds the limit of 2000"), std::string::npos) << Explain(r);
#ifdef SPATIAL_HAVE_VM
  EXPECT_FALSE(RunComposition(past, 8, 8, in).ok());
#endif
}

}  // namespace
}  // namespace spatial

// State tensors: in-place updates across sections and the declared state order (StaleStateRead).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/vm/vm.h"
#include "spatial/builder.h"
#include "spatial/maps.h"

namespace spatial {
namespace {

constexpr Precision kF = Precision::kFp32;

TensorData Row(std::vector<double> v) { return TensorData{1, static_cast<int64_t>(v.size()), kF, std::move(v)}; }

// Section "bump": cache tile 1 += 1, in place. Section "read": out = cache tile 1.
Section Bump() {
  Template t(4, 4);
  TensorId cache = t.AddTensor("cache", TensorRole::kState, 1, 8, kF, TensorInit::External());
  BufferId a = t.AddBuffer("a", 1, kF);
  BufferId b = t.AddBuffer("b", 1, kF);
  t.AddLoadBlockAt("load", cache, 1, {}, {}, a);
  t.AddGeneric("plus1", FlatSpace(4), {a}, {At(0)}, At(0), Add(Op(0), Const(1)), b);
  t.AddStoreBlock("store", cache, 1, {}, {}, b);
  return t.Finish("bump", WholeRow(1), kF, NumericsClaim::Exact());
}

Section Read() {
  Template t(4, 4);
  TensorId cache = t.AddTensor("cache", TensorRole::kState, 1, 8, kF, TensorInit::External());
  TensorId out = t.AddTensor("out", TensorRole::kOutput, 1, 4, kF, TensorInit::Zero());
  BufferId a = t.AddBuffer("a", 1, kF);
  t.AddLoadBlockAt("load", cache, 1, {}, {}, a);
  t.AddStore("store", out, {}, 1, a);
  return t.Finish("read", WholeRow(1), kF, NumericsClaim::Exact());
}

Composition BumpThenRead() {
  Composition c;
  c.name = "state";
  c.sections = {Bump(), Read()};
  DeclareStateOrder(c);
  return c;
}

TEST(VmState, InPlaceUpdateIsSeenByTheNextSection) {
  Composition c = BumpThenRead();
  ASSERT_EQ(c.state_order.size(), 3u);  // READ bump, WRITE bump, READ read
  auto out = RunComposition(c, 4, 4, {{"cache", Row({0, 1, 2, 3, 4, 5, 6, 7})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("cache").values, (std::vector<double>{0, 1, 2, 3, 5, 6, 7, 8}));
  EXPECT_EQ(out->at("out").values, (std::vector<double>{5, 6, 7, 8}));
}

TEST(VmState, ReadDeclaredBeforeTheWriteItFollowsIsStale) {
  Composition c = BumpThenRead();
  // Declares that "read" reads the cache before "bump" writes it; but bump runs first.
  c.state_order = {{"cache", 0, StateAccess::kRead}, {"cache", 1, StateAccess::kRead},
                   {"cache", 0, StateAccess::kWrite}};
  auto out = RunComposition(c, 4, 4, {{"cache", Row({0, 1, 2, 3, 4, 5, 6, 7})}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(out.status().message(),
            "StaleStateRead: section 'read' reads state 'cache' after 1 of its 0 declared earlier writes");
}

TEST(VmState, ReadOfAWriteThatNeverHappenedIsStale) {
  Composition c;
  c.name = "state";
  c.sections = {Read(), Read()};
  c.sections[0].name = "a";
  c.sections[1].name = "b";
  c.state_order = {{"cache", 0, StateAccess::kRead}, {"cache", 0, StateAccess::kWrite},
                   {"cache", 1, StateAccess::kRead}};
  auto out = RunComposition(c, 4, 4, {{"cache", Row({0, 1, 2, 3, 4, 5, 6, 7})}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "StaleStateRead: section 'b' reads state 'cache' after 0 of its 1 declared earlier writes");
}

TEST(VmState, UndeclaredReadIsStale) {
  Composition c = BumpThenRead();
  c.state_order.pop_back();  // drop READ(cache, read)
  auto out = RunComposition(c, 4, 4, {{"cache", Row({0, 1, 2, 3, 4, 5, 6, 7})}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "StaleStateRead: section 'read' reads state 'cache' but the state order declares no such read");
}

TEST(VmState, EmptyStateOrderChecksNothing) {
  Composition c = BumpThenRead();
  c.state_order.clear();
  auto out = RunComposition(c, 4, 4, {{"cache", Row({0, 1, 2, 3, 4, 5, 6, 7})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("out").values, (std::vector<double>{5, 6, 7, 8}));
}

}  // namespace
}  // namespace spatial

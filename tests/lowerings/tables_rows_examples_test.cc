// The shipped examples of the tables-and-heads and rows families (examples/ops/), each through the three-way check
// on test_tiny and wormhole_n150: they are what a reader runs first.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "spatial/proto_file.h"
#include "spatial/proto_io.h"
#include "tests/lowerings/three_way.h"

namespace spatial::testing {
namespace {

proto::OpSpec Example(const std::string& kind) {
  proto::OpSpec spec;
  absl::Status read = ReadProtoFile(std::string(SPATIAL_SOURCE_DIR) + "/examples/ops/" + kind + ".textproto", &spec);
  EXPECT_TRUE(read.ok()) << read;
  EXPECT_EQ(OpKindName(spec), kind);
  return spec;
}

TEST(TablesRowsExamplesTest, EveryExampleIsCheckedThreeWays) {
  for (const char* kind : {"transpose", "head_slice", "join", "head_matmul", "l2norm", "fused_row", "softmax"}) {
    SCOPED_TRACE(kind);
    proto::OpSpec spec = Example(kind);
    // A Param weight the example leaves unknown gets values here, so the reference and the VM see the same ones.
    for (proto::Operand& o : *spec.mutable_operands()) {
      if (o.name() == "w_uk" || o.name() == "input_layernorm_weight") {
        o.mutable_fill()->mutable_real_pattern()->set_modulus(101);
        o.mutable_fill()->mutable_real_pattern()->set_scale(0.01);
        o.mutable_fill()->mutable_real_pattern()->set_offset(-0.5);
      }
    }
    const double tol = std::string(kind) == "transpose" || std::string(kind) == "head_slice" ||
                               std::string(kind) == "join"
                           ? 0.0
                           : 1e-12;
    for (const char* target : {"test_tiny", "wormhole_n150"}) ThreeWay(spec, Shipped(target), Reals(-4, 4), tol);
  }
}

// The real widths of the examples take the forms the seed picks for them on wormhole_n150.
TEST(TablesRowsExamplesTest, ExamplesTakeTheirForms) {
  const Target& t = Shipped("wormhole_n150");
  absl::StatusOr<Composition> slice = Lower(Example("head_slice"), t);
  absl::StatusOr<Composition> join = Lower(Example("join"), t);
  absl::StatusOr<Composition> hm = Lower(Example("head_matmul"), t);
  absl::StatusOr<Composition> norm = Lower(Example("fused_row"), t);
  ASSERT_TRUE(slice.ok() && join.ok() && hm.ok() && norm.ok());
  EXPECT_EQ(slice->sections[0].name, "head_slice_16x64_of_128_tiled");
  EXPECT_EQ(join->sections[0].name, "join_1x16_64+64_tiled");
  EXPECT_EQ(hm->sections[0].name, "head_matmul_1x16x512x128_tiled");
  EXPECT_EQ(norm->sections.size(), 4u);
  EXPECT_EQ(norm->sections[1].name, "matmul_1x1024x1");
}

// Same spec and target, byte-identical program: every form of both families, lowered against two loads of each
// target.
TEST(TablesRowsExamplesTest, LoweringIsDeterministic) {
  std::vector<proto::OpSpec> specs;
  for (const char* kind : {"transpose", "head_slice", "join", "head_matmul", "l2norm", "fused_row", "softmax"}) {
    specs.push_back(Example(kind));
  }
  proto::OpSpec slice = Spec({"x"});  // column-blocked on both targets
  slice.mutable_head_slice()->set_every(80);
  slice.mutable_head_slice()->set_width(40);
  slice.mutable_head_slice()->set_n(24 * 80);
  specs.push_back(slice);
  proto::OpSpec heads = Spec({"x"});  // the head as the item
  heads.mutable_l2norm()->set_rows(16);
  heads.mutable_l2norm()->set_cols(32);
  specs.push_back(heads);
  for (const char* target : {"test_tiny", "wormhole_n150"}) {
    absl::StatusOr<Target> t1 = LoadTarget(target);
    absl::StatusOr<Target> t2 = LoadTarget(target);
    ASSERT_TRUE(t1.ok() && t2.ok());
    for (const proto::OpSpec& spec : specs) {
      absl::StatusOr<Composition> a = Lower(spec, *t1);
      absl::StatusOr<Composition> b = Lower(spec, *t2);
      ASSERT_TRUE(a.ok() && b.ok()) << spec.ShortDebugString() << ": " << a.status() << " / " << b.status();
      const std::string bytes = ToProto(*a).SerializeAsString();
      EXPECT_FALSE(bytes.empty());
      EXPECT_EQ(bytes, ToProto(*b).SerializeAsString()) << spec.ShortDebugString() << " on " << target;
    }
  }
}

}  // namespace
}  // namespace spatial::testing

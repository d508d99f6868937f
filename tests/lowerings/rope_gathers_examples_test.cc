// The shipped examples of the gathers, row writes, argmax and rope (examples/ops/): Qwen3-0.6B's decode step at its
// real shapes — lowered and certified as shipped, and run on the VM against the op reference (the 151,936-row
// embedding table with fewer rows, so the VM holds it).
#include <cmath>
#include <map>
#include <memory>
#include <string>

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

// Indices at the LAST row or position their op admits (`last`), real RoPE angles for the tables, data elsewhere.
Draw ExampleDraw(int64_t last, int64_t half, double theta) {
  auto counts = std::make_shared<std::map<std::string, int64_t>>();
  return [=](const std::string& name, Rng& r) -> double {
    if (name == "token" || name == "pos") return static_cast<double>(last);
    if (name == "tokens") return static_cast<double>((*counts)[name]++ == 0 ? 1 : r.Int(1, last));
    if (name == "rope_cos" || name == "rope_sin") {
      const int64_t e = (*counts)[name]++;
      const double angle = static_cast<double>(e / half) * std::pow(theta, -static_cast<double>(e % half) / half);
      return name == "rope_cos" ? std::cos(angle) : std::sin(angle);
    }
    return r.Real(-4, 4);
  };
}

TEST(RopeGathersExamplesTest, ShippedShapesLowerAndCertify) {
  const Target& wh = Shipped("wormhole_n150");
  const std::map<std::string, std::vector<std::string>> sections = {
      {"row_gather", {"row_gather_151936x1024"}},
      {"rows_gather", {"rows_gather_4x151936x1024"}},
      {"set_row", {"set_row_4096x1024_dense"}},
      {"argmax",
       {"argmax_blocks_151936_b8", "argmax_merge1_f5", "argmax_merge2_f5", "argmax_merge3_f5", "argmax_merge4_f5"}},
      {"rope", {"rope_16x128_half64"}},
  };
  for (const auto& [kind, names] : sections) {
    SCOPED_TRACE(kind);
    proto::OpSpec spec = Example(kind);
    absl::StatusOr<Composition> c = Lower(spec, wh);
    ASSERT_TRUE(c.ok()) << c.status();
    std::vector<std::string> got;
    for (const Section& s : c->sections) got.push_back(s.name);
    EXPECT_EQ(got, names);
    Outcomes o = CertifyWhereLowered(spec);
    EXPECT_EQ(o.refused, std::vector<std::string>{"grayskull_e150"});
  }
}

// Same spec and target, the same program byte for byte (DESIGN §5).
TEST(RopeGathersExamplesTest, LoweringIsDeterministic) {
  for (const char* kind : {"row_gather", "rows_gather", "set_row", "argmax", "rope"}) {
    for (const char* target : {"test_tiny", "wormhole_n150"}) {
      absl::StatusOr<Target> t1 = LoadTarget(target);
      absl::StatusOr<Target> t2 = LoadTarget(target);
      ASSERT_TRUE(t1.ok() && t2.ok());
      absl::StatusOr<Composition> a = Lower(Example(kind), *t1);
      absl::StatusOr<Composition> b = Lower(Example(kind), *t2);
      ASSERT_TRUE(a.ok() && b.ok()) << kind << " on " << target;
      const std::string bytes = ToProto(*a).SerializeAsString();
      EXPECT_FALSE(bytes.empty());
      EXPECT_EQ(bytes, ToProto(*b).SerializeAsString()) << kind << " on " << target;
    }
  }
}

TEST(RopeGathersExamplesTest, ExamplesMatchTheirReferences) {
  const Target& wh = Shipped("wormhole_n150");
  // The embedding table with 300 rows instead of 151,936: the same program but for its bounds.
  for (const char* kind : {"row_gather", "rows_gather"}) {
    proto::OpSpec spec = Example(kind);
    if (spec.has_row_gather()) spec.mutable_row_gather()->set_rows(300);
    if (spec.has_rows_gather()) spec.mutable_rows_gather()->set_rows(300);
    ThreeWay(spec, wh, ExampleDraw(300, 1, 1.0), 0.0);
  }
  ThreeWay(Example("set_row"), wh, ExampleDraw(4096, 1, 1.0), 0.0);
  ThreeWay(Example("argmax"), wh, ExampleDraw(1, 1, 1.0), 0.0);
  const proto::OpSpec rope = Example("rope");
  ThreeWay(rope, wh, ExampleDraw(rope.rope().cache(), rope.rope().half(), rope.rope().theta()), 1e-12);
}

}  // namespace
}  // namespace spatial::testing

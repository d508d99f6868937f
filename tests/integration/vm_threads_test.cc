// ★ ITEMS ARE INDEPENDENT, SO THEY RUN ON EVERY CORE WITH THE SAME BITS (sim/vm/vm.cc): a run's every tensor is
// bit-identical at one, two and three threads, under the exact model and the target's numerics, on lowered programs
// whose sections fold (attention prefill, a K-folded matmul, the blocked mixture of experts with its gathers).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lowerings/registry.h"
#include "sim/numerics/target_model.h"
#include "sim/vm/vm.h"
#include "tests/lowerings/harness.h"
#include "tests/lowerings/moe_cases.h"

namespace spatial {
namespace {

using testing::MakeInputs;
using testing::Reals;
using testing::Shipped;

std::vector<proto::OpSpec> Specs() {
  std::vector<proto::OpSpec> v;
  proto::OpSpec attn = testing::Spec({"q", "k", "v"});
  auto* a = attn.mutable_attention();
  a->set_h(4);
  a->set_kv(2);
  a->set_hd(64);
  a->set_vd(64);
  a->set_l(256);
  a->set_rows(96);
  a->mutable_pos()->set_literal(1);
  v.push_back(attn);
  proto::OpSpec mm = testing::Spec({"a", "b"});
  mm.mutable_matmul()->set_m(128);
  mm.mutable_matmul()->set_k(512);
  mm.mutable_matmul()->set_n(160);
  v.push_back(mm);
  v.push_back(testing::MoeSpecOf(testing::MoeCase{"wormhole_n150", 64, 64, 32, 4}));
  return v;
}

TEST(VmThreads, ThreadCountDoesNotChangeABit) {
  const Target& t = Shipped("wormhole_n150");
  const std::unique_ptr<ValueModel> numerics = MakeTargetModel(t);
  for (const proto::OpSpec& spec : Specs()) {
    SCOPED_TRACE(spec.ShortDebugString());
    absl::StatusOr<Composition> c = Lower(spec, t);
    ASSERT_TRUE(c.ok()) << c.status();
    const TensorMap inputs = MakeInputs(*c, Reals(-2, 2), 11);
    for (const ValueModel* model : std::vector<const ValueModel*>{nullptr, numerics.get()}) {
      std::vector<TensorMap> runs;
      for (int threads : {1, 2, 3}) {
        VmOptions o;
        o.model = model;
        o.threads = threads;
        // Progress is reported for the items the calling thread runs: all of them in order, only every T-th when
        // the items are shared among T workers — proof the parallel path ran, so equal bits mean something.
        int64_t reported = 0;
        o.progress = [&reported](int, int, int64_t, int64_t) { ++reported; };
        absl::StatusOr<TensorMap> r = RunComposition(*c, t.tile_rows(), t.tile_cols(), inputs, o);
        ASSERT_TRUE(r.ok()) << r.status();
        int64_t total = 0;
        for (const Section& s : c->sections) total += static_cast<int64_t>(s.items.size());
        if (threads == 1) {
          EXPECT_EQ(reported, total);
        } else {
          EXPECT_LT(reported, total) << "no section's items ran on more than one thread";
        }
        runs.push_back(std::move(*r));
      }
      for (size_t i = 1; i < runs.size(); ++i) {
        ASSERT_EQ(runs[i].size(), runs[0].size());
        for (const auto& [name, d] : runs[0]) {
          const TensorData& other = runs[i].at(name);
          ASSERT_EQ(other.values.size(), d.values.size()) << name;
          for (size_t e = 0; e < d.values.size(); ++e) {
            // Bits, NaN included: memcmp-equal doubles.
            ASSERT_EQ(std::memcmp(&other.values[e], &d.values[e], sizeof(double)), 0)
                << name << " element " << e << " at " << (i + 1) << " threads";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace spatial

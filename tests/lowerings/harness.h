// The three-way check of a lowering, shared by the lowerings tests: lower the spec, validate the program, run it on
// the f64 VM with deterministic pseudo-random inputs, and compare against the op reference.
#ifndef TESTS_LOWERINGS_HARNESS_H_
#define TESTS_LOWERINGS_HARNESS_H_

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <functional>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "lowerings/reference.h"
#include "lowerings/registry.h"
#include "proto/op.pb.h"
#include "sim/vm/vm.h"
#include "spatial/tensor_data.h"
#include "spatial/validate.h"
#include "targets/loader.h"

namespace spatial::testing {

// The shipped target `name`, loaded once per process.
inline const Target& Shipped(const std::string& name) {
  static std::map<std::string, Target> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    absl::StatusOr<Target> t = LoadTarget(name);
    EXPECT_TRUE(t.ok()) << t.status();
    it = cache.emplace(name, t.ok() ? *t : Target(proto::Target())).first;
  }
  return it->second;
}

// splitmix64: the same stream on every machine.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi).
  double Real(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi].
  int64_t Int(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }

 private:
  uint64_t s_;
};

// Draws one value of input tensor `tensor` (its name) from `rng`.
using Draw = std::function<double(const std::string& tensor, Rng& rng)>;

inline Draw Reals(double lo, double hi) {
  return [lo, hi](const std::string&, Rng& r) { return r.Real(lo, hi); };
}
inline Draw Ints(int64_t lo, int64_t hi) {
  return [lo, hi](const std::string&, Rng& r) { return static_cast<double>(r.Int(lo, hi)); };
}

// Inputs for every tensor the composition reads, rows x cols each.
inline TensorMap MakeInputs(const Composition& c, const Draw& draw, uint64_t seed) {
  TensorMap inputs;
  Rng rng(seed);
  for (const Tensor& t : CompositionInputs(c)) {
    TensorData d{t.rows, t.cols, t.precision, std::vector<double>(t.rows * t.cols)};
    for (double& v : d.values) v = draw(t.name, rng);
    inputs[t.name] = std::move(d);
  }
  return inputs;
}

// |got - want| <= tol * max(|want|, 1): relative for values of magnitude one and more, absolute below. The tanh
// forms of the GELU and softcap references cancel near their zeros (1 + tanh z for very negative z), so a pure
// relative bound there would judge the reference's rounding rather than the program.
inline bool Near(double got, double want, double tol) {
  if (tol == 0.0) return got == want;
  return std::fabs(got - want) <= tol * std::max(std::fabs(want), 1.0);
}

// Lowers `spec` on `target`, validates the program, runs it on the VM and compares its result with the reference.
// tol 0 demands equality. Returns the composition for further checks.
inline Composition CheckLowering(const proto::OpSpec& spec, const Target& target, const Draw& draw, double tol,
                                 uint64_t seed = 1) {
  SCOPED_TRACE(spec.ShortDebugString() + " on " + target.name());
  absl::StatusOr<Composition> c = Lower(spec, target);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return {};
  absl::Status valid = ValidateComposition(*c, target.tile_rows(), target.tile_cols());
  EXPECT_TRUE(valid.ok()) << valid;
  TensorMap inputs = MakeInputs(*c, draw, seed);
  absl::StatusOr<TensorMap> vm = RunComposition(*c, target.tile_rows(), target.tile_cols(), inputs);
  EXPECT_TRUE(vm.ok()) << vm.status();
  absl::StatusOr<TensorMap> ref = ReferenceOp(spec, inputs);
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (!vm.ok() || !ref.ok()) return *c;
  auto got_it = vm->find(spec.out());
  auto want_it = ref->find(spec.out());
  EXPECT_NE(got_it, vm->end()) << "the VM produced no '" << spec.out() << "'";
  EXPECT_NE(want_it, ref->end());
  if (got_it == vm->end() || want_it == ref->end()) return *c;
  const TensorData& got = got_it->second;
  const TensorData& want = want_it->second;
  EXPECT_EQ(got.rows, want.rows);
  EXPECT_EQ(got.cols, want.cols);
  EXPECT_EQ(got.values.size(), want.values.size());
  if (got.values.size() != want.values.size()) return *c;
  int bad = 0;
  for (size_t i = 0; i < got.values.size() && bad < 5; ++i) {
    if (!Near(got.values[i], want.values[i], tol)) {
      ++bad;
      ADD_FAILURE() << "element " << i << ": VM " << got.values[i] << ", reference " << want.values[i];
    }
  }
  return *c;
}

// A spec with result "y" and operands named `operands` (fills unknown).
inline proto::OpSpec Spec(std::initializer_list<const char*> operands) {
  proto::OpSpec s;
  s.set_out("y");
  for (const char* o : operands) s.add_operands()->set_name(o);
  return s;
}

}  // namespace spatial::testing

#endif  // TESTS_LOWERINGS_HARNESS_H_

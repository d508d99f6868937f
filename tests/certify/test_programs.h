// Small programs on the test_tiny target (8x8 tiles) that certify, for tests to plant one fault in.
#ifndef TESTS_CERTIFY_TEST_PROGRAMS_H_
#define TESTS_CERTIFY_TEST_PROGRAMS_H_

#include <optional>
#include <string>
#include <vector>

#include "certify/certify.h"
#include "gtest/gtest.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/program.h"
#include "targets/loader.h"
#include "targets/target.h"

namespace spatial::certify_testing {

inline const Target& Tiny() {
  static const Target t = [] {
    absl::StatusOr<Target> r = LoadTarget("test_tiny");
    if (!r.ok()) {
      ADD_FAILURE() << r.status();
      return Target(proto::Target());
    }
    return *std::move(r);
  }();
  return t;
}

inline Composition Compose(Section s) {
  Composition c = Single(std::move(s));
  c.target = "test_tiny";
  c.tile_rows = 8;
  c.tile_cols = 8;
  return c;
}

// y = 2 * x over a 1 x 16 row: two 8x8 tiles, one item. The Generic reads the page's first row.
struct Scale2 {
  Template t{8, 8};
  TensorId x, y;
  BufferId in, out;
  StageId load, gen, store;

  Scale2() {
    x = t.AddTensor("x", TensorRole::kInput, 1, 16, Precision::kBf16, TensorInit::External());
    y = t.AddTensor("y", TensorRole::kOutput, 1, 16, Precision::kBf16, TensorInit::Zero());
    in = t.AddBuffer("in", 2, Precision::kBf16);
    out = t.AddBuffer("out", 2, Precision::kBf16);
    load = t.AddLoad("load_x", x, {}, 2, in);
    gen = t.AddGeneric("scale", FlatSpace(16), {in}, {At(0)}, At(0), Mul(Op(0), Const(2.0)), out);
    store = t.AddStore("store_y", y, {}, 2, out);
    t.AddEdge(load, in, gen);
    t.AddEdge(gen, out, store);
  }

  Composition Build(std::vector<WorkItem> items = WholeRow(2)) {
    return Compose(t.Finish("scale2", std::move(items), Precision::kFp32, NumericsClaim::Approx("mul in bf16")));
  }
};

// A fold of two blocks: the body loads tile KBLOCK of x and adds it into a carried one-tile fp32 page, which
// the prologue zeroes (unless `init` is false) and the epilogue copies out.
struct Fold2 {
  Template t{8, 8};
  TensorId x, y;
  BufferId in, carry, out;
  StageId init = -1, load, fold, copy, store;

  explicit Fold2(bool with_init = true) {
    x = t.AddTensor("x", TensorRole::kInput, 1, 16, Precision::kBf16, TensorInit::External());
    y = t.AddTensor("y", TensorRole::kOutput, 1, 8, Precision::kBf16, TensorInit::Zero());
    in = t.AddBuffer("in", 1, Precision::kBf16);
    carry = t.AddScratchDeep("carry", 2, 1, Precision::kFp32);
    out = t.AddBuffer("out", 1, Precision::kBf16);
    if (with_init) init = t.AddGeneric("init", FlatSpace(8), {}, {}, At(0), Const(0.0), carry);
    t.SetPhase(Phase::kBody);
    load = t.AddLoad("load_x", x, {{LoopVar::kKBlock, 1}}, 1, in);
    fold = t.AddGeneric("fold", FlatSpace(8), {in, carry}, {At(0), At(0)}, At(0), Add(Op(0), Op(1)), carry);
    t.SetPhase(Phase::kEpilogue);
    copy = t.AddGeneric("copy", FlatSpace(8), {carry}, {At(0)}, At(0), Op(0), out);
    store = t.AddStore("store_y", y, {}, 1, out);
    t.AddEdge(load, in, fold);
    t.AddEdge(copy, out, store);
    t.Fold(2);
  }

  Composition Build() {
    return Compose(t.Finish("fold2", WholeRow(1), Precision::kFp32, NumericsClaim::Approx("sum in fp32")));
  }
};

// An integer pipeline: y = body(x) over a 1 x 16 int32 row, the operand read as slot 0 (and, for guards, as
// slot 1 through the same map).
struct IntRow {
  Template t{8, 8};
  TensorId x, y;
  BufferId in, out;

  // `x_init`: Values make x a Param table with known values; otherwise an int32 Input.
  IntRow(std::vector<ElemAccess> maps, Body body, std::optional<std::vector<int64_t>> x_values = std::nullopt,
         Precision out_precision = Precision::kInt32) {
    x = x_values ? t.AddTensor("x", TensorRole::kParam, 1, 16, Precision::kInt32, TensorInit::Values(*x_values))
                 : t.AddTensor("x", TensorRole::kInput, 1, 16, Precision::kInt32, TensorInit::External());
    y = t.AddTensor("y", TensorRole::kOutput, 1, 16, out_precision, TensorInit::Zero());
    in = t.AddBuffer("in", 2, Precision::kInt32);
    out = t.AddBuffer("out", 2, out_precision);
    const StageId load = t.AddLoad("load_x", x, {}, 2, in);
    std::vector<BufferId> ins(maps.size(), in);
    const StageId gen = t.AddGeneric("index_math", FlatSpace(16), ins, std::move(maps), At(0), std::move(body), out);
    const StageId store = t.AddStore("store_y", y, {}, 2, out);
    t.AddEdge(load, in, gen);
    t.AddEdge(gen, out, store);
  }

  Composition Build() {
    return Compose(t.Finish("int_row", WholeRow(2), Precision::kInt32, NumericsClaim::Exact()));
  }
};

inline std::string Codes(const CertifyResult& r) {
  std::string s;
  for (const auto& d : r.diagnostics) s += d.code() + " ";
  return s;
}

inline std::string Explain(const CertifyResult& r) {
  std::string s;
  for (const auto& d : r.diagnostics) s += FormatDiagnostic(d, "test") + "\n";
  return s;
}

// Every diagnostic has code `code`, and there is at least one.
inline ::testing::AssertionResult OnlyCode(const CertifyResult& r, const std::string& code) {
  if (r.diagnostics.empty()) return ::testing::AssertionFailure() << "no diagnostics, expected " << code;
  for (const auto& d : r.diagnostics) {
    if (d.code() != code) return ::testing::AssertionFailure() << "expected only " << code << ", got:\n" << Explain(r);
  }
  return ::testing::AssertionSuccess();
}

}  // namespace spatial::certify_testing

#endif  // TESTS_CERTIFY_TEST_PROGRAMS_H_

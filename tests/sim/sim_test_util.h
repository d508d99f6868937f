// Hand-built targets and programs for the simulator's tests. The target's numbers are Wormhole's
// (reference/hardware-facts.md §1.4-1.6) so expected cycles in the tests read as hardware arithmetic.
#ifndef TESTS_SIM_SIM_TEST_UTIL_H_
#define TESTS_SIM_SIM_TEST_UTIL_H_

#include <cstdint>
#include <string>

#include "gtest/gtest.h"
#include "proto/target.pb.h"
#include "sim/simulate.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/program.h"
#include "spatial/tensor_data.h"
#include "targets/target.h"

namespace spatial::sim_test {

// Wormhole-like: 32x32 tiles, 1 GHz, matmul 16/32/48/64 cycles per tile product, ELW 8 cycles per tile, SFPU
// 32 cycles per instruction row, 64 B/cycle unpack and pack, 32 B/cycle NoC links, 12 DRAM channels of 288 GB/s
// at 92%: 264.96 B/cycle in all.
inline proto::Target WormholeLikeProto(int64_t grid_y, int64_t grid_x) {
  proto::Target t;
  t.set_name("wormhole_like_test");
  t.mutable_tile()->set_rows(32);
  t.mutable_tile()->set_cols(32);
  t.mutable_grid()->set_y(grid_y);
  t.mutable_grid()->set_x(grid_x);
  t.set_local_mem_bytes(1464 * 1024);
  t.set_clock_hz(1e9);
  auto* d = t.mutable_datapaths();
  d->set_elementwise_float(proto::BF16);
  d->set_matrix_in(proto::BF16);
  d->set_matrix_acc(proto::FP32);
  auto* c = t.mutable_costs();
  c->set_matmul_lofi(16);
  c->set_matmul_hifi2(32);
  c->set_matmul_hifi3(48);
  c->set_matmul_hifi4(64);
  c->set_eltwise_add_per_tile(8);
  c->set_eltwise_mul_per_tile(8);
  c->set_sfpu_op_per_tile(32);
  auto* e = c->add_sfpu();
  e->set_kind(proto::EXP);
  e->set_approx(true);
  e->set_cycles_per_tile(64);
  c->set_unpack_bytes_per_cycle(64);
  c->set_pack_bytes_per_cycle(64);
  c->set_pipeline_latency(5);
  t.mutable_noc()->set_link_bytes_per_cycle(32);
  t.mutable_noc()->set_hop_cycles(9);
  t.mutable_noc()->set_niu_cycles(5);
  t.mutable_dram()->set_channels(12);
  t.mutable_dram()->set_bytes_per_second(288e9);
  t.mutable_dram()->set_efficiency(0.92);
  t.mutable_dram()->set_latency_cycles(200);
  t.mutable_numerics()->set_fidelity(proto::HIFI4);
  t.mutable_numerics()->set_approx_mode(true);
  return t;
}

inline Target WormholeLike(int64_t grid_y, int64_t grid_x) { return Target(WormholeLikeProto(grid_y, grid_x)); }

// The timing-only report of a run through the forked entry point (an empty report, and a test failure, if it
// fails).
inline proto::SimReport TimeOnly(const Composition& c, const Target& t) {
  SimOptions o;
  o.timing_only = true;
  absl::StatusOr<SimResult> r = Simulate(c, t, {}, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->report : proto::SimReport{};
}

inline Composition One(Section s) {
  Composition c = Single(std::move(s));
  c.tile_rows = 32;
  c.tile_cols = 32;
  return c;
}

// `items` items each computing an m x n tile block of C = A * B, folding K in `blocks` blocks of k tiles:
// per block, load an m x k block of A and a k x n block of B, C (+)= A B into a carried fp32 accumulator; the
// epilogue packs it to bf16 and stores it.
inline Composition MatmulFold(int64_t items, int64_t m, int64_t n, int64_t k, int64_t blocks) {
  Template t(32, 32);
  const int64_t a_cols_t = k * blocks;
  TensorId a = t.AddTensor("a", TensorRole::kInput, 32 * m * items, 32 * a_cols_t, Precision::kBf16,
                           TensorInit::External());
  TensorId b = t.AddTensor("b", TensorRole::kInput, 32 * a_cols_t, 32 * n, Precision::kBf16, TensorInit::External());
  TensorId c = t.AddTensor("c", TensorRole::kOutput, 32 * m * items, 32 * n, Precision::kBf16, TensorInit::Zero());
  BufferId a_in = t.AddBuffer("in_a", m * k, Precision::kBf16);
  BufferId b_in = t.AddBuffer("in_b", k * n, Precision::kBf16);
  BufferId acc = t.AddScratchDeep("acc", 2, m * n, Precision::kFp32);
  BufferId out = t.AddBuffer("out", m * n, Precision::kBf16);
  const int64_t w = m * n * 32;
  t.Fold(blocks);
  StageId zero = t.AddGeneric("zero_acc", TileSpace(32, w), {}, {}, IdentMap(w), Const(0.0), acc);
  t.SetPhase(Phase::kBody);
  StageId la = t.AddLoadBlockAt("load_a", a, 0, {{LoopVar::kItemY, m * a_cols_t}, {LoopVar::kKBlock, k}},
                                {.h = m, .w = k, .pitch = a_cols_t}, a_in);
  StageId lb = t.AddLoadBlockAt("load_b", b, 0, {{LoopVar::kKBlock, k * n}}, {.h = k, .w = n, .pitch = n}, b_in);
  StageId mm = t.AddMatmul("matmul", MatmulTiles{m, n, k, true, false}, a_in, b_in, acc);
  t.SetPhase(Phase::kEpilogue);
  StageId pack = t.AddGeneric("pack", TileSpace(32, w), {acc}, {IdentMap(w)}, IdentMap(w), Op(0), out);
  StageId st = t.AddStoreBlock("store_c", c, 0, {{LoopVar::kItemY, m * n}}, {.h = m, .w = n, .pitch = n}, out);
  t.AddEdge(la, a_in, mm);
  t.AddEdge(lb, b_in, mm);
  t.AddEdge(zero, acc, mm);
  t.AddEdge(mm, acc, pack);
  t.AddEdge(pack, out, st);
  std::vector<WorkItem> its;
  for (int64_t i = 0; i < items; ++i) its.push_back(WorkItem{i, i, 0, TileRect{i * m, 0, m, n}});
  return One(t.Finish("matmul_fold", std::move(its), Precision::kFp32, NumericsClaim::Approx("bf16 matmul")));
}

// `items` items each moving `w` tiles of a 32-row activation from x to y: load -> page -> store, no compute.
inline Composition Copy(int64_t items, int64_t w, int64_t depth = 2) {
  Template t(32, 32);
  TensorId x = t.AddTensor("x", TensorRole::kInput, 32, 32 * w * items, Precision::kBf16, TensorInit::External());
  TensorId y = t.AddTensor("y", TensorRole::kOutput, 32, 32 * w * items, Precision::kBf16, TensorInit::Zero());
  BufferId buf = t.AddBufferDeep("page", depth, w, Precision::kBf16);
  StageId ld = t.AddLoad("load_x", x, {{LoopVar::kItemX, w}}, w, buf);
  StageId st = t.AddStore("store_y", y, {{LoopVar::kItemX, w}}, w, buf);
  t.AddEdge(ld, buf, st);
  return One(t.Finish("copy", RowItems(w * items, w), Precision::kFp32, NumericsClaim::Exact()));
}

// `items` items each computing y = exp(x) over `w` tiles: load -> [depth] -> exp -> [depth] -> store.
inline Composition ExpMap(int64_t items, int64_t w, int64_t depth = 2) {
  Template t(32, 32);
  TensorId x = t.AddTensor("x", TensorRole::kInput, 32, 32 * w * items, Precision::kBf16, TensorInit::External());
  TensorId y = t.AddTensor("y", TensorRole::kOutput, 32, 32 * w * items, Precision::kBf16, TensorInit::Zero());
  BufferId in = t.AddBufferDeep("in", depth, w, Precision::kBf16);
  BufferId out = t.AddBufferDeep("out", depth, w, Precision::kBf16);
  const int64_t pw = w * 32;
  StageId ld = t.AddLoad("load_x", x, {{LoopVar::kItemX, w}}, w, in);
  StageId ex = t.AddGeneric("exp", TileSpace(32, pw), {in}, {IdentMap(pw)}, IdentMap(pw),
                            Unary(SfpuKind::Exp(), Op(0)), out);
  StageId st = t.AddStore("store_y", y, {{LoopVar::kItemX, w}}, w, out);
  t.AddEdge(ld, in, ex);
  t.AddEdge(ex, out, st);
  return One(t.Finish("exp_map", RowItems(w * items, w), Precision::kFp32, NumericsClaim::Approx("exp")));
}

// Deterministic values exactly representable in bf16: small integers over `scale`.
inline TensorData Ramp(int64_t rows, int64_t cols, int64_t modulus = 17, double scale = 8.0) {
  TensorData d;
  d.rows = rows;
  d.cols = cols;
  d.precision = Precision::kBf16;
  d.values.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows * cols; ++i) d.values[i] = static_cast<double>((i * 7) % modulus - 8) / scale;
  return d;
}

}  // namespace spatial::sim_test

#endif  // TESTS_SIM_SIM_TEST_UTIL_H_

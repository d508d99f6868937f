// The simulator against tt-metal's published GEMM measurements (DESIGN §8 "Calibration"; issue "Fidelity"):
// every DRAM-resident row of tech_reports/GEMM_FLOPS (bench/fidelity/data/, with its source commit) is lowered
// as a MatmulSpec at the row's fidelity and formats, certified, simulated timing-only on the shipped target, and
// printed next to the published device throughput with the ratio.
//
// The published device throughput of a row is 2 M K N over its device time, recovered from the "Device Based
// Utilization" column by the report's own formula: utilization = ideal cycles / actual cycles, ideal cycles =
// M K N / 32^3 x cycle_per_tile (LoFi 16, HiFi2 32, HiFi3 48, HiFi4 64) / cores. (The table's "TFLOPs" column is
// host-timed and includes dispatch.)
//
// Nothing in the model is fitted to these rows: every constant of the targets names its source. All rows are
// therefore held out; the runner prints the median and the spread of the ratios per table, and writes the table
// as markdown with --markdown=FILE. A tuned table's rows are simulated twice: at the lowering's own blocking, and
// at the program config test_benchmark.py ran them with (data/test_benchmark_tuned_shapes.csv, MatmulSpec's
// program_config), which leaves only the model's error between simulated and published.
//
//   gemm_fidelity [--data=DIR] [--markdown=FILE] [--only=SUBSTRING]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/fidelity/runner.h"
#include "certify/certify.h"
#include "lowerings/registry.h"
#include "proto/op.pb.h"
#include "sim/numerics/target_model.h"
#include "sim/simulate.h"
#include "targets/loader.h"

namespace spatial {
namespace {

struct Table {
  const char* file;
  const char* target;
  double cores;
  const char* label;
  bool tuned;  // run with test_benchmark.py's explicit program configs (data/test_benchmark_tuned_shapes.csv)
};

// The tables whose grid the shipped targets have: N150's 8x8, P150's 11x10 (firmware >= 19.5.0).
constexpr Table kTables[] = {
    {"gemm_flops_n150_out_of_box.csv", "wormhole_n150", 64, "N150 out of box", false},
    {"gemm_flops_n150_tuned.csv", "wormhole_n150", 64, "N150 tuned (DRAM rows)", true},
    {"gemm_flops_p150_out_of_box_grid11x10.csv", "blackhole_p150", 110, "P150 11x10 out of box", false},
    {"gemm_flops_p150_tuned_grid11x10.csv", "blackhole_p150", 110, "P150 11x10 tuned (DRAM rows)", true},
};

struct Row {
  int64_t m = 0, k = 0, n = 0;
  std::string dtype, fidelity;
  double device_util_pct = 0;
};

std::vector<Row> ReadRows(const std::string& path) {
  std::ifstream in(path);
  std::vector<Row> rows;
  std::string line;
  std::vector<std::string> header;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f = absl::StrSplit(line, ',');
    if (header.empty()) {
      header = f;
      continue;
    }
    std::map<std::string, std::string> v;
    for (size_t i = 0; i < f.size() && i < header.size(); ++i) v[header[i]] = f[i];
    // The model's tensors live in DRAM; L1-sharded rows and traced duplicates are left out.
    if (v["trace"] != "false" || v["in0_storage"] != "DRAM" || v["in1_storage"] != "DRAM" ||
        v["out_storage"] != "DRAM") {
      continue;
    }
    Row r;
    r.m = std::stoll(v["m"]);
    r.k = std::stoll(v["k"]);
    r.n = std::stoll(v["n"]);
    r.dtype = v["dtype"];
    r.fidelity = v["fidelity"];
    r.device_util_pct = std::stod(v["device_util_pct"]);
    rows.push_back(r);
  }
  return rows;
}

// One tuple of test_benchmark.py's tuned lists: a per-core base, scaled by the grid.
struct TunedShape {
  std::string dtype;
  int64_t m = 0, k = 0, n = 0, in0_block_w_div = 1, out_blocks_h = 1, out_blocks_w = 1;
  bool out_sharded = false;
};

std::vector<TunedShape> ReadTunedShapes(const std::string& path) {
  std::ifstream in(path);
  std::vector<TunedShape> shapes;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      header = false;
      continue;
    }
    std::vector<std::string> f = absl::StrSplit(line, ',');
    if (f.size() < 9) continue;
    shapes.push_back(TunedShape{.dtype = f[0], .m = std::stoll(f[1]), .k = std::stoll(f[2]), .n = std::stoll(f[3]),
                                .in0_block_w_div = std::stoll(f[6]), .out_blocks_h = std::stoll(f[7]),
                                .out_blocks_w = std::stoll(f[8]), .out_sharded = f[5] == "true"});
  }
  return shapes;
}

// test_benchmark.py's get_subblock_sizes: the first of SUBBLOCK_HW_CHOICES, (h, w) in its order, dividing the
// block (fp32_dest_acc_en is False in every tuned row).
std::pair<int64_t, int64_t> TtMetalSubblock(int64_t bh, int64_t bw, bool out_sharded) {
  static constexpr std::pair<int64_t, int64_t> kChoices[] = {
      {4, 2}, {2, 4}, {8, 1}, {1, 8}, {7, 1}, {1, 7}, {3, 2}, {2, 3}, {6, 1}, {1, 6},
      {5, 1}, {1, 5}, {2, 2}, {4, 1}, {1, 4}, {3, 1}, {1, 3}, {2, 1}, {1, 2}, {1, 1}};
  for (const auto& [h, w] : kChoices) {
    if (out_sharded && (bw % w != 0 || h != 1)) continue;
    if (bh % h == 0 && bw % w == 0) return {h, w};
  }
  return {1, 1};
}

// The program config test_benchmark.py ran a row of a tuned table with, by the test's own formulas; nullopt when
// no tuple of its lists scales to the row's shape on this grid.
std::optional<proto::MatmulProgramConfig> TtMetalConfig(const std::vector<TunedShape>& shapes, const std::string& dtype,
                                                        int64_t m, int64_t k, int64_t n, int64_t gx, int64_t gy) {
  for (const TunedShape& t : shapes) {
    if (t.dtype != dtype || t.m * gy != m || t.k * gx != k || t.n * gx != n) continue;
    const int64_t per_core_m = m / gy / 32, per_core_n = n / gx / 32;
    proto::MatmulProgramConfig c;
    c.set_in0_block_w(k / gx / 32 / t.in0_block_w_div);
    c.set_out_block_h(per_core_m / t.out_blocks_h);
    c.set_out_block_w(per_core_n / t.out_blocks_w);
    const auto [h, w] = TtMetalSubblock(c.out_block_h(), c.out_block_w(), t.out_sharded);
    c.set_out_subblock_h(h);
    c.set_out_subblock_w(w);
    return c;
  }
  return std::nullopt;
}

proto::Fidelity FidelityOf(const std::string& f) {
  if (f == "LoFi") return proto::LOFI;
  if (f == "HiFi2") return proto::HIFI2;
  if (f == "HiFi3") return proto::HIFI3;
  return proto::HIFI4;
}
double CyclesPerTile(const std::string& f) {
  if (f == "LoFi") return 16;
  if (f == "HiFi2") return 32;
  if (f == "HiFi3") return 48;
  return 64;
}
proto::Precision FormatOf(const std::string& d) {
  if (d == "BFLOAT8_B") return proto::BFP8_B;
  if (d == "BFLOAT4_B") return proto::BFP4_B;
  return proto::BF16;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

struct Simulated {
  double tflops = 0;
  int64_t sites = 0;
  std::string bound;
};

// One row lowered as a MatmulSpec at its fidelity and formats (with `config`, tt-metal's blocking; else the
// lowering's own), certified and simulated timing-only.
absl::StatusOr<Simulated> SimulateRow(const Row& r, const Target& target,
                                      const std::optional<proto::MatmulProgramConfig>& config) {
  proto::OpSpec spec;
  spec.set_out("c");
  spec.add_operands()->set_name("a");
  spec.add_operands()->set_name("b");
  proto::MatmulSpec* mm = spec.mutable_matmul();
  mm->set_m(r.m);
  mm->set_k(r.k);
  mm->set_n(r.n);
  mm->set_math_fidelity(FidelityOf(r.fidelity));
  mm->set_in0_format(FormatOf(r.dtype));
  mm->set_in1_format(FormatOf(r.dtype));
  mm->set_out_format(FormatOf(r.dtype));
  // The compute-kernel switches both benchmarks ran with: the tuned test passes fp32_dest_acc_en=False,
  // packer_l1_acc=True (tests/ttnn/unit_tests/benchmarks/test_benchmark.py, test_matmul_2d_host_perf); the
  // out-of-box test passes nothing, and ttnn's matmul defaults are fp32_dest_acc = (output is FLOAT32),
  // packer_l1_acc = !that (ttnn matmul_device_operation.cpp, init_device_compute_kernel_config): the same for
  // these bf16 / bfp8_b / bfp4_b outputs.
  mm->set_fp32_dest_acc(false);
  mm->set_packer_l1_acc(true);
  if (config) *mm->mutable_program_config() = *config;
  absl::StatusOr<Composition> c = Lower(spec, target);
  if (!c.ok()) return c.status();
  SimOptions o;
  o.timing_only = true;
  absl::StatusOr<SimResult> sim = Simulate(*c, target, {}, o);
  if (!sim.ok()) return sim.status();
  return Simulated{.tflops = 2.0 * r.m * r.k * r.n / sim->report.seconds() / 1e12,
                   .sites = sim->report.sections(0).sites_used(),
                   .bound = sim->report.roofline().limited_by()};
}

std::string RatioSummary(const std::string& label, const std::vector<double>& ratios) {
  if (ratios.empty()) return absl::StrCat(label, ": no row simulated");
  const int within = static_cast<int>(
      std::count_if(ratios.begin(), ratios.end(), [](double x) { return std::fabs(x - 1.0) <= 0.15; }));
  const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  return absl::StrFormat("%s: %d rows, median ratio %.3f, range [%.3f, %.3f], %d of %d within 15%%", label,
                         ratios.size(), Median(ratios), *lo, *hi, within, ratios.size());
}

// The values side: one matmul at each fidelity and format the tables use, simulated with the target's numerics
// against the exact f64 VM, inputs uniform in [-1, 1). tt-metal's GEMM report gives no accuracy figures to set
// beside these (its SDPA accuracy table is in reference/hardware-facts.md §5).
std::string NumericsTable(const Target& target) {
  struct Case {
    const char* dtype;
    const char* fidelity;
  };
  const Case base[] = {{"BFLOAT16", "HiFi4"}, {"BFLOAT16", "HiFi2"}, {"BFLOAT16", "LoFi"},
                       {"BFLOAT8_B", "HiFi2"}, {"BFLOAT8_B", "LoFi"}, {"BFLOAT4_B", "LoFi"}};
  // Each with an fp32 Dst and fp32 partials, and as the GEMM benchmarks run it: a 16-bit Dst (accumulation
  // rounded to bf16 after every product, hardware-facts §1.2) and bf16 partials accumulated by the packer.
  struct Run {
    Case c;
    bool fp32_dest;
  };
  std::vector<Run> cases;
  for (bool fp32_dest : {true, false}) {
    for (const Case& c : base) cases.push_back({c, fp32_dest});
  }
  const int64_t m = 256, k = 1024, n = 256;
  std::string out = absl::StrFormat(
      "| dtype | fidelity | Dst | rel L2 vs f64 | max abs |\n|---|---|---|---|---|\n");
  std::printf("\nnumerics: %lld x %lld x %lld on %s, inputs uniform in [-1, 1), simulated vs the exact VM\n",
              static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n),
              target.name().c_str());
  for (const auto& [cs, fp32_dest] : cases) {
    const char* dst = fp32_dest ? "fp32" : "bf16";
    proto::OpSpec spec;
    spec.set_out("c");
    spec.add_operands()->set_name("a");
    spec.add_operands()->set_name("b");
    proto::MatmulSpec* mm = spec.mutable_matmul();
    mm->set_m(m);
    mm->set_k(k);
    mm->set_n(n);
    mm->set_math_fidelity(FidelityOf(cs.fidelity));
    mm->set_in0_format(FormatOf(cs.dtype));
    mm->set_in1_format(FormatOf(cs.dtype));
    mm->set_fp32_dest_acc(fp32_dest);
    mm->set_packer_l1_acc(!fp32_dest);
    absl::StatusOr<Composition> c = Lower(spec, target);
    if (!c.ok()) {
      std::printf("  %s %s %s: %s\n", cs.dtype, cs.fidelity, dst, std::string(c.status().message()).c_str());
      continue;
    }
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    TensorMap inputs;
    for (const auto& [name, rows, cols] : {std::tuple<const char*, int64_t, int64_t>{"a", m, k}, {"b", k, n}}) {
      TensorData d;
      d.rows = rows;
      d.cols = cols;
      d.precision = Precision::kFp32;
      d.values.resize(static_cast<size_t>(rows * cols));
      for (double& v : d.values) v = u(rng);
      inputs[name] = std::move(d);
    }
    std::unique_ptr<ValueModel> model = MakeTargetModel(target);
    SimOptions o;
    o.model = model.get();
    o.compare_vm = true;
    absl::StatusOr<SimResult> r = Simulate(*c, target, inputs, o);
    if (!r.ok() || r->report.errors_size() == 0) {
      std::printf("  %s %s %s: %s\n", cs.dtype, cs.fidelity, dst, r.ok() ? "no error report" :
                  std::string(r.status().message()).c_str());
      continue;
    }
    const proto::OutputError& e = r->report.errors(0);
    std::printf("  %-9s %-5s Dst %s rel L2 %.3e  max abs %.3e\n", cs.dtype, cs.fidelity, dst, e.rel_l2(),
                e.max_abs());
    out += absl::StrFormat("| %s | %s | %s | %.3e | %.3e |\n", cs.dtype, cs.fidelity, dst, e.rel_l2(), e.max_abs());
  }
  return out;
}

int Main(int argc, char** argv) {
  fidelity::RunnerArgs args;
  if (!fidelity::ParseRunnerArgs(argc, argv, "gemm_fidelity [--data=DIR] [--markdown=FILE] [--only=SUBSTRING]", true,
                                 &args)) {
    return 2;
  }
  const std::string& data = args.data;
  const std::string& markdown = args.markdown;
  const std::string& only = args.only;
  std::ostringstream md;
  md << "| table | M | K | N | dtype | fidelity | sites | bound | published TFLOP/s | simulated TFLOP/s | "
        "simulated / published | tt-metal's blocking: simulated TFLOP/s | ratio |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  std::ostringstream summary;
  bool failed = false;
  const std::vector<TunedShape> tuned = ReadTunedShapes(absl::StrCat(data, "/test_benchmark_tuned_shapes.csv"));
  if (tuned.empty()) {
    std::fprintf(stderr, "no tuned shapes read from %s/test_benchmark_tuned_shapes.csv\n", data.c_str());
    return 1;
  }
  for (const Table& tb : kTables) {
    if (!only.empty() && std::string(tb.label).find(only) == std::string::npos) continue;
    absl::StatusOr<Target> target = LoadTarget(tb.target);
    if (!target.ok()) {
      std::fprintf(stderr, "%s\n", std::string(target.status().message()).c_str());
      return 1;
    }
    const double clock = target->proto().clock_hz();
    std::vector<Row> rows = ReadRows(absl::StrCat(data, "/", tb.file));
    if (rows.empty()) {
      std::fprintf(stderr, "no rows read from %s/%s\n", data.c_str(), tb.file);
      return 1;
    }
    std::printf("\n%s (%s, %zu DRAM rows)%s\n", tb.label, tb.target, rows.size(),
                tb.tuned ? "; last columns: at test_benchmark.py's own program config" : "");
    std::printf("  %6s %6s %6s %-9s %-5s %5s %-8s %10s %10s %7s %10s %7s\n", "M", "K", "N", "dtype", "fid", "sites",
                "bound", "published", "simulated", "ratio", "tt-config", "ratio");
    std::vector<double> ratios, config_ratios;
    for (const Row& r : rows) {
      const double ideal = static_cast<double>(r.m) * r.k * r.n / 32768.0 * CyclesPerTile(r.fidelity) / tb.cores;
      const double device_seconds = ideal / (r.device_util_pct / 100.0) / clock;
      const double published = 2.0 * r.m * r.k * r.n / device_seconds / 1e12;
      const absl::StatusOr<Simulated> own = SimulateRow(r, *target, std::nullopt);
      if (!own.ok()) {
        failed = true;
        std::printf("  %6lld %6lld %6lld %-9s %-5s  error: %s\n", static_cast<long long>(r.m),
                    static_cast<long long>(r.k), static_cast<long long>(r.n), r.dtype.c_str(), r.fidelity.c_str(),
                    std::string(own.status().message()).c_str());
        continue;
      }
      const double ratio = own->tflops / published;
      ratios.push_back(ratio);
      // The same row at the blocking tt-metal ran it with: what is left between the two is the model's, not a
      // difference of configuration.
      std::string cfg_col = "-", cfg_ratio = "-";
      if (tb.tuned) {
        const std::optional<proto::MatmulProgramConfig> cfg =
            TtMetalConfig(tuned, r.dtype, r.m, r.k, r.n, target->grid_x(), target->grid_y());
        if (!cfg) {
          cfg_col = "no config";
        } else if (absl::StatusOr<Simulated> at = SimulateRow(r, *target, cfg); !at.ok()) {
          cfg_col = absl::StrCat("error: ", std::string(at.status().message()));
          failed = true;
        } else {
          config_ratios.push_back(at->tflops / published);
          cfg_col = absl::StrFormat("%.1f", at->tflops);
          cfg_ratio = absl::StrFormat("%.3f", at->tflops / published);
        }
      }
      std::printf("  %6lld %6lld %6lld %-9s %-5s %5lld %-8s %10.1f %10.1f %7.3f %10s %7s\n",
                  static_cast<long long>(r.m), static_cast<long long>(r.k), static_cast<long long>(r.n),
                  r.dtype.c_str(), r.fidelity.c_str(), static_cast<long long>(own->sites), own->bound.c_str(),
                  published, own->tflops, ratio, cfg_col.c_str(), cfg_ratio.c_str());
      md << absl::StrFormat("| %s | %d | %d | %d | %s | %s | %d | %s | %.1f | %.1f | %.3f | %s | %s |\n", tb.label,
                            r.m, r.k, r.n, r.dtype, r.fidelity, own->sites, own->bound, published, own->tflops, ratio,
                            cfg_col, cfg_ratio);
    }
    const std::string line = RatioSummary(tb.label, ratios);
    std::printf("  %s\n", line.c_str());
    summary << "- " << line << "\n";
    if (tb.tuned) {
      const std::string at = RatioSummary(absl::StrCat(tb.label, ", at tt-metal's blocking"), config_ratios);
      std::printf("  %s\n", at.c_str());
      summary << "- " << at << "\n";
    }
  }
  std::string numerics;
  if (only.empty() || only == "numerics") {
    absl::StatusOr<Target> n150 = LoadTarget("wormhole_n150");
    if (n150.ok()) numerics = NumericsTable(*n150);
  }
  std::printf("\nall rows are held out (nothing in the model is fitted to them)\n%s", summary.str().c_str());
  if (!markdown.empty()) {
    std::ofstream out(markdown);
    out << "## Summary (all rows held out)\n\n" << summary.str() << "\n## Rows\n\n" << md.str()
        << "\n## Numerics (256 x 1024 x 256 on wormhole_n150, inputs uniform in [-1, 1))\n\n" << numerics;
  }
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace spatial

int main(int argc, char** argv) { return spatial::Main(argc, argv); }

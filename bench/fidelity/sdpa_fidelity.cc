// The simulator's attention against tt-metal's published SDPA measurements (issue #12; DESIGN §8 "Calibration"):
// every row of data/tt_metal_sdpa.csv (its source in its header) is lowered as an AttentionSpec at the row's shape,
// the probabilities' exp, the contractions' fidelity and the K chunk of the row's recipe, certified, and simulated
// timing-only on the row's target (or the corner of its grid the row ran on: 1 x 1 for one core, 8 x 8 for
// tt_transformers' calls), then printed next to the published time with the ratio simulated / published. Nothing
// is fitted.
//
// The K/V caches are stored in the row's format (AttentionSpec.kv_format: bf16, or bfp8_b as tt_transformers' and the
// FAST grid rows ran), and the fold accumulates in the row's Dst (AttentionSpec.dest_acc: a 16-bit Dst for the legacy
// streaming kernel and FAST, a 32-bit one for ACCURATE), and its items read their K/V as the row's kernel does
// (AttentionSpec.kv_reads: per item for every grid row, each causal — tt-metal builds a K/V chain only for a
// non-causal call, and its recipe kernels run causal calls without one), and its sites take the query chunks tt-metal's
// program factory deals its cores (AttentionSpec.chunk_split: contiguous runs of chunks for every grid row). What the
// simulator does differently, and
// which way each pulls:
// the one-core rows keep K/V resident in L1 where the simulator streams them from DRAM through the site's link
// (slower); tt-metal's STANDARD, BALANCED and ACCURATE recipes use exps the simulator does not have (polynomial and
// refined Schraudolph): ACCURATE's probabilities take the accurate exp, STANDARD and BALANCED are left out; STANDARD
// and FAST fuse their K chunks after the first (a reference maximum, no row maximum, the exp on the pack thread
// overlapping the next product), the simulator folds every chunk alike (slower). The scale inside the fast exp, the
// row sums in the packer and the mask on the edge blocks only are modelled as tt-metal has them.
//
//   sdpa_fidelity [--data=DIR] [--markdown=FILE]
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/fidelity/runner.h"
#include "certify/certify.h"
#include "lowerings/registry.h"
#include "sim/simulate.h"
#include "targets/loader.h"

namespace spatial {
namespace {

struct Row {
  std::string name, target, grid, fidelity, probs_exp, kv_format, dest, kv_reads, split, recipe, measured;
  int64_t heads = 0, kv = 0, hd = 0, rows = 0, cache = 0, causal = 0, k_chunk = 0;
  double published_us = 0;
};

// case,target,grid,heads,kv,hd,rows,cache,causal,fidelity,probs_exp,k_chunk,kv_format,dest,kv_reads,split,
// published_us,recipe,measured
std::vector<Row> ReadRows(const std::string& path, std::string* error) {
  std::vector<Row> rows;
  const bool ok = fidelity::ReadCsv(
      path, 19,
      [&](const std::vector<std::string>& f) {
        Row r{.name = f[0], .target = f[1], .grid = f[2], .fidelity = f[9], .probs_exp = f[10], .kv_format = f[12],
              .dest = f[13], .kv_reads = f[14], .split = f[15], .recipe = f[17], .measured = f[18]};
        if (r.dest != "bf16" && r.dest != "fp32") return false;
        if (r.kv_reads != "shared" && r.kv_reads != "per_item") return false;
        if (r.split != "balanced" && r.split != "contiguous") return false;
        if (!absl::SimpleAtoi(f[3], &r.heads) || !absl::SimpleAtoi(f[4], &r.kv) || !absl::SimpleAtoi(f[5], &r.hd) ||
            !absl::SimpleAtoi(f[6], &r.rows) || !absl::SimpleAtoi(f[7], &r.cache) ||
            !absl::SimpleAtoi(f[8], &r.causal) || !absl::SimpleAtoi(f[11], &r.k_chunk) ||
            !absl::SimpleAtod(f[16], &r.published_us)) {
          return false;
        }
        rows.push_back(r);
        return true;
      },
      error);
  return ok ? rows : std::vector<Row>{};
}

proto::OpSpec SpecOf(const Row& r) {
  proto::OpSpec s;
  s.set_out("ctx");
  for (const char* n : {"q", "k_cache", "v_cache"}) s.add_operands()->set_name(n);
  proto::AttentionSpec* a = s.mutable_attention();
  a->set_h(r.heads);
  a->set_kv(r.kv);
  a->set_hd(r.hd);
  a->set_vd(r.hd);
  a->set_l(r.cache);
  a->set_rows(r.rows);
  // Causal from position 1, or the last rows of the cache (each sees all but the last few positions).
  a->mutable_pos()->set_literal(r.causal ? 1 : r.cache - r.rows + 1);
  proto::AttentionSpec::ProbsExp e = proto::AttentionSpec::PROBS_EXP_TARGET;
  proto::AttentionSpec::ProbsExp_Parse(absl::StrCat("PROBS_EXP_", r.probs_exp), &e);
  a->set_probs_exp(e);
  a->set_kv_chunk(r.k_chunk);
  proto::Precision kv = proto::PRECISION_UNSPECIFIED;  // bf16: the datapath's
  if (r.kv_format != "bf16") proto::Precision_Parse(absl::AsciiStrToUpper(r.kv_format), &kv);
  a->set_kv_format(kv);
  a->set_dest_acc(r.dest == "bf16" ? proto::BF16 : proto::FP32);
  a->set_kv_reads(r.kv_reads == "per_item" ? proto::AttentionSpec::KV_READS_PER_ITEM
                                           : proto::AttentionSpec::KV_READS_SHARED);
  a->set_chunk_split(r.split == "contiguous" ? proto::AttentionSpec::CHUNK_SPLIT_CONTIGUOUS
                                             : proto::AttentionSpec::CHUNK_SPLIT_BALANCED);
  return s;
}

absl::StatusOr<Target> TargetOf(const Row& r) {
  absl::StatusOr<Target> t = LoadTarget(r.target);
  if (!t.ok()) return t.status();
  proto::Target p = t->proto();
  proto::Fidelity f = proto::FIDELITY_UNSPECIFIED;
  if (!proto::Fidelity_Parse(r.fidelity, &f)) return absl::InvalidArgumentError("unknown fidelity " + r.fidelity);
  p.mutable_numerics()->set_fidelity(f);
  if (r.grid != "full") {
    // "YxX": the corner of the grid the row ran on (tt-metal's CoreGrid(y, x)).
    const std::vector<std::string> yx = absl::StrSplit(r.grid, 'x');
    int64_t y = 0, x = 0;
    if (yx.size() != 2 || !absl::SimpleAtoi(yx[0], &y) || !absl::SimpleAtoi(yx[1], &x) || y < 1 || x < 1 ||
        y > p.grid().y() || x > p.grid().x()) {
      return absl::InvalidArgumentError(absl::StrCat("grid '", r.grid, "' is not full or YxX within the target's ",
                                                     p.grid().y(), "x", p.grid().x()));
    }
    p.mutable_grid()->set_y(y);
    p.mutable_grid()->set_x(x);
  }
  return Target(std::move(p));
}

int Main(int argc, char** argv) {
  fidelity::RunnerArgs args;
  if (!fidelity::ParseRunnerArgs(argc, argv, "sdpa_fidelity [--data=DIR] [--markdown=FILE]", false, &args)) return 2;
  std::string error;
  const std::vector<Row> rows = ReadRows(absl::StrCat(args.data, "/tt_metal_sdpa.csv"), &error);
  if (!error.empty() || rows.empty()) {
    std::fprintf(stderr, "error: %s\n", error.empty() ? "no rows" : error.c_str());
    return 2;
  }
  std::ostringstream md;
  md << "| case | recipe | published | fidelity | K chunk | K/V | Dst | K/V reads | chunk split | published us "
        "| simulated us | sim / pub | sites | bound |\n"
     << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  std::printf("%-38s %-36s %12s %12s %9s %6s %s\n", "case", "recipe", "published us", "simulated us", "sim/pub",
              "sites", "bound");
  for (const Row& r : rows) {
    absl::StatusOr<Target> target = TargetOf(r);
    absl::StatusOr<Composition> c = target.ok() ? Lower(SpecOf(r), *target) : target.status();
    if (!c.ok()) {
      std::fprintf(stderr, "error: %s: %s\n", r.name.c_str(), std::string(c.status().message()).c_str());
      return 1;
    }
    const CertifyResult cert = Certify(*c, *target);
    if (!cert.ok()) {
      std::fprintf(stderr, "error: %s: not certified: %s\n", r.name.c_str(), cert.diagnostics[0].message().c_str());
      return 1;
    }
    SimOptions o;
    o.timing_only = true;
    absl::StatusOr<SimResult> sim = Simulate(*c, *target, {}, o);
    if (!sim.ok()) {
      std::fprintf(stderr, "error: %s: %s\n", r.name.c_str(), std::string(sim.status().message()).c_str());
      return 1;
    }
    const double us = sim->report.seconds() * 1e6, ratio = us / r.published_us;
    int64_t sites = 0;
    for (const auto& s : sim->report.sections()) sites = std::max<int64_t>(sites, s.sites_used());
    const std::string bound = sim->report.roofline().limited_by();
    std::printf("%-38s %-36s %12.1f %12.1f %9.2f %6lld %s\n", r.name.c_str(), r.recipe.c_str(), r.published_us, us,
                ratio, static_cast<long long>(sites), bound.c_str());
    md << absl::StrFormat("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f | %.1f | %.2f | %d | %s |\n", r.name,
                          r.recipe, r.measured, r.fidelity, r.k_chunk ? absl::StrCat(r.k_chunk) : "op's", r.kv_format,
                          r.dest, r.kv_reads, r.split, r.published_us, us, ratio, sites, bound);
  }
  return fidelity::WriteMarkdown(args.markdown, md.str()) ? 0 : 1;
}

}  // namespace
}  // namespace spatial

int main(int argc, char** argv) { return spatial::Main(argc, argv); }

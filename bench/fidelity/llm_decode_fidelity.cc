// The simulator's whole-model decode against tt-metal's published tokens/s per user (issue #15; DESIGN §8
// "Calibration"): every row of data/tt_metal_llm_decode.csv (its sources in its header) is simulated as one token
// through every layer and the head (models/decode_token.h) at the row's cache length, weight formats and target,
// and printed next to the published speed with the ratio simulated / published.
//
// Nothing is fitted to these rows. What the simulator leaves out, and which way each pulls the ratio: host and
// dispatch time between ops (tt-metal runs decode from a captured trace, but op-to-op gaps remain: the simulator is
// faster), the batch (published batch-32 rows decode 32 users at once: more activation and K/V traffic per step
// than the simulator's one user, so it is faster still), the embedding lookup and sampling (small), and tt-metal's
// fused ops (QKV in one matmul, RMSNorm fused with its neighbours, the rotary embedding inside the attention's
// kernel: the simulator runs them as separate sections, so it is slower there).
//
//   llm_decode_fidelity [--data=DIR] [--markdown=FILE]
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "bench/fidelity/runner.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/decode_token.h"
#include "models/model_config.h"
#include "targets/loader.h"

namespace spatial {
namespace {

struct Row {
  std::string model, device, target, recipe, source;
  int64_t batch = 0, seq_len = 0;
  double tsu = 0;
};

// model,device,target,batch,seq_len,tsu,recipe,source
std::vector<Row> ReadRows(const std::string& path, std::string* error) {
  std::vector<Row> rows;
  const bool ok = fidelity::ReadCsv(
      path, 8,
      [&](const std::vector<std::string>& f) {
        Row r{.model = f[0], .device = f[1], .target = f[2], .recipe = f[6], .source = f[7]};
        if (!absl::SimpleAtoi(f[3], &r.batch) || !absl::SimpleAtoi(f[4], &r.seq_len) ||
            !absl::SimpleAtod(f[5], &r.tsu)) {
          return false;
        }
        rows.push_back(r);
        return true;
      },
      error);
  return ok ? rows : std::vector<Row>{};
}

int Main(int argc, char** argv) {
  fidelity::RunnerArgs args;
  if (!fidelity::ParseRunnerArgs(argc, argv, "llm_decode_fidelity [--data=DIR] [--markdown=FILE]", false, &args)) {
    return 2;
  }
  std::string error;
  const std::vector<Row> rows = ReadRows(absl::StrCat(args.data, "/tt_metal_llm_decode.csv"), &error);
  if (!error.empty() || rows.empty()) {
    std::fprintf(stderr, "error: %s\n", error.empty() ? "no rows" : error.c_str());
    return 2;
  }
  std::ostringstream md;
  md << "| model | device | batch | cache | weights | source | published t/s/u | simulated t/s/u | sim / pub |\n"
     << "|---|---|---|---|---|---|---|---|---|\n";
  std::printf("%-13s %-18s %5s %5s %-10s %-12s %10s %10s %9s\n", "model", "device", "batch", "cache", "weights",
              "source", "published", "simulated", "sim/pub");
  std::vector<double> ratios;
  for (const Row& r : rows) {
    absl::StatusOr<ModelConfig> config = ReadModelConfig(r.model);
    absl::StatusOr<Target> target = LoadTarget(r.target);
    WeightFormats formats;
    if (!config.ok() || !target.ok() || !WeightRecipe(r.recipe, &formats)) {
      std::fprintf(stderr, "error: row %s on %s: %s\n", r.model.c_str(), r.device.c_str(),
                   !config.ok()   ? std::string(config.status().message()).c_str()
                   : !target.ok() ? std::string(target.status().message()).c_str()
                                  : ("unknown recipe " + r.recipe).c_str());
      return 1;
    }
    // The first token after a prefill of seq_len: position seq_len + 1 over a cache that holds it.
    const DecodePhase phase{r.seq_len + 1, r.seq_len + 1, formats};
    absl::StatusOr<TokenTime> t = DecodeTokenTime(*config, phase, *target);
    if (!t.ok()) {
      std::fprintf(stderr, "error: %s on %s: %s\n", r.model.c_str(), r.target.c_str(),
                   std::string(t.status().message()).c_str());
      return 1;
    }
    const double sim = t->tokens_per_s(), ratio = sim / r.tsu;
    ratios.push_back(ratio);
    std::printf("%-13s %-18s %5lld %5lld %-10s %-12s %10.1f %10.1f %9.2f\n", r.model.c_str(), r.device.c_str(),
                static_cast<long long>(r.batch), static_cast<long long>(phase.cache), r.recipe.c_str(),
                r.source.c_str(), r.tsu, sim, ratio);
    md << absl::StrFormat("| %s | %s | %d | %d | %s | %s | %.1f | %.1f | %.2f |\n", r.model, r.device, r.batch,
                          phase.cache, r.recipe, r.source, r.tsu, sim, ratio);
  }
  std::vector<double> sorted = ratios;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                          : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
  std::printf("median sim/pub over %zu rows: %.2f (min %.2f, max %.2f); nothing fitted, every row held out\n",
              ratios.size(), median, sorted.front(), sorted.back());
  md << absl::StrFormat("\nMedian simulated / published over %d rows: %.2f (min %.2f, max %.2f).\n",
                        static_cast<int>(ratios.size()), median, sorted.front(), sorted.back());
  return fidelity::WriteMarkdown(args.markdown, md.str()) ? 0 : 1;
}

}  // namespace
}  // namespace spatial

int main(int argc, char** argv) { return spatial::Main(argc, argv); }

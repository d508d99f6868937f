// What every fidelity runner (bench/fidelity/*_fidelity.cc) shares: its command line — --data=DIR, the published
// tables (default the source tree's data/), and --markdown=FILE, where its table goes — and writing that table.
#ifndef BENCH_FIDELITY_RUNNER_H_
#define BENCH_FIDELITY_RUNNER_H_

#include <cstdio>
#include <fstream>
#include <string>

namespace spatial::fidelity {

struct RunnerArgs {
  std::string data = FIDELITY_DATA_DIR;
  std::string markdown;
  std::string only;  // --only=SUBSTRING, where the runner takes it
};

// Parses argv into `out`; on anything else prints `usage` to stderr and returns false. --only is accepted only
// when `takes_only`.
inline bool ParseRunnerArgs(int argc, char** argv, const char* usage, bool takes_only, RunnerArgs* out) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--data=", 0) == 0) {
      out->data = a.substr(7);
    } else if (a.rfind("--markdown=", 0) == 0) {
      out->markdown = a.substr(11);
    } else if (takes_only && a.rfind("--only=", 0) == 0) {
      out->only = a.substr(7);
    } else {
      std::fprintf(stderr, "usage: %s\n", usage);
      return false;
    }
  }
  return true;
}

// Writes `text` to `path` (nothing when `path` is empty); false after an error line on stderr.
inline bool WriteMarkdown(const std::string& path, const std::string& text) {
  if (path.empty()) return true;
  std::ofstream out(path);
  out << text;
  if (!out) {
    std::fprintf(stderr, "error: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

}  // namespace spatial::fidelity

#endif  // BENCH_FIDELITY_RUNNER_H_

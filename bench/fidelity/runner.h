// What every fidelity runner (bench/fidelity/*_fidelity.cc) shares: its command line — --data=DIR, the published
// tables (default the source tree's data/), and --markdown=FILE, where its table goes — and writing that table.
#ifndef BENCH_FIDELITY_RUNNER_H_
#define BENCH_FIDELITY_RUNNER_H_

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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

// Reads a published table: '#' lines and blank lines are skipped, then one header line, then rows of `fields`
// comma-separated fields, each handed to `row` (which returns false for a field it cannot read). False, with
// *error "path:line: ...", when the file cannot be read or a row is not a row.
template <class RowFn>
bool ReadCsv(const std::string& path, size_t fields, RowFn row, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = absl::StrCat(path, ": cannot read");
    return false;
  }
  std::string line;
  bool header = true;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      header = false;
      continue;
    }
    const std::vector<std::string> f = absl::StrSplit(line, ',');
    if (f.size() != fields || !row(f)) {
      *error = absl::StrCat(path, ":", n, ": not a row of ", fields, " fields: ", line);
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

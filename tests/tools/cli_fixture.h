// The built `spatial` binary as a test runs it: a temporary directory per test, and `spatial <args>` with its
// exit code, stdout and stderr. Shared by cli_test.cc and flows_test.cc.
#ifndef TESTS_TOOLS_CLI_FIXTURE_H_
#define TESTS_TOOLS_CLI_FIXTURE_H_

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace spatial {

namespace fs = std::filesystem;

struct CliRun {
  int code = -1;
  std::string out, err;
};

inline std::string Slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class SpatialCliBase {
 protected:
  void MakeDir() {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    std::string name = absl::StrCat("spatial_cli_", info->name());
    for (char& ch : name) {
      if (ch == '/') ch = '_';  // parameterized tests are named "Case/3"
    }
    dir_ = fs::path(testing::TempDir()) / name;
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(Path(name), std::ios::binary) << text;
    return Path(name);
  }

  // Runs `spatial <args>` (args already shell-quoted where needed), stdin from `in` or /dev/null.
  CliRun Spatial(const std::string& args, const std::string& in = "/dev/null") const {
    std::string out = Path("stdout.txt"), err = Path("stderr.txt");
    std::string cmd = absl::StrCat("'", SPATIAL_BIN, "' ", args, " <'", in, "' >'", out, "' 2>'", err, "'");
    int rc = std::system(cmd.c_str());
    CliRun r;
    r.code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    r.out = Slurp(out);
    r.err = Slurp(err);
    return r;
  }

  fs::path dir_;

 public:
  // The project's source tree.
  static fs::path Source() { return fs::path(SPATIAL_SOURCE_DIR); }
};

}  // namespace spatial

#endif  // TESTS_TOOLS_CLI_FIXTURE_H_

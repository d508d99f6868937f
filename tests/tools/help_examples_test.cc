// Every example a subcommand's --help prints runs as written, from a directory laid out like the repository root,
// the subcommands in the order a new user meets them (lower writes the programs the later examples read). A help
// example is a documented command: vm's once read an input the program does not have, opt's an op spec by a
// program's name, simulate's a matmul no example wrote.
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tools/cli_fixture.h"

namespace spatial {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class HelpExamples : public testing::Test, public SpatialCliBase {
 protected:
  void SetUp() override { MakeDir(); }

  // The lines after "example:" / "examples:" in `spatial <command> --help`.
  std::vector<std::string> Examples(const std::string& command) {
    CliRun help = Spatial(command + " --help");
    EXPECT_EQ(help.code, 0) << command << ": " << help.err;
    std::vector<std::string> out;
    bool in = false;
    for (absl::string_view line : absl::StrSplit(help.out, '\n')) {
      if (line == "example:" || line == "examples:") {
        in = true;
      } else if (in && absl::StartsWith(line, "  spatial ")) {
        out.emplace_back(line.substr(2));
      } else if (in && !line.empty()) {
        ADD_FAILURE() << command << ": an example line that is not a spatial command: " << line;
      }
    }
    return out;
  }
};

TEST_F(HelpExamples, EveryHelpExampleRunsAsWritten) {
  fs::create_directory_symlink(Source() / "examples", Path("examples"));
  // `spatial` as a user who installed it has it: on the PATH.
  fs::create_directories(Path("bin"));
  fs::create_symlink(SPATIAL_BIN, Path("bin/spatial"));
  int ran = 0;
  for (const char* command : {"lower", "certify", "vm", "simulate", "inspect", "opt", "targets", "ops", "model",
                              "demo"}) {
    const std::vector<std::string> examples = Examples(command);
    EXPECT_FALSE(examples.empty()) << command << " --help shows no example";
    for (const std::string& example : examples) {
      EXPECT_THAT(example, Not(HasSubstr("path/to"))) << "a placeholder a user cannot run";
      const std::string shell =
          absl::StrCat("cd '", dir_.string(), "' && export PATH='", Path("bin"), "':\"$PATH\" && { ", example, "; } >'",
                       Path("out.txt"), "' 2>'", Path("err.txt"), "' </dev/null");
      const int rc = std::system(shell.c_str());
      EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0)
          << command << " --help: " << example << "\nexit " << (WIFEXITED(rc) ? WEXITSTATUS(rc) : -1) << "\n"
          << Slurp(Path("err.txt"));
      ++ran;
    }
  }
  EXPECT_GE(ran, 15);
}

// The demo's rows and layer line as README.md quotes them ("## The demo") are what `spatial demo` prints: the
// quoted figures had drifted (a layer of 368,947 cycles where the demo printed 261,226).
TEST_F(HelpExamples, TheReadmeQuotesTheDemoAsItPrints) {
  const std::string readme = Slurp(Source() / "README.md");
  const size_t section = readme.find("## The demo");
  ASSERT_NE(section, std::string::npos);
  CliRun demo = Spatial("demo");
  ASSERT_EQ(demo.code, 0) << demo.err;
  // Runs of spaces are the table's alignment, not its content.
  auto squeeze = [](absl::string_view text) {
    std::string out;
    for (char c : text) {
      if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
      out.push_back(c);
    }
    return out;
  };
  const std::string printed = squeeze(demo.out);
  int quoted = 0;
  for (size_t open = readme.find("```\n", section); open != std::string::npos;
       open = readme.find("```\n", readme.find("```", open + 4) + 3)) {
    const size_t close = readme.find("```", open + 4);
    ASSERT_NE(close, std::string::npos);
    for (absl::string_view line : absl::StrSplit(readme.substr(open + 4, close - open - 4), '\n')) {
      const std::string want = squeeze(absl::StripAsciiWhitespace(line));
      if (want.empty()) continue;
      EXPECT_THAT(printed, HasSubstr(want)) << "README.md quotes a demo line the demo does not print";
      ++quoted;
    }
  }
  EXPECT_GE(quoted, 5);
}

}  // namespace
}  // namespace spatial

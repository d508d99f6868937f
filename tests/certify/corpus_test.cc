// The diagnostic corpus, in the style of MLIR's -verify-diagnostics: each file under corpus/ holds
// spatial.proto.Composition cases separated by lines "// -----". Each case says what it expects in a text-format
// comment: "# expected-ok" (it certifies on test_tiny) or "# expected-error: CODE" (it yields at least one
// diagnostic, and every diagnostic has that code).
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "certify/certify.h"
#include "certify/codes.h"
#include "gtest/gtest.h"
#include "proto/program.pb.h"
#include "spatial/proto_file.h"
#include "tests/certify/test_programs.h"

namespace spatial {
namespace {

struct CorpusCase {
  std::string file;     // path, for messages
  std::string name;     // test name: file stem, case number, expectation
  int first_line = 1;   // the case's first line in its file
  std::string text;     // padded with newlines so parse errors carry the file's line numbers
  std::string expected; // a code, or "" for expected-ok
  bool annotated = false;
};

// gtest prints a parameter when a test fails: the case's place, not its bytes.
void PrintTo(const CorpusCase& c, std::ostream* os) { *os << c.file << ":" << c.first_line; }

std::string Sanitize(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

std::vector<CorpusCase> LoadCorpus() {
  std::vector<CorpusCase> cases;
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(CERTIFY_CORPUS_DIR, ec)) {
    if (e.path().extension() == ".textproto") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    std::string content;
    if (!ReadFileToString(path.string(), &content).ok()) continue;
    std::vector<std::string> lines = absl::StrSplit(content, '\n');
    CorpusCase current;
    int number = 0;
    auto flush = [&](int next_line) {
      const bool blank = std::all_of(current.text.begin(), current.text.end(),
                                     [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
      if (!blank || current.annotated) {
        current.file = path.string();
        current.name = absl::StrCat(Sanitize(path.stem().string()), "_", number, "_",
                                    current.expected.empty() ? "ok" : current.expected);
        cases.push_back(current);
        ++number;
      }
      current = CorpusCase();
      current.first_line = next_line;
      current.text = std::string(static_cast<size_t>(next_line - 1), '\n');
    };
    current.first_line = 1;
    for (size_t i = 0; i < lines.size(); ++i) {
      absl::string_view line = absl::StripAsciiWhitespace(lines[i]);
      if (line == "// -----") {
        flush(static_cast<int>(i) + 2);
        continue;
      }
      if (absl::ConsumePrefix(&line, "# expected-error:")) {
        current.expected = std::string(absl::StripAsciiWhitespace(line));
        current.annotated = true;
      } else if (line == "# expected-ok") {
        current.annotated = true;
      }
      absl::StrAppend(&current.text, lines[i], "\n");
    }
    flush(static_cast<int>(lines.size()) + 1);
  }
  return cases;
}

const std::vector<CorpusCase>& Corpus() {
  static const std::vector<CorpusCase> cases = LoadCorpus();
  return cases;
}

class CorpusTest : public ::testing::TestWithParam<CorpusCase> {};

TEST_P(CorpusTest, CertifiesAsAnnotated) {
  const CorpusCase& c = GetParam();
  ASSERT_TRUE(c.annotated) << c.file << ":" << c.first_line << ": case has no '# expected-ok' or '# expected-error:'";
  proto::Composition p;
  absl::Status parsed = ParseTextProto(c.text, c.file, &p);
  ASSERT_TRUE(parsed.ok()) << parsed;
  CertifyResult r = CertifyProto(p, certify_testing::Tiny());
  // SPATIAL_CORPUS_VERBOSE=1 prints every diagnostic, to read what each case plants.
  if (std::getenv("SPATIAL_CORPUS_VERBOSE")) std::cout << certify_testing::Explain(r);
  if (c.expected.empty()) {
    EXPECT_TRUE(r.ok()) << c.file << ":" << c.first_line << ": expected to certify, got:\n"
                        << certify_testing::Explain(r);
    EXPECT_TRUE(r.certificate.certified());
    return;
  }
  EXPECT_TRUE(certify_testing::OnlyCode(r, c.expected)) << c.file << ":" << c.first_line;
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusTest, ::testing::ValuesIn(Corpus()),
                         [](const ::testing::TestParamInfo<CorpusCase>& info) { return info.param.name; });

// Every stable code has at least one minimal program that plants it, and positive programs exist.
TEST(CorpusCoverage, EveryCodeHasACase) {
  std::set<std::string> seen;
  int positive = 0;
  for (const CorpusCase& c : Corpus()) {
    if (c.expected.empty()) ++positive;
    seen.insert(c.expected);
  }
  EXPECT_GE(positive, 5);
  for (std::string_view code : codes::kAllCodes) {
    EXPECT_TRUE(seen.count(std::string(code))) << "no corpus case expects " << code;
  }
}

}  // namespace
}  // namespace spatial

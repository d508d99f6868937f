// The deterministic replay of the entry points the libFuzzer targets explore (entry_points.h), so `make test`
// keeps them covered: seeded mutants of real inputs — the example op specs, the shipped targets, .npy files the
// tool writes, command lines from the README — each through its entry point, which must not misbehave.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "tests/fuzz/entry_points.h"

namespace spatial::fuzz {
namespace {

namespace fs = std::filesystem;

uint64_t Next(uint64_t& s) {  // splitmix64
  uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// One to three edits: a number replaced by an extreme one, a byte flipped, a span deleted or duplicated.
std::string Mutate(std::string s, uint64_t& g) {
  static const char* kNumbers[] = {"0", "-1", "1", "2147483648", "-9223372036854775808", "9223372036854775807",
                                   "4294967296", "65536", "1e308", "nan", "-0"};
  const int edits = 1 + static_cast<int>(Next(g) % 3);
  for (int e = 0; e < edits && !s.empty(); ++e) {
    const size_t at = Next(g) % s.size();
    switch (Next(g) % 4) {
      case 0: {  // the number starting at or after `at`
        size_t b = s.find_first_of("0123456789", at);
        if (b == std::string::npos) break;
        size_t end = s.find_first_not_of("0123456789.e-", b);
        if (end == std::string::npos) end = s.size();
        s.replace(b, end - b, kNumbers[Next(g) % (sizeof(kNumbers) / sizeof(kNumbers[0]))]);
        break;
      }
      case 1: s[at] = static_cast<char>(s[at] ^ (1 << (Next(g) % 8))); break;
      case 2: s.erase(at, 1 + Next(g) % 16); break;
      case 3: s.insert(at, s.substr(at, 1 + Next(g) % 32)); break;
    }
  }
  return s;
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(fs::path(SPATIAL_SOURCE_DIR) / dir)) {
    if (e.path().extension() == ".textproto") out.push_back(Slurp(e.path()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

void Replay(const std::vector<std::string>& seeds, int per_seed, const std::function<std::string(std::string_view)>& f,
            uint64_t seed) {
  google::protobuf::LogSilencer quiet;
  ASSERT_FALSE(seeds.empty());
  uint64_t g = seed;
  int runs = 0;
  for (const std::string& s : seeds) {
    EXPECT_EQ(f(s), "") << "the unmutated seed misbehaved:\n" << s;
    for (int i = 0; i < per_seed; ++i) {
      const std::string m = Mutate(s, g);
      const std::string bad = f(m);
      ++runs;
      EXPECT_EQ(bad, "") << "mutant:\n" << m;
      if (!bad.empty()) return;
    }
  }
  std::printf("%d mutants\n", runs);
}

TEST(EntryPointsReplay, OpSpecsLowerToCertifiedProgramsOrClearErrors) {
  Replay(Files("examples/ops"), 30, &CheckLower, 1);
}

TEST(EntryPointsReplay, TargetFilesLoadOrFailClearly) { Replay(Files("targets"), 150, &CheckTarget, 2); }

TEST(EntryPointsReplay, NpyFilesParseOrFailClearly) {
  std::vector<std::string> seeds;
  seeds.push_back(EncodeNpy(TensorData{2, 3, Precision::kFp32, {1, 2, 3, 4, 5, 6}}));
  seeds.push_back(EncodeNpy(TensorData{1, 4, Precision::kInt32, {1, -2, 3, 7}}));
  seeds.push_back(EncodeNpy(TensorData{3, 1, Precision::kBf16, {0.5, 1.5, -2}}));
  Replay(seeds, 400, &CheckNpy, 3);
}

TEST(EntryPointsReplay, CommandLinesParseOrFailClearly) {
  const std::vector<std::string> seeds = {"--need=1\nprog.textproto", "--target\ntest_tiny\n--need\n2\n-o\nout",
                                          "--input\na=1\n--input=b=2,3\n--quiet\n--need=x\n--\n-",
                                          "--help", "--quiet=false\n--need=\n-o=f"};
  Replay(seeds, 400, &CheckArgs, 4);
}

}  // namespace
}  // namespace spatial::fuzz

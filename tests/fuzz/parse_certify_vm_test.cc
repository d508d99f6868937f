// Deterministic fuzz replay (DESIGN §10 "Fuzzing"): real programs — the golden programs and the shipped examples
// lowered for test_tiny and wormhole_n150 — mutated thousands of ways on the wire, each mutant run through
// parse -> FromProto -> Validate -> Certify -> VM (tests/fuzz/pipeline.h). Every failure must be a clean error and
// a certified program must never fault the VM on an address; the process must not crash or hang.
//
// Mutations, seeded (std::mt19937_64 is fully specified, so every machine replays the same cases):
//   binary encoding  bit flips, truncations, byte overwrites with 0x00/0xff/0x7f/0x80, deleted and inserted runs;
//   text encoding    truncations, deleted lines, deleted field blocks ("name { ... }"), numbers replaced by
//                    boundary values (0, -1, 2^31 - 1, INT64_MIN, 1e308, nan, ...), enum names swapped,
//                    duplicated and swapped lines.
// A failure prints the corpus program, the mutation, its seed and what misbehaved.
// SPATIAL_FUZZ_ROUNDS=N multiplies the cases (default 1: ~6000 cases).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "lowerings/registry.h"
#include "proto/op.pb.h"
#include "tests/fuzz/pipeline.h"

namespace spatial::fuzz {
namespace {

namespace fs = std::filesystem;

struct Seed {
  std::string name;
  proto::Composition program;
};

// The golden programs, and every shipped example lowered for test_tiny and wormhole_n150 whose encoding is small
// (a mutant of a large program is slow to certify and rarely gets further than a small one's).
std::vector<Seed> Corpus() {
  std::vector<Seed> corpus;
  const fs::path root(SPATIAL_SOURCE_DIR);
  for (const auto& e : fs::directory_iterator(root / "tests" / "golden")) {
    if (!absl::EndsWith(e.path().string(), ".program.textproto")) continue;
    Seed s{e.path().filename().string(), {}};
    absl::Status st = ReadProtoFile(e.path().string(), &s.program);
    EXPECT_TRUE(st.ok()) << st;
    if (st.ok()) corpus.push_back(std::move(s));
  }
  for (const auto& e : fs::directory_iterator(root / "examples" / "ops")) {
    if (e.path().extension() != ".textproto") continue;
    proto::OpSpec spec;
    if (!ReadProtoFile(e.path().string(), &spec).ok()) continue;
    for (const char* target : {"test_tiny", "wormhole_n150"}) {
      absl::StatusOr<Composition> c = Lower(spec, ShippedTargets().at(target));
      if (!c.ok()) continue;
      proto::Composition p = ToProto(*c);
      if (p.ByteSizeLong() > 16 * 1024) continue;
      corpus.push_back({absl::StrCat(e.path().filename().string(), "@", target), std::move(p)});
    }
  }
  std::sort(corpus.begin(), corpus.end(), [](const Seed& a, const Seed& b) { return a.name < b.name; });
  return corpus;
}

using Rng = std::mt19937_64;

size_t Below(Rng& g, size_t n) { return n == 0 ? 0 : static_cast<size_t>(g() % n); }

// One mutation of a binary encoding; `what` says which.
std::string MutateBinary(std::string b, Rng& g, std::string* what) {
  if (b.empty()) return b;
  switch (g() % 5) {
    case 0: {
      const int flips = 1 + static_cast<int>(g() % 8);
      for (int i = 0; i < flips; ++i) b[Below(g, b.size())] ^= static_cast<char>(1u << (g() % 8));
      *what = absl::StrCat("flip ", flips, " bits");
      break;
    }
    case 1: {
      const size_t at = Below(g, b.size());
      b.resize(at);
      *what = absl::StrCat("truncate at ", at);
      break;
    }
    case 2: {
      static constexpr char kBytes[] = {'\x00', '\xff', '\x7f', '\x80'};
      const size_t at = Below(g, b.size());
      b[at] = kBytes[g() % 4];
      *what = absl::StrCat("overwrite byte ", at);
      break;
    }
    case 3: {
      const size_t at = Below(g, b.size());
      const size_t n = std::min(b.size() - at, 1 + Below(g, 16));
      b.erase(at, n);
      *what = absl::StrCat("delete ", n, " bytes at ", at);
      break;
    }
    default: {
      const size_t at = Below(g, b.size());
      std::string run(1 + Below(g, 8), '\0');
      for (char& c : run) c = static_cast<char>(g());
      b.insert(at, run);
      *what = absl::StrCat("insert ", run.size(), " bytes at ", at);
      break;
    }
  }
  return b;
}

const std::vector<std::string>& NastyNumbers() {
  static const std::vector<std::string> v = {
      "0", "-1", "1", "2", "3", "7", "8", "255", "65536", "2147483647", "-2147483648", "4294967296",
      "9223372036854775807", "-9223372036854775808", "1e308", "-1e-300", "nan", "inf", "-inf", "0.5"};
  return v;
}

// Enum value names of the program format, for swapping one for another (or for one that does not exist).
const std::vector<std::string>& EnumNames() {
  static const std::vector<std::string> v = {"BF16", "FP32", "INT8", "INT32", "INT64", "PROLOGUE", "BODY", "EPILOGUE",
                                             "PARALLEL", "REDUCE_SUM", "REDUCE_MAX", "ROW", "COL", "K", "ITEM_Y",
                                             "ITEM_X", "KBLOCK", "NO_SUCH_ENUM_VALUE"};
  return v;
}

// One mutation of a text encoding; `what` says which.
std::string MutateText(const std::string& text, Rng& g, std::string* what) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (lines.empty()) return text;
  switch (g() % 7) {
    case 0: {
      const size_t at = Below(g, text.size());
      *what = absl::StrCat("truncate at ", at);
      return text.substr(0, at);
    }
    case 1: {
      const size_t at = Below(g, lines.size());
      *what = absl::StrCat("delete line ", at + 1, ": ", lines[at]);
      lines.erase(lines.begin() + at);
      break;
    }
    case 2: {
      // Delete a whole field block: a line ending in "{" through its matching "}".
      std::vector<size_t> opens;
      for (size_t i = 0; i < lines.size(); ++i) {
        if (absl::EndsWith(lines[i], "{")) opens.push_back(i);
      }
      if (opens.empty()) return text;
      const size_t from = opens[Below(g, opens.size())];
      int depth = 0;
      size_t to = from;
      for (size_t i = from; i < lines.size(); ++i) {
        for (char c : lines[i]) depth += c == '{' ? 1 : c == '}' ? -1 : 0;
        to = i;
        if (depth <= 0) break;
      }
      *what = absl::StrCat("delete block at line ", from + 1, ": ", lines[from]);
      lines.erase(lines.begin() + from, lines.begin() + to + 1);
      break;
    }
    case 3:
    case 4: {
      // Replace one number by a boundary value.
      static const std::regex number(R"((^|[\s:\[,])(-?[0-9][0-9.eE+-]*))");
      std::vector<std::pair<size_t, size_t>> hits;  // line, occurrence
      for (size_t i = 0; i < lines.size(); ++i) {
        auto begin = std::sregex_iterator(lines[i].begin(), lines[i].end(), number);
        for (auto it = begin; it != std::sregex_iterator(); ++it)
          hits.push_back({i, static_cast<size_t>(it->position(2))});
      }
      if (hits.empty()) return text;
      const auto [li, pos] = hits[Below(g, hits.size())];
      std::string& line = lines[li];
      size_t end = pos;
      while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '.' ||
                                   line[end] == '-' || line[end] == '+')) {
        ++end;
      }
      const std::string& v = NastyNumbers()[Below(g, NastyNumbers().size())];
      *what = absl::StrCat("line ", li + 1, ": ", line.substr(pos, end - pos), " -> ", v);
      line.replace(pos, end - pos, v);
      break;
    }
    case 5: {
      // Swap an enum value name for another.
      std::vector<size_t> candidates;
      for (size_t i = 0; i < lines.size(); ++i) {
        for (const std::string& e : EnumNames()) {
          if (absl::StrContains(lines[i], absl::StrCat(": ", e))) candidates.push_back(i);
        }
      }
      if (candidates.empty()) return text;
      const size_t li = candidates[Below(g, candidates.size())];
      const size_t colon = lines[li].find(": ");
      const std::string& v = EnumNames()[Below(g, EnumNames().size())];
      *what = absl::StrCat("line ", li + 1, ": ", lines[li], " -> enum ", v);
      lines[li] = absl::StrCat(lines[li].substr(0, colon + 2), v);
      break;
    }
    default: {
      const size_t a = Below(g, lines.size()), b = Below(g, lines.size());
      if (g() % 2) {
        *what = absl::StrCat("duplicate line ", a + 1, ": ", lines[a]);
        lines.insert(lines.begin() + a, lines[a]);
      } else {
        *what = absl::StrCat("swap lines ", a + 1, " and ", b + 1);
        std::swap(lines[a], lines[b]);
      }
      break;
    }
  }
  return absl::StrJoin(lines, "\n");
}

// The corpus itself: both encodings reach the same step and behave, nearly all certify (whether each lowering
// certifies is op_tolerance_test's and the lowerings tests' question; here it makes the mutants start deep), and
// most are small enough for the VM.
TEST(ParseCertifyVmFuzz, TheUnmutatedCorpusBehaves) {
  const std::vector<Seed> corpus = Corpus();
  ASSERT_GE(corpus.size(), 20u);
  int ran = 0, certified = 0;
  for (const Seed& s : corpus) {
    SCOPED_TRACE(s.name);
    const Outcome text = RunPipeline(ToTextProto(s.program), /*text=*/true, 1);
    EXPECT_EQ(text.misbehaved, "");
    const Outcome bin = RunPipeline(s.program.SerializeAsString(), /*text=*/false, 1);
    EXPECT_EQ(bin.misbehaved, "");
    EXPECT_EQ(bin.reached, text.reached);
    EXPECT_GE(static_cast<int>(bin.reached), static_cast<int>(Reached::kRejected));
    certified += bin.reached == Reached::kCertified;
    ran += bin.vm_ran;
  }
  EXPECT_GE(certified, static_cast<int>(corpus.size()) * 9 / 10);
  EXPECT_GE(ran, static_cast<int>(corpus.size()) / 2);
}

TEST(ParseCertifyVmFuzz, MutantsFailCleanly) {
  const std::vector<Seed> corpus = Corpus();
  ASSERT_FALSE(corpus.empty());
  int rounds = 1;
  if (const char* env = std::getenv("SPATIAL_FUZZ_ROUNDS"); env != nullptr) rounds = std::max(1, std::atoi(env));
  const int per_program = 50 * rounds;  // mutants per program and encoding
  // Mutated strings are often invalid UTF-8: protobuf logs each one; the parse error is what the test checks.
  google::protobuf::LogSilencer quiet;
  std::map<Reached, int> reached;
  int cases = 0, vm_runs = 0, simulated = 0, failures = 0;
  std::map<std::string, int> faults;
  for (size_t p = 0; p < corpus.size(); ++p) {
    const Seed& s = corpus[p];
    const std::string binary = s.program.SerializeAsString();
    const std::string text = ToTextProto(s.program);
    for (int i = 0; i < 2 * per_program; ++i) {
      const bool as_text = i % 2 == 1;
      const uint64_t seed = (static_cast<uint64_t>(p) << 32) ^ static_cast<uint64_t>(i);
      Rng g(seed);
      std::string what;
      const std::string mutant = as_text ? MutateText(text, g, &what) : MutateBinary(binary, g, &what);
      const Outcome o = RunPipeline(mutant, as_text, seed);
      ++cases;
      ++reached[o.reached];
      vm_runs += o.vm_ran;
      simulated += o.simulated;
      if (!o.vm_fault.empty()) ++faults[o.vm_fault];
      if (!o.misbehaved.empty() && ++failures <= 10) {
        ADD_FAILURE() << s.name << " (" << (as_text ? "text" : "binary") << ") seed " << seed << ", " << what
                      << ": " << o.misbehaved;
      }
    }
  }
  EXPECT_EQ(failures, 0);
  std::string faults_seen;
  for (const auto& [f, n] : faults) absl::StrAppend(&faults_seen, " ", f, "=", n);
  std::printf("%d mutants: %d parse errors, %d FromProto errors, %d invalid, %d rejected, %d certified; %d VM runs,"
              " faults:%s; %d timing-only simulations\n",
              cases, reached[Reached::kParseError], reached[Reached::kFromProtoError], reached[Reached::kInvalid],
              reached[Reached::kRejected], reached[Reached::kCertified], vm_runs, faults_seen.c_str(), simulated);
  // The mutants reach every step: a mutator that only produced unparsable bytes would test nothing past the parser.
  EXPECT_GE(cases, 5000);
  for (Reached r : {Reached::kParseError, Reached::kFromProtoError, Reached::kInvalid, Reached::kRejected,
                    Reached::kCertified}) {
    EXPECT_GE(reached[r], cases / 100) << "too few mutants reached step " << static_cast<int>(r);
  }
  EXPECT_GE(vm_runs, cases / 10);
  // Most certified mutants the VM runs go on to the machine model.
  EXPECT_GE(simulated, reached[Reached::kCertified] / 2);
}

}  // namespace
}  // namespace spatial::fuzz

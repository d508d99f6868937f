// Golden programs (DESIGN §10): every tests/golden/<name>.op.textproto (an OpSpec whose comment line
// "# target: NAME" names the shipped target) has a checked-in lowering, <name>.program.textproto, exactly as
//   spatial lower --target=NAME --op=<name>.op.textproto -o <name>.program.textproto
// writes it. The test lowers the spec again and compares the two SEMANTICALLY: both parsed to
// spatial.proto.Composition and compared field by field with MessageDifferencer (order of repeated fields matters:
// stage and section order are meaning), printing the differences on a mismatch. Formatting, comments and field
// order in the file do not matter.
//
// UPDATE MODE: when a lowering changes on purpose, regenerate every golden and review the diff before committing:
//   SPATIAL_UPDATE_GOLDENS=1 build/tests/golden/golden_test
// (a new golden: add <name>.op.textproto with its "# target:" line and run the same command).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "lowerings/registry.h"
#include "proto/program.pb.h"
#include "spatial/proto_file.h"
#include "spatial/proto_io.h"
#include "spatial/validate.h"
#include "targets/loader.h"

namespace spatial {
namespace {

namespace fs = std::filesystem;
using google::protobuf::util::MessageDifferencer;

constexpr char kSpecSuffix[] = ".op.textproto";
constexpr char kProgramSuffix[] = ".program.textproto";

bool UpdateMode() {
  const char* v = std::getenv("SPATIAL_UPDATE_GOLDENS");
  return v != nullptr && std::string(v) == "1";
}

struct Golden {
  std::string name;
  fs::path spec_path;
  fs::path program_path;
};

std::vector<Golden> Goldens() {
  std::vector<Golden> out;
  for (const auto& e : fs::directory_iterator(SPATIAL_GOLDEN_DIR)) {
    const std::string file = e.path().filename().string();
    if (!absl::EndsWith(file, kSpecSuffix)) continue;
    const std::string name = file.substr(0, file.size() - std::string(kSpecSuffix).size());
    out.push_back({name, e.path(), e.path().parent_path() / (name + kProgramSuffix)});
  }
  std::sort(out.begin(), out.end(), [](const Golden& a, const Golden& b) { return a.name < b.name; });
  return out;
}

// The NAME of the spec file's "# target: NAME" line, or "".
std::string TargetOf(const fs::path& spec_path) {
  std::ifstream in(spec_path);
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "# target: ")) return line.substr(std::string("# target: ").size());
  }
  return "";
}

// The semantic differences of two programs ("" when equal).
std::string Differences(const proto::Composition& golden, const proto::Composition& lowered) {
  MessageDifferencer d;
  std::string diff;
  d.ReportDifferencesToString(&diff);
  if (d.Compare(golden, lowered)) return "";
  if (diff.empty()) diff = "(the programs differ)";
  return diff;
}

TEST(GoldenTest, EveryGoldenProgramIsTheLoweringOfItsSpec) {
  const std::vector<Golden> goldens = Goldens();
  ASSERT_GE(goldens.size(), 10u);
  std::set<std::string> kinds;
  for (const Golden& g : goldens) {
    SCOPED_TRACE(g.spec_path.string());
    proto::OpSpec spec;
    absl::Status st = ReadProtoFile(g.spec_path.string(), &spec);
    ASSERT_TRUE(st.ok()) << st;
    kinds.insert(OpKindName(spec));
    const std::string target_name = TargetOf(g.spec_path);
    ASSERT_FALSE(target_name.empty()) << "the spec has no '# target: NAME' line";
    absl::StatusOr<Target> target = LoadTarget(target_name);
    ASSERT_TRUE(target.ok()) << target.status();
    absl::StatusOr<Composition> c = Lower(spec, *target);
    ASSERT_TRUE(c.ok()) << c.status();
    const proto::Composition lowered = ToProto(*c);

    if (UpdateMode()) {
      absl::Status w = WriteComposition(g.program_path.string(), *c);
      ASSERT_TRUE(w.ok()) << w;
      std::printf("updated %s\n", g.program_path.string().c_str());
      continue;
    }
    ASSERT_TRUE(fs::exists(g.program_path))
        << "no golden " << g.program_path << ": run SPATIAL_UPDATE_GOLDENS=1 " << "golden_test to write it";
    proto::Composition golden;
    st = ReadProtoFile(g.program_path.string(), &golden);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(golden.target(), target_name);
    // The golden is itself a valid program.
    absl::StatusOr<Composition> parsed = FromProto(golden);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    absl::Status valid = ValidateComposition(*parsed);
    EXPECT_TRUE(valid.ok()) << valid;

    const std::string diff = Differences(golden, lowered);
    EXPECT_EQ(diff, "") << "the lowering of " << g.spec_path.filename() << " on " << target_name
                        << " is no longer its golden " << g.program_path.filename()
                        << "; differences (golden -> now):\n"
                        << diff.substr(0, 6000) << (diff.size() > 6000 ? "\n..." : "")
                        << "\nIf the change is intended: SPATIAL_UPDATE_GOLDENS=1 golden_test, and review the diff.";
    // Deterministic (DESIGN §5): a second lowering serializes to the same bytes.
    absl::StatusOr<Composition> again = Lower(spec, *target);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(ToProto(*again).SerializeAsString(), lowered.SerializeAsString());
  }
  // A few programs per family that exists.
  for (const char* kind : {"silu", "int_requant", "matmul", "transpose", "head_slice", "l2norm", "softmax", "rope",
                           "attention", "row_gather", "set_row", "argmax", "causal_conv"}) {
    EXPECT_TRUE(kinds.count(kind)) << "no golden program of kind '" << kind << "'";
  }
}

// Every program file has its spec: a golden whose spec was deleted would silently stop being checked.
TEST(GoldenTest, NoOrphanPrograms) {
  std::set<std::string> specs;
  for (const Golden& g : Goldens()) specs.insert(g.name);
  for (const auto& e : fs::directory_iterator(SPATIAL_GOLDEN_DIR)) {
    const std::string file = e.path().filename().string();
    if (!absl::EndsWith(file, kProgramSuffix)) continue;
    const std::string name = file.substr(0, file.size() - std::string(kProgramSuffix).size());
    EXPECT_TRUE(specs.count(name)) << file << " has no " << name << kSpecSuffix;
  }
}

// The comparison is semantic, and it is not blind: reformatting a golden changes nothing; a one-field change in a
// stage, an item or a claim is reported with the field's path.
TEST(GoldenTest, TheComparisonSeesSemanticChangesOnly) {
  const fs::path path = fs::path(SPATIAL_GOLDEN_DIR) / (std::string("matmul_tiny") + kProgramSuffix);
  proto::Composition golden;
  absl::Status st = ReadProtoFile(path.string(), &golden);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_GT(golden.sections_size(), 0);

  // Reformatted: binary round trip, and text reprinted on one line.
  proto::Composition same;
  ASSERT_TRUE(same.ParseFromString(golden.SerializeAsString()));
  EXPECT_EQ(Differences(golden, same), "");
  proto::Composition reprinted;
  ASSERT_TRUE(ParseTextProto(golden.ShortDebugString(), "reprinted", &reprinted).ok());
  EXPECT_EQ(Differences(golden, reprinted), "");

  proto::Composition renamed = golden;
  ASSERT_GT(renamed.sections(0).stages_size(), 0);
  renamed.mutable_sections(0)->mutable_stages(0)->set_name("renamed_stage");
  const std::string d1 = Differences(golden, renamed);
  EXPECT_TRUE(absl::StrContains(d1, "stages[0].name")) << d1;
  EXPECT_TRUE(absl::StrContains(d1, "renamed_stage")) << d1;

  proto::Composition reordered = golden;
  if (reordered.sections(0).stages_size() > 1) {
    reordered.mutable_sections(0)->mutable_stages()->SwapElements(0, 1);
    EXPECT_NE(Differences(golden, reordered), "") << "stage order is meaning";
  }
}

}  // namespace
}  // namespace spatial

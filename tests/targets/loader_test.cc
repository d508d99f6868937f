#include "targets/loader.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/target.pb.h"
#include "spatial/proto_file.h"

namespace spatial {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// A minimal valid target; the negative tests below each plant one fault in it. Line numbers matter: the tests
// assert the file:line:col of each error.
constexpr char kValid[] = R"pb(name: "t"
tile { rows: 8 cols: 8 }
grid { y: 2 x: 2 }
local_mem_bytes: 65536
local_mem_reserved: 1024
acc { precision: FP32 tiles_full_sync: 4 tiles_double_buf: 2 }
acc { precision: BF16 tiles_full_sync: 8 tiles_double_buf: 4 }
datapaths {
  elementwise_float: BF16
  elementwise_int: INT32
  matrix_in: BF16
  matrix_acc: FP32
  index_precisions: [INT32]
  storage: [BF16, FP32, INT32]
}
clock_hz: 1e9
costs {
  matmul_lofi: 16 matmul_hifi2: 32 matmul_hifi3: 48 matmul_hifi4: 64
  eltwise_add_per_tile: 8 eltwise_mul_per_tile: 8 sfpu_op_per_tile: 32
  unpack_bytes_per_cycle: 64 pack_bytes_per_cycle: 64
  sfpu { kind: EXP cycles_per_tile: 1161 }
}
noc { link_bytes_per_cycle: 32 hop_cycles: 9 }
dram { channels: 12 bytes_per_second: 288e9 efficiency: 0.92 }
numerics {
  sfpu_mad: RNE sfpu_store: TRUNCATE pack: TIES_AWAY unpack: TRUNCATE
  exp: EXP_21F recip: RECIP_NEWTON rsqrt: RSQRT_MAGIC_POLY silu: SILU_SIGMOID fidelity: HIFI2
}
)pb";

// kValid with `from` (which must occur exactly once) replaced by `to`.
std::string Plant(const std::string& from, const std::string& to) {
  std::string s = kValid;
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << "'" << from << "' is not in kValid";
  EXPECT_EQ(s.find(from, at + 1), std::string::npos) << "'" << from << "' occurs twice in kValid";
  if (at == std::string::npos) return s;
  return s.replace(at, from.size(), to);
}

// The error message of parsing `text` as "t.textproto" (empty when it parses).
std::string ErrorOf(const std::string& text) {
  absl::StatusOr<Target> t = ParseTarget(text, "t.textproto");
  if (t.ok()) return "";
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(t.status().message());
}

// ---------------------------------------------------------------------------------------------------------------
// The shipped targets.

TEST(ShippedTargets, NamesAreTheFourDocumentedOnes) {
  EXPECT_THAT(ShippedTargetNames(), ElementsAre("blackhole_p150", "grayskull_e150", "test_tiny", "wormhole_n150"));
}

TEST(ShippedTargets, AllLoadAndCarryTheirOwnName) {
  for (const std::string& name : ShippedTargetNames()) {
    absl::StatusOr<Target> t = LoadTarget(name);
    ASSERT_TRUE(t.ok()) << name << ": " << t.status();
    EXPECT_EQ(t->name(), name);
  }
}

TEST(ShippedTargets, WormholeN150KeyNumbers) {
  absl::StatusOr<Target> t = LoadTarget("wormhole_n150");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->tile_rows(), 32);
  EXPECT_EQ(t->tile_cols(), 32);
  EXPECT_EQ(t->tile_bytes(Precision::kBf16), 2048);
  EXPECT_EQ(t->tile_bytes(Precision::kBfp8B), 1088);
  EXPECT_EQ(t->grid_y(), 8);
  EXPECT_EQ(t->grid_x(), 8);
  EXPECT_EQ(t->sites(), 64);
  EXPECT_EQ(t->proto().local_mem_bytes(), 1464 * 1024);
  EXPECT_EQ(t->proto().local_mem_reserved(), 101152);
  EXPECT_EQ(t->max_local_mem_bytes(), 1464 * 1024 - 101152);
  EXPECT_EQ(t->proto().num_cbs(), 32);
  // The seed's reference budget: eight fp32 Dst tiles with full sync.
  EXPECT_EQ(t->effective_acc_tiles(Precision::kFp32, true), 8);
  EXPECT_EQ(t->effective_acc_tiles(Precision::kFp32, false), 4);
  EXPECT_EQ(t->effective_acc_tiles(Precision::kBf16, true), 16);
  EXPECT_EQ(t->effective_acc_tiles(Precision::kBf16, false), 8);
  EXPECT_EQ(t->effective_acc_tiles(Precision::kInt32, true), 8);
  EXPECT_EQ(t->effective_acc_tiles(Precision::kInt32, false), 4);
  EXPECT_EQ(t->elementwise_float(), Precision::kBf16);
  EXPECT_EQ(t->elementwise_int(), Precision::kInt32);
  EXPECT_EQ(t->matrix_in(), Precision::kBf16);
  EXPECT_EQ(t->matrix_acc(), Precision::kFp32);
  for (Precision p : {Precision::kBf16, Precision::kFp16, Precision::kFp32, Precision::kBfp8B, Precision::kInt8,
                      Precision::kInt32}) {
    EXPECT_TRUE(t->supports_storage(p)) << PrecisionName(p);
  }
  EXPECT_FALSE(t->supports_storage(Precision::kInt64));
  absl::StatusOr<Precision> ix = t->index_precision_for(1 << 20);
  ASSERT_TRUE(ix.ok());
  EXPECT_EQ(*ix, Precision::kInt32);
  EXPECT_FALSE(t->index_precision_for(int64_t{1} << 40).ok());

  const proto::Target& p = t->proto();
  EXPECT_DOUBLE_EQ(p.clock_hz(), 1.0e9);
  EXPECT_DOUBLE_EQ(p.costs().matmul_lofi(), 16);
  EXPECT_DOUBLE_EQ(p.costs().matmul_hifi2(), 32);
  EXPECT_DOUBLE_EQ(p.costs().matmul_hifi3(), 48);
  EXPECT_DOUBLE_EQ(p.costs().matmul_hifi4(), 64);
  EXPECT_DOUBLE_EQ(p.costs().eltwise_add_per_tile(), 8);
  EXPECT_DOUBLE_EQ(p.costs().sfpu_op_per_tile(), 32);
  EXPECT_EQ(p.dram().channels(), 12);
  EXPECT_DOUBLE_EQ(p.dram().bytes_per_second(), 288e9);
  EXPECT_DOUBLE_EQ(p.dram().efficiency(), 0.92);
  EXPECT_DOUBLE_EQ(p.noc().link_bytes_per_cycle(), 32);
  EXPECT_DOUBLE_EQ(p.noc().hop_cycles(), 9);
  EXPECT_EQ(p.numerics().sfpu_mad(), proto::RNE);
  EXPECT_EQ(p.numerics().sfpu_store(), proto::TRUNCATE);
  EXPECT_EQ(p.numerics().pack(), proto::TIES_AWAY);
  EXPECT_TRUE(p.numerics().flush_denormals());
  EXPECT_EQ(p.numerics().exp(), proto::EXP_21F);
  EXPECT_EQ(p.numerics().recip(), proto::RECIP_NEWTON);
  EXPECT_EQ(p.numerics().recip_newton_iters(), 1);
}

// The cost of one SFPU function on a target; -1 when the table has no entry.
double SfpuCycles(const Target& t, proto::SfpuKind kind, bool approx) {
  for (const auto& c : t.proto().costs().sfpu()) {
    if (c.kind() == kind && c.approx() == approx) return c.cycles_per_tile();
  }
  return -1;
}

TEST(ShippedTargets, WormholeSfpuCostsAreTheMeasuredOnes) {
  absl::StatusOr<Target> t = LoadTarget("wormhole_n150");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(SfpuCycles(*t, proto::EXP, true), 70.7);
  EXPECT_DOUBLE_EQ(SfpuCycles(*t, proto::EXP, false), 1161);
}

TEST(ShippedTargets, BlackholeP150KeyNumbers) {
  absl::StatusOr<Target> t = LoadTarget("blackhole_p150");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->tile_rows(), 32);
  EXPECT_EQ(t->grid_x(), 11);
  EXPECT_EQ(t->grid_y(), 10);
  EXPECT_EQ(t->sites(), 110);
  EXPECT_EQ(t->proto().local_mem_bytes(), 1464 * 1024);
  EXPECT_EQ(t->max_local_mem_bytes(), 1464 * 1024 - 111360);
  EXPECT_EQ(t->effective_acc_tiles(Precision::kFp32, true), 8);
  EXPECT_EQ(t->effective_acc_tiles(Precision::kFp32, false), 4);
  EXPECT_EQ(t->matrix_acc(), Precision::kFp32);
  const proto::Target& p = t->proto();
  EXPECT_DOUBLE_EQ(p.clock_hz(), 1.35e9);
  EXPECT_EQ(p.dram().channels(), 8);
  EXPECT_DOUBLE_EQ(p.dram().bytes_per_second(), 512e9);
  EXPECT_DOUBLE_EQ(p.dram().efficiency(), 0.98);
  EXPECT_DOUBLE_EQ(p.noc().link_bytes_per_cycle(), 64);
  EXPECT_EQ(p.numerics().recip(), proto::RECIP_HW_APPROX);
  EXPECT_DOUBLE_EQ(SfpuCycles(*t, proto::RECIP, true), 32);
  EXPECT_DOUBLE_EQ(SfpuCycles(*t, proto::RECIP, false), 96);
  EXPECT_DOUBLE_EQ(SfpuCycles(*t, proto::EXP, true), 68.6);
  EXPECT_DOUBLE_EQ(SfpuCycles(*t, proto::EXP, false), 672);
}

TEST(ShippedTargets, GrayskullE150KeyNumbers) {
  absl::StatusOr<Target> t = LoadTarget("grayskull_e150");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->tile_rows(), 32);
  EXPECT_EQ(t->grid_x(), 12);
  EXPECT_EQ(t->grid_y(), 10);
  EXPECT_EQ(t->sites(), 120);
  EXPECT_EQ(t->proto().local_mem_bytes(), 1 << 20);
  const proto::Target& p = t->proto();
  EXPECT_DOUBLE_EQ(p.clock_hz(), 1.2e9);
  EXPECT_EQ(p.dram().channels(), 8);
  EXPECT_DOUBLE_EQ(p.dram().bytes_per_second(), 118.4e9);
  // No 32-bit Dst on Grayskull: bf16 accumulation only, no integer elementwise datapath.
  EXPECT_EQ(t->effective_acc_tiles(Precision::kFp32, true), 0);
  EXPECT_EQ(t->effective_acc_tiles(Precision::kBf16, true), 16);
  EXPECT_EQ(t->effective_acc_tiles(Precision::kBf16, false), 8);
  EXPECT_EQ(t->matrix_acc(), Precision::kBf16);
  EXPECT_EQ(t->elementwise_int(), std::nullopt);
  EXPECT_EQ(p.numerics().recip(), proto::RECIP_LEGACY_NEWTON);
  EXPECT_EQ(p.numerics().recip_newton_iters(), 3);
}

TEST(ShippedTargets, TestTinyIsSmall) {
  absl::StatusOr<Target> t = LoadTarget("test_tiny");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->tile_rows(), 8);
  EXPECT_EQ(t->tile_cols(), 8);
  EXPECT_EQ(t->tile_bytes(Precision::kFp32), 256);
  EXPECT_EQ(t->sites(), 4);
  EXPECT_EQ(t->proto().local_mem_bytes(), 96 * 1024);
  EXPECT_EQ(t->proto().local_mem_reserved(), 8192);
  EXPECT_EQ(t->max_local_mem_bytes() / t->tile_bytes(Precision::kFp32), 352);
  EXPECT_EQ(t->effective_acc_tiles(Precision::kFp32, true), 4);
  EXPECT_EQ(t->effective_acc_tiles(Precision::kFp32, false), 2);
  EXPECT_EQ(t->effective_acc_tiles(Precision::kBf16, true), 8);
  EXPECT_EQ(t->effective_acc_tiles(Precision::kBf16, false), 4);
  EXPECT_EQ(t->effective_acc_tiles(Precision::kInt32, true), 4);
  EXPECT_EQ(t->effective_acc_tiles(Precision::kInt32, false), 2);
  EXPECT_EQ(t->matrix_acc(), Precision::kFp32);
  EXPECT_DOUBLE_EQ(t->proto().clock_hz(), 1.0e9);
}

TEST(ShippedTargets, EverySfpuFunctionHasAnAccurateAndAnApproxCost) {
  const auto* kinds = proto::SfpuKind_descriptor();
  for (const std::string& name : ShippedTargetNames()) {
    absl::StatusOr<Target> t = LoadTarget(name);
    ASSERT_TRUE(t.ok()) << t.status();
    for (int i = 0; i < kinds->value_count(); ++i) {
      auto kind = static_cast<proto::SfpuKind>(kinds->value(i)->number());
      if (kind == proto::SFPU_KIND_UNSPECIFIED) continue;
      // EXP_ACCURATE is the target's exp in its accurate mode whatever the approx mode: the simulator costs it
      // from the EXP approx=false entry, so it needs no row of its own; EXP_FAST likewise from approx=true.
      if (kind == proto::EXP_ACCURATE || kind == proto::EXP_FAST) kind = proto::EXP;
      for (bool approx : {false, true}) {
        EXPECT_GE(SfpuCycles(*t, kind, approx), t->proto().costs().sfpu_op_per_tile())
            << name << " " << kinds->value(i)->name() << " approx=" << approx;
      }
    }
  }
}

TEST(ShippedTargets, EmbeddedTextsMatchTheSourceTree) {
  std::vector<std::string> on_disk;
  for (const auto& e : std::filesystem::directory_iterator(std::string(SPATIAL_SOURCE_DIR) + "/targets")) {
    if (e.path().extension() == ".textproto") on_disk.push_back(e.path().stem().string());
  }
  std::sort(on_disk.begin(), on_disk.end());
  EXPECT_EQ(on_disk, ShippedTargetNames());
  for (const std::string& name : on_disk) {
    std::ifstream f(std::string(SPATIAL_SOURCE_DIR) + "/targets/" + name + ".textproto", std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    std::optional<std::string_view> embedded = ShippedTargetText(name);
    ASSERT_TRUE(embedded.has_value()) << name;
    EXPECT_EQ(std::string(*embedded), ss.str()) << name << ": the embedded copy is stale; re-run CMake";
  }
}

// Whether a text-proto line (its comment already removed) holds a numeric literal outside strings.
bool HasNumber(std::string line) {
  std::string out;
  bool in_str = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char ch = line[i];
    if (ch == '"' && (i == 0 || line[i - 1] != '\\')) in_str = !in_str;
    out += in_str || ch == '"' ? ' ' : ch;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    bool token_start = i == 0 || std::string(" \t:[,{").find(out[i - 1]) != std::string::npos;
    if (!token_start) continue;
    size_t j = i;
    if (out[j] == '-' || out[j] == '+') ++j;
    if (j < out.size() && out[j] == '.') ++j;
    if (j < out.size() && std::isdigit(static_cast<unsigned char>(out[j]))) return true;
  }
  return false;
}

TEST(ShippedTargets, HasNumberSeesNumbersOnly) {
  EXPECT_TRUE(HasNumber("rows: 32"));
  EXPECT_TRUE(HasNumber("  sfpu { kind: EXP approx: true cycles_per_tile: 70.7 }"));
  EXPECT_TRUE(HasNumber("efficiency: .9"));
  EXPECT_TRUE(HasNumber("clock_hz: 1.0e9"));
  EXPECT_FALSE(HasNumber("index_precisions: [INT32]"));
  EXPECT_FALSE(HasNumber("name: \"wormhole_n150\""));
  EXPECT_FALSE(HasNumber("matrix_acc: FP32"));
}

TEST(ShippedTargets, EveryNumberHasASourceComment) {
  for (const std::string& name : ShippedTargetNames()) {
    std::optional<std::string_view> text = ShippedTargetText(name);
    ASSERT_TRUE(text.has_value());
    std::istringstream in{std::string(*text)};
    std::string line;
    bool prev_is_comment = false;
    int n = 0;
    int numeric_lines = 0;
    while (std::getline(in, line)) {
      ++n;
      if (n == 1) {
        EXPECT_EQ(line, "# proto-file: proto/target.proto") << name;
      } else if (n == 2) {
        EXPECT_EQ(line, "# proto-message: spatial.proto.Target") << name;
      }
      size_t first = line.find_first_not_of(" \t");
      bool is_comment = first != std::string::npos && line[first] == '#';
      // A '#' outside a string starts a comment (no shipped string holds a '#').
      size_t hash = line.find('#');
      std::string code = line.substr(0, hash);
      if (!is_comment && HasNumber(code)) {
        ++numeric_lines;
        EXPECT_TRUE(hash != std::string::npos || prev_is_comment)
            << "targets/" << name << ".textproto:" << n << ": a number without a source comment: " << line;
      }
      prev_is_comment = is_comment;
    }
    EXPECT_GT(numeric_lines, 30) << name;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// LoadTarget: names and paths.

TEST(LoadTarget, UnknownNameListsTheShippedOnes) {
  absl::StatusOr<Target> t = LoadTarget("wormhole_n300");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(t.status().message(), HasSubstr("unknown target 'wormhole_n300'"));
  for (const std::string& name : ShippedTargetNames()) EXPECT_THAT(t.status().message(), HasSubstr(name));
}

TEST(LoadTarget, MissingFileIsNotFound) {
  absl::StatusOr<Target> t = LoadTarget("/nonexistent/dir/my_target.textproto");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(t.status().message(), HasSubstr("/nonexistent/dir/my_target.textproto"));
  EXPECT_THAT(t.status().message(), HasSubstr("wormhole_n150"));
}

TEST(LoadTarget, DirectoryIsAnError) {
  absl::StatusOr<Target> t = LoadTarget(std::filesystem::temp_directory_path().string());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("is a directory"));
}

std::string TempPath(const std::string& leaf) {
  return (std::filesystem::temp_directory_path() /
          ("targets_test_" + std::to_string(::getpid()) + "_" + leaf))
      .string();
}

TEST(LoadTarget, ReadsATextFile) {
  std::string path = TempPath("mine.textproto");
  ASSERT_TRUE(WriteStringToFile(path, kValid).ok());
  absl::StatusOr<Target> t = LoadTarget(path);
  std::remove(path.c_str());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->name(), "t");
  EXPECT_EQ(t->sites(), 4);
}

TEST(LoadTarget, ErrorsInAFileNameTheFile) {
  std::string path = TempPath("bad.textproto");
  ASSERT_TRUE(WriteStringToFile(path, Plant("grid { y: 2 x: 2 }", "grid { y: 2 x: -1 }")).ok());
  absl::StatusOr<Target> t = LoadTarget(path);
  std::remove(path.c_str());
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr(path + ":3:13: error: grid.x must be in [1, 4096], got -1"));
}

TEST(LoadTarget, ReadsAndChecksABinaryFile) {
  absl::StatusOr<Target> good = ParseTarget(kValid, "t.textproto");
  ASSERT_TRUE(good.ok()) << good.status();
  std::string path = TempPath("mine.binpb");
  ASSERT_TRUE(WriteProtoFile(path, good->proto()).ok());
  absl::StatusOr<Target> t = LoadTarget(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->tile_rows(), 8);

  proto::Target bad = good->proto();
  bad.mutable_dram()->set_efficiency(1.5);
  ASSERT_TRUE(WriteProtoFile(path, bad).ok());
  absl::StatusOr<Target> b = LoadTarget(path);
  std::remove(path.c_str());
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr(path + ":1:1: error: dram.efficiency must be in (0, 1]"));
}

// ---------------------------------------------------------------------------------------------------------------
// ParseTarget: syntax and meaning, each fault planted alone.

TEST(ParseTarget, ValidBaselineParses) { EXPECT_EQ(ErrorOf(kValid), ""); }

TEST(ParseTarget, UnknownFieldIsAnErrorWithPositionAndName) {
  std::string e = ErrorOf(Plant("tile { rows: 8 cols: 8 }", "tile { rows: 8 cols: 8 depth: 3 }"));
  EXPECT_THAT(e, HasSubstr("t.textproto:2:"));
  EXPECT_THAT(e, HasSubstr("depth"));
  std::string top = ErrorOf(Plant("clock_hz: 1e9", "clock_ghz: 1"));
  EXPECT_THAT(top, HasSubstr("t.textproto:16:"));
  EXPECT_THAT(top, HasSubstr("clock_ghz"));
}

TEST(ParseTarget, MalformedTextIsAnError) {
  EXPECT_THAT(ErrorOf(Plant("grid { y: 2 x: 2 }", "grid { y: 2 x: 2")), HasSubstr("t.textproto:"));
  EXPECT_THAT(ErrorOf(Plant("precision: FP32", "precision: FP33")), HasSubstr("t.textproto:6:"));
}

TEST(ParseTarget, MissingTopLevelFieldPointsAt1_1) {
  EXPECT_THAT(ErrorOf(Plant("grid { y: 2 x: 2 }\n", "")),
              HasSubstr("t.textproto:1:1: error: missing required field 'grid'"));
  EXPECT_THAT(ErrorOf(Plant("name: \"t\"\n", "")), HasSubstr("t.textproto:1:1: error: missing required field 'name'"));
  EXPECT_THAT(ErrorOf(Plant("clock_hz: 1e9\n", "")),
              HasSubstr("t.textproto:1:1: error: missing required field 'clock_hz'"));
  EXPECT_THAT(ErrorOf(Plant("local_mem_bytes: 65536\n", "")),
              HasSubstr("t.textproto:1:1: error: missing required field 'local_mem_bytes'"));
}

TEST(ParseTarget, EveryRequiredTopLevelFieldIsRequired) {
  // Each required message or repeated field removed on its own.
  const std::pair<std::string, std::string> cases[] = {
      {"tile { rows: 8 cols: 8 }\n", "tile"},
      {"noc { link_bytes_per_cycle: 32 hop_cycles: 9 }\n", "noc"},
      {"dram { channels: 12 bytes_per_second: 288e9 efficiency: 0.92 }\n", "dram"},
  };
  for (const auto& [line, field] : cases) {
    EXPECT_THAT(ErrorOf(Plant(line, "")), HasSubstr("t.textproto:1:1: error: missing required field '" + field + "'"))
        << field;
  }
  std::string no_acc = Plant("acc { precision: FP32 tiles_full_sync: 4 tiles_double_buf: 2 }\n", "");
  size_t at = no_acc.find("acc {");
  no_acc.erase(at, no_acc.find('\n', at) + 1 - at);
  EXPECT_THAT(ErrorOf(no_acc), HasSubstr("t.textproto:1:1: error: missing required field 'acc'"));
}

TEST(ParseTarget, MissingNestedFieldPointsAtTheEnclosingMessage) {
  EXPECT_THAT(ErrorOf(Plant("tile { rows: 8 cols: 8 }", "tile { rows: 8 }")),
              HasSubstr("t.textproto:2:1: error: missing required field 'tile.cols'"));
  EXPECT_THAT(ErrorOf(Plant("dram { channels: 12 ", "dram { ")),
              HasSubstr("t.textproto:24:1: error: missing required field 'dram.channels'"));
  EXPECT_THAT(ErrorOf(Plant(" fidelity: HIFI2", "")),
              HasSubstr("t.textproto:25:1: error: missing required field 'numerics.fidelity'"));
  EXPECT_THAT(ErrorOf(Plant("  index_precisions: [INT32]\n", "")),
              HasSubstr("t.textproto:8:1: error: missing required field 'datapaths.index_precisions'"));
}

TEST(ParseTarget, TileShapeOutOfRange) {
  EXPECT_THAT(ErrorOf(Plant("tile { rows: 8", "tile { rows: 0")),
              HasSubstr("t.textproto:2:8: error: tile.rows must be in [1, 1024], got 0"));
  EXPECT_THAT(ErrorOf(Plant("cols: 8 }", "cols: 2048 }")),
              HasSubstr("t.textproto:2:16: error: tile.cols must be in [1, 1024], got 2048"));
  EXPECT_THAT(ErrorOf(Plant("tile { rows: 8", "tile { rows: -4")), HasSubstr("tile.rows must be in [1, 1024], got -4"));
}

TEST(ParseTarget, ReservedMustLeaveLocalMemory) {
  EXPECT_THAT(ErrorOf(Plant("local_mem_reserved: 1024", "local_mem_reserved: 65536")),
              HasSubstr("t.textproto:5:1: error: local_mem_reserved (65536) must be less than local_mem_bytes (65536)"));
  EXPECT_THAT(ErrorOf(Plant("local_mem_reserved: 1024", "local_mem_reserved: -1")),
              HasSubstr("t.textproto:5:1: error: local_mem_reserved must be >= 0"));
  EXPECT_EQ(ErrorOf(Plant("local_mem_reserved: 1024", "local_mem_reserved: 65535")), "");
}

TEST(ParseTarget, AccumulatorCapacity) {
  EXPECT_THAT(ErrorOf(Plant("FP32 tiles_full_sync: 4", "FP32 tiles_full_sync: 0")),
              HasSubstr("t.textproto:6:23: error: acc[0].tiles_full_sync must be in [1, 1048576], got 0"));
  EXPECT_THAT(ErrorOf(Plant("tiles_double_buf: 4 }", "tiles_double_buf: 9 }")),
              HasSubstr("t.textproto:7:42: error: acc[1].tiles_double_buf (9) exceeds acc[1].tiles_full_sync (8)"));
  EXPECT_THAT(ErrorOf(Plant("tiles_double_buf: 2 }", "tiles_double_buf: -2 }")),
              HasSubstr("t.textproto:6:42: error: acc[0].tiles_double_buf must be in [1, 1048576], got -2"));
  EXPECT_THAT(ErrorOf(Plant("acc { precision: BF16", "acc { precision: FP32")),
              HasSubstr("t.textproto:7:7: error: duplicate accumulator precision FP32 in acc[1]"));
  EXPECT_THAT(ErrorOf(Plant("acc { precision: BF16 ", "acc { ")),
              HasSubstr("t.textproto:7:1: error: missing required field 'acc[1].precision'"));
  EXPECT_THAT(ErrorOf(Plant("acc { precision: BF16", "acc { precision: PRECISION_UNSPECIFIED")),
              HasSubstr("t.textproto:7:7: error: acc[1].precision must not be PRECISION_UNSPECIFIED"));
}

TEST(ParseTarget, ClockMustBePositive) {
  EXPECT_THAT(ErrorOf(Plant("clock_hz: 1e9", "clock_hz: 0")),
              HasSubstr("t.textproto:16:1: error: clock_hz must be a finite number > 0, got 0"));
  EXPECT_THAT(ErrorOf(Plant("clock_hz: 1e9", "clock_hz: -1e9")), HasSubstr("t.textproto:16:1: error: clock_hz"));
  EXPECT_THAT(ErrorOf(Plant("clock_hz: 1e9", "clock_hz: inf")), HasSubstr("t.textproto:16:1: error: clock_hz"));
  EXPECT_THAT(ErrorOf(Plant("clock_hz: 1e9", "clock_hz: nan")), HasSubstr("t.textproto:16:1: error: clock_hz"));
}

TEST(ParseTarget, DramEfficiencyIsAFractionOfPeak) {
  EXPECT_THAT(ErrorOf(Plant("efficiency: 0.92", "efficiency: 1.2")),
              HasSubstr("t.textproto:24:45: error: dram.efficiency must be in (0, 1]"));
  EXPECT_THAT(ErrorOf(Plant("efficiency: 0.92", "efficiency: 0")), HasSubstr("t.textproto:24:45: error: dram.efficiency"));
  EXPECT_THAT(ErrorOf(Plant("efficiency: 0.92", "efficiency: -0.5")), HasSubstr("dram.efficiency must be in (0, 1]"));
  EXPECT_EQ(ErrorOf(Plant("efficiency: 0.92", "efficiency: 1")), "");
  EXPECT_THAT(ErrorOf(Plant(" efficiency: 0.92", "")),
              HasSubstr("t.textproto:24:1: error: missing required field 'dram.efficiency'"));
}

TEST(ParseTarget, IndexPrecisionMustBeAnInteger) {
  EXPECT_THAT(ErrorOf(Plant("index_precisions: [INT32]", "index_precisions: [BF16]")),
              HasSubstr("t.textproto:13:3: error: datapaths.index_precisions[0] is BF16, not an integer precision"));
  EXPECT_THAT(ErrorOf(Plant("index_precisions: [INT32]", "index_precisions: [INT32, FP32]")),
              HasSubstr("t.textproto:13:3: error: datapaths.index_precisions[1] is FP32, not an integer precision"));
  EXPECT_THAT(ErrorOf(Plant("index_precisions: [INT32]", "index_precisions: [INT64]")),
              HasSubstr("datapaths.index_precisions[0] is INT64, which is not among the storage precisions"));
}

TEST(ParseTarget, DatapathConsistency) {
  EXPECT_THAT(ErrorOf(Plant("elementwise_float: BF16", "elementwise_float: INT32")),
              HasSubstr("t.textproto:9:3: error: datapaths.elementwise_float must be a float precision, got INT32"));
  EXPECT_THAT(ErrorOf(Plant("elementwise_int: INT32", "elementwise_int: FP32")),
              HasSubstr("t.textproto:10:3: error: datapaths.elementwise_int must be an integer precision, got FP32"));
  EXPECT_THAT(ErrorOf(Plant("matrix_acc: FP32", "matrix_acc: FP16")),
              HasSubstr("t.textproto:12:3: error: datapaths.matrix_acc is FP16 but no acc entry"));
  EXPECT_THAT(ErrorOf(Plant("  matrix_acc: FP32\n", "")),
              HasSubstr("t.textproto:11:3: error: datapaths.matrix_in is set but datapaths.matrix_acc is not"));
  EXPECT_THAT(ErrorOf(Plant("matrix_in: BF16", "matrix_in: FP16")),
              HasSubstr("t.textproto:11:3: error: datapaths.matrix_in is FP16, which is not among the storage"));
  EXPECT_THAT(ErrorOf(Plant("storage: [BF16, FP32, INT32]", "storage: [BF16, FP32, INT32, BF16]")),
              HasSubstr("t.textproto:14:3: error: duplicate storage precision BF16"));
  // A target without a matrix engine or an integer datapath is legal: lowerings refuse what it cannot run.
  EXPECT_EQ(ErrorOf(Plant("  matrix_in: BF16\n  matrix_acc: FP32\n", "")), "");
  EXPECT_EQ(ErrorOf(Plant("  elementwise_int: INT32\n", "")), "");
}

TEST(ParseTarget, UnspecifiedEnumsWhereRequired) {
  EXPECT_THAT(ErrorOf(Plant("sfpu_mad: RNE", "sfpu_mad: ROUNDING_UNSPECIFIED")),
              HasSubstr("t.textproto:26:3: error: numerics.sfpu_mad must not be ROUNDING_UNSPECIFIED"));
  EXPECT_THAT(ErrorOf(Plant(" recip: RECIP_NEWTON", "")),
              HasSubstr("t.textproto:25:1: error: missing required field 'numerics.recip'"));
  EXPECT_THAT(ErrorOf(Plant("sfpu { kind: EXP", "sfpu { kind: SFPU_KIND_UNSPECIFIED")),
              HasSubstr("t.textproto:21:10: error: costs.sfpu[0].kind must not be SFPU_KIND_UNSPECIFIED"));
}

TEST(ParseTarget, CostConsistency) {
  EXPECT_THAT(ErrorOf(Plant("matmul_hifi3: 48", "matmul_hifi3: 24")),
              HasSubstr("t.textproto:18:36: error: costs.matmul_hifi3 (24) is less than costs.matmul_hifi2 (32)"));
  EXPECT_THAT(ErrorOf(Plant("matmul_lofi: 16 ", "")),
              HasSubstr("t.textproto:17:1: error: missing required field 'costs.matmul_lofi'"));
  EXPECT_THAT(ErrorOf(Plant("cycles_per_tile: 1161", "cycles_per_tile: 8")),
              HasSubstr("t.textproto:21:20: error: costs.sfpu[0].cycles_per_tile (8) is below costs.sfpu_op_per_tile"));
  EXPECT_THAT(ErrorOf(Plant("  sfpu { kind: EXP cycles_per_tile: 1161 }",
                            "  sfpu { kind: EXP cycles_per_tile: 1161 }\n  sfpu { kind: EXP cycles_per_tile: 99 }")),
              HasSubstr("t.textproto:22:3: error: duplicate SFPU cost for EXP (approx: false) in costs.sfpu[1]"));
  EXPECT_THAT(ErrorOf(Plant("hop_cycles: 9", "hop_cycles: -9")),
              HasSubstr("t.textproto:23:32: error: noc.hop_cycles must be a finite number >= 0, got -9"));
  EXPECT_THAT(ErrorOf(Plant("efficiency: 0.92 }", "efficiency: 0.92 capacity_bytes: -1 }")),
              HasSubstr("error: dram.capacity_bytes must be >= 0 (0: not given), got -1"));
}

TEST(ParseTarget, AllErrorsAreReportedTogether) {
  std::string text = Plant("tile { rows: 8", "tile { rows: 0");
  size_t at = text.find("clock_hz: 1e9");
  text.replace(at, 13, "clock_hz: 0");
  std::string e = ErrorOf(text);
  EXPECT_THAT(e, HasSubstr("t.textproto:2:8: error: tile.rows"));
  EXPECT_THAT(e, HasSubstr("t.textproto:16:1: error: clock_hz"));
}

TEST(ParseTarget, ValidateTargetWithoutLocationsPointsAt1_1) {
  absl::StatusOr<Target> good = ParseTarget(kValid, "t.textproto");
  ASSERT_TRUE(good.ok());
  proto::Target p = good->proto();
  EXPECT_TRUE(ValidateTarget(p, "mem").ok());
  p.mutable_tile()->set_rows(0);
  absl::Status s = ValidateTarget(p, "mem");
  EXPECT_THAT(s.message(), HasSubstr("mem:1:1: error: missing required field 'tile.rows'"));
  EXPECT_THAT(s.message(), Not(HasSubstr("tile.cols")));
}

}  // namespace
}  // namespace spatial

// The built `spatial` binary end to end: exit codes, diagnostics on stderr, and a lower -> vm -> re-run round
// trip whose outputs must be identical.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spatial/proto_io.h"
#include "spatial/tensor_data.h"
#include "tests/tools/cli_fixture.h"
#include "tools/npy.h"

namespace spatial {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::MatchesRegex;

class SpatialCli : public testing::Test, public SpatialCliBase {
 protected:
  void SetUp() override { MakeDir(); }

  // A SiLU spec over a 1 x n row named x -> y.
  std::string SiluSpec(int64_t n) const {
    return Write(absl::StrCat("silu_", n, ".textproto"),
                 absl::StrCat("out: \"y\"\noperands { name: \"x\" }\nsilu { n: ", n, " }\n"));
  }

  // Lowers a 1 x 64 SiLU for test_tiny; returns the program path.
  std::string LoweredSilu() const {
    std::string prog = Path("silu.textproto");
    CliRun r = Spatial(absl::StrCat("lower --target=test_tiny --op=", SiluSpec(64), " -o ", prog));
    EXPECT_EQ(r.code, 0) << r.err;
    return prog;
  }
};

TEST_F(SpatialCli, MalformedTextProtoHasFileLineCol) {
  std::string spec = Write("bad.textproto", "out: \"y\"\nsilu { n: oops }\n");
  CliRun r = Spatial("lower --target=test_tiny --op=" + spec);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr(spec + ":2:"));
  EXPECT_THAT(r.err, MatchesRegex(".*bad\\.textproto:2:[0-9]+: error: .*"));
}

TEST_F(SpatialCli, SpecWithoutKindIsBadInput) {
  std::string spec = Write("nokind.textproto", "out: \"y\"\noperands { name: \"x\" }\n");
  CliRun r = Spatial("lower --target=test_tiny --op=" + spec);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr(spec + ": error: op spec has no kind"));
}

TEST_F(SpatialCli, ZeroSizeIsARefusal) {
  std::string spec = SiluSpec(0);
  CliRun r = Spatial("lower --target=test_tiny --op=" + spec);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr(spec + ": error: refused: NotLowered: "));
  EXPECT_TRUE(r.out.empty()) << "a refusal must not print a program";
}

TEST_F(SpatialCli, TargetFileWithUnknownFieldHasFileLineCol) {
  std::string target = Write("t.textproto", "name: \"t\"\nbogus_field: 3\n");
  CliRun r = Spatial(absl::StrCat("lower --target=", target, " --op=", SiluSpec(64)));
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr(target + ":2:"));
  EXPECT_THAT(r.err, HasSubstr("bogus_field"));
}

TEST_F(SpatialCli, UnknownTargetNameListsTheShippedOnes) {
  CliRun r = Spatial(absl::StrCat("lower --target=no_such_target --op=", SiluSpec(64)));
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("wormhole_n150"));
}

TEST_F(SpatialCli, UsageErrors) {
  CliRun none = Spatial("");
  EXPECT_EQ(none.code, 2);
  EXPECT_THAT(none.err, HasSubstr("spatial: error: missing subcommand"));

  CliRun unknown = Spatial("frobnicate");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("spatial: error: unknown subcommand 'frobnicate' (subcommands: lower,"));

  CliRun missing = Spatial("vm");
  EXPECT_EQ(missing.code, 2);
  EXPECT_THAT(missing.err, HasSubstr("spatial vm: error: missing argument PROG"));

  CliRun no_target = Spatial("lower --op=" + SiluSpec(64));
  EXPECT_EQ(no_target.code, 2);
  EXPECT_THAT(no_target.err, HasSubstr("spatial lower: error: missing --target"));

  CliRun bad_flag = Spatial("inspect p.textproto --frobnicate");
  EXPECT_EQ(bad_flag.code, 2);
  EXPECT_THAT(bad_flag.err, HasSubstr("spatial inspect: error: unknown flag '--frobnicate'"));

  CliRun unreadable = Spatial("inspect " + Path("nope.textproto"));
  EXPECT_EQ(unreadable.code, 2);
  EXPECT_THAT(unreadable.err, HasSubstr("nope.textproto: error: cannot open file"));
}

TEST_F(SpatialCli, HelpForTheToolAndEachSubcommand) {
  CliRun tool = Spatial("--help");
  EXPECT_EQ(tool.code, 0);
  for (const char* sub : {"lower", "vm", "inspect", "demo"}) {
    EXPECT_THAT(tool.out, HasSubstr(absl::StrCat("  ", sub, " "))) << sub;
    CliRun r = Spatial(absl::StrCat(sub, " --help"));
    EXPECT_EQ(r.code, 0) << sub;
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("usage: spatial ", sub))) << sub;
    EXPECT_THAT(r.out, HasSubstr("example")) << sub;
  }
  CliRun vm = Spatial("vm --help");
  EXPECT_THAT(vm.out, HasSubstr("--random-inputs=SEED"));
  EXPECT_THAT(vm.out, HasSubstr("--input=NAME=FILE.npy"));
}

TEST_F(SpatialCli, NpyOfTheWrongShapeOrDtype) {
  std::string prog = LoweredSilu();
  std::string wrong_shape = Path("wrong_shape.npy");
  ASSERT_TRUE(WriteNpy(wrong_shape, TensorData{2, 3, Precision::kFp32, std::vector<double>(6, 0.0)}).ok());
  CliRun r = Spatial(absl::StrCat("vm ", prog, " --input x=", wrong_shape));
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr(wrong_shape + ": error: shape (2, 3) but the program's tensor 'x' is 1x64"));

  // A complex64 array: a valid .npy of a dtype the tool does not take.
  std::string dict = "{'descr': '<c8', 'fortran_order': False, 'shape': (64,), }\n";
  std::string c8 = std::string("\x93NUMPY\x01\x00", 8);
  c8.push_back(static_cast<char>(dict.size()));
  c8.push_back('\0');
  std::string wrong_dtype = Write("c8.npy", c8 + dict + std::string(64 * 8, '\0'));
  CliRun d = Spatial(absl::StrCat("vm ", prog, " --input x=", wrong_dtype));
  EXPECT_EQ(d.code, 2);
  EXPECT_THAT(d.err, HasSubstr(wrong_dtype + ": error: unsupported dtype \"<c8\""));

  CliRun missing = Spatial("vm " + prog);
  EXPECT_EQ(missing.code, 2);
  EXPECT_THAT(missing.err, HasSubstr("error: no value for run input 'x' (1x64 bf16) (Input): give --input x=FILE.npy"));

  CliRun stranger = Spatial(absl::StrCat("vm ", prog, " --input nosuch=", wrong_shape));
  EXPECT_EQ(stranger.code, 2);
  EXPECT_THAT(stranger.err, HasSubstr("the program has no run input 'nosuch' (its run inputs: x)"));
}

// An --output-dir that cannot be made is bad usage (2), as an unreadable input is, not a failed run (1).
TEST_F(SpatialCli, UnusableOutputDirIsAUsageError) {
  std::string prog = LoweredSilu();
  const std::string plain = Write("plain.txt", "not a directory\n");
  CliRun r = Spatial(absl::StrCat("vm ", prog, " --random-inputs=1 --quiet --output-dir=", plain, "/out"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("spatial vm: error: cannot write --output-dir=" + plain + "/out: '" + plain +
                               "' is not a directory"));
}

// A given integer input outside the range the certificate admits still runs (the VM's fault is exact), but the
// fault names where the value is read (a RoPE table row), so a warning names the input and its range first.
TEST_F(SpatialCli, AGivenPositionOutsideItsAdmittedRangeIsNamed) {
  const std::string spec = Write("rope.textproto",
                                 "out: \"q_rot\" operands { name: \"q\" } operands { name: \"rope_cos\" } "
                                 "operands { name: \"rope_sin\" } operands { name: \"pos\" } rope { h: 32 hd: 64 "
                                 "half: 32 rows: 8 from { named: \"pos\" } cache: 16 theta: 1e6 }\n");
  const std::string prog = Path("rope_prog.textproto");
  ASSERT_EQ(Spatial(absl::StrCat("lower --target=wormhole_n150 --op=", spec, " -o ", prog)).code, 0);
  CliRun in = Spatial(absl::StrCat("vm ", prog, " --random-inputs=1 --quiet --input pos=9"));
  EXPECT_EQ(in.code, 0) << in.err;
  EXPECT_THAT(in.err, Not(HasSubstr("warning")));
  CliRun out = Spatial(absl::StrCat("vm ", prog, " --random-inputs=1 --quiet --input pos=10"));
  EXPECT_EQ(out.code, 1) << out.err;
  EXPECT_THAT(out.err, HasSubstr("warning: run input 'pos' has 1 of 1 values outside [1, 9], the range the "
                                 "program's checks admit for it; the run may fault"));
  EXPECT_THAT(out.err, HasSubstr("IndexOutOfRange"));
}

// --timing-only computes no values, so a flag about values with it is bad usage: --compare-vm used to exit 0 having
// compared nothing, --output-dir to write nothing.
TEST_F(SpatialCli, TimingOnlyRefusesFlagsAboutValues) {
  std::string prog = LoweredSilu();
  for (const char* flag : {"--compare-vm", "--exact", "--output-dir=od"}) {
    CliRun r = Spatial(absl::StrCat("simulate ", prog, " --random-inputs=1 --timing-only ", flag));
    EXPECT_EQ(r.code, 2) << flag << ": " << r.err;
    const std::string name = std::string(flag).substr(0, std::string(flag).find('='));
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat("spatial simulate: error: ", name,
                                              " is about values, and --timing-only computes none")));
  }
  EXPECT_EQ(Spatial(absl::StrCat("simulate ", prog, " --timing-only --compare-vm=false")).code, 0);
}

// A file output that cannot be written is bad usage too, found before the run: a report, trace, picture or program
// whose directory is missing, or that names a directory, exited 1 after the whole simulation.
TEST_F(SpatialCli, UnwritableOutputFilesAreUsageErrorsBeforeTheRun) {
  std::string prog = LoweredSilu();
  const std::string missing = Path("no_such_dir") + "/x";
  for (const char* flag : {"report", "trace", "svg", "vcd"}) {
    CliRun r = Spatial(absl::StrCat("simulate ", prog, " --random-inputs=1 --", flag, "=", missing, ".out"));
    EXPECT_EQ(r.code, 2) << flag << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat("spatial simulate: error: cannot write --", flag, "=", missing,
                                              ".out: directory '", Path("no_such_dir"), "' does not exist")));
    EXPECT_EQ(r.out, "") << flag << ": the run started";
  }
  CliRun dir = Spatial(absl::StrCat("lower --target=test_tiny --op=", SiluSpec(64), " -o ", Path("")));
  EXPECT_EQ(dir.code, 2) << dir.err;
  EXPECT_THAT(dir.err, HasSubstr("spatial lower: error: cannot write -o " + Path("") + ": it is a directory"));
  CliRun cert = Spatial(absl::StrCat("certify ", prog, " -o ", missing, ".json"));
  EXPECT_EQ(cert.code, 2) << cert.err;
  EXPECT_THAT(cert.err, HasSubstr("cannot write -o " + missing + ".json: directory '"));
  // '-' is stdout, always writable.
  CliRun out = Spatial(absl::StrCat("certify ", prog, " -o - --quiet"));
  EXPECT_EQ(out.code, 0) << out.err;
}

// --passes names every pass: an empty list, or an empty name between commas, ran fewer passes than written and
// exited 0.
TEST_F(SpatialCli, OptPassListsHaveNoEmptyNames) {
  std::string prog = LoweredSilu();
  CliRun empty = Spatial(absl::StrCat("opt --passes= --no-output ", prog));
  EXPECT_EQ(empty.code, 2);
  EXPECT_THAT(empty.err, HasSubstr("spatial opt: error: --passes is empty: give NAME[,NAME...] (see --list)"));
  CliRun doubled = Spatial(absl::StrCat("opt --passes=verify,,verify --no-output ", prog));
  EXPECT_EQ(doubled.code, 2);
  EXPECT_THAT(doubled.err, HasSubstr("spatial opt: error: --passes=verify,,verify: pass 2 of 3 has no name"));
  CliRun trailing = Spatial(absl::StrCat("opt --passes=verify, --no-output ", prog));
  EXPECT_EQ(trailing.code, 2);
  EXPECT_THAT(trailing.err, HasSubstr("--passes=verify,: pass 2 of 2 has no name"));
  CliRun ok = Spatial(absl::StrCat("opt --passes=verify,verify --no-output ", prog));
  EXPECT_EQ(ok.code, 0) << ok.err;
}

// A value list longer than a file name may be (255 bytes) is values: probing it as a file must not throw
// ENAMETOOLONG out of std::filesystem (it aborted vm, simulate and model --values).
TEST_F(SpatialCli, ALongValueListIsValuesNotAFileName) {
  std::string prog = LoweredSilu();
  std::string values = "1.25";
  for (int i = 1; i < 64; ++i) values += ",1.25";
  ASSERT_GT(values.size(), 256u);
  for (const char* sub : {"vm", "simulate"}) {
    CliRun r = Spatial(absl::StrCat(sub, " ", prog, " --input=x=", values, " --quiet"));
    EXPECT_EQ(r.code, 0) << sub << ": " << r.err;
    EXPECT_THAT(r.err, Not(HasSubstr("terminate"))) << sub;
  }
}

// lower -> vm with seeded inputs -> every result written with its shape -> re-run from the saved inputs gives the
// same bytes.
// `--attention-form` forces an attention's form; it is usage error on anything else, and the fold's refusal where
// the heads are not whole tiles.
TEST_F(SpatialCli, AttentionFormForcesTheForm) {
  auto spec = [&](int hd) {
    return Write(absl::StrCat("attn", hd, ".textproto"),
                 absl::StrCat("out: \"y\" operands { name: \"q\" } operands { name: \"k\" } operands { name: \"v\" }"
                              " attention { h: 2 kv: 1 hd: ", hd, " vd: ", hd, " l: 12 rows: 1 pos { literal: 12 } }"));
  };
  const std::string whole = spec(16);
  CliRun sections = Spatial(absl::StrCat("lower --target=test_tiny --attention-form=sections --op=", whole));
  ASSERT_EQ(sections.code, 0) << sections.err;
  EXPECT_THAT(sections.out, HasSubstr("_softmax_"));
  EXPECT_THAT(sections.out, Not(HasSubstr("_flash_")));
  CliRun flash = Spatial(absl::StrCat("lower --target=test_tiny --attention-form=flash --op=", whole));
  ASSERT_EQ(flash.code, 0) << flash.err;
  EXPECT_THAT(flash.out, HasSubstr("_flash_"));
  CliRun bad = Spatial(absl::StrCat("lower --target=test_tiny --attention-form=online --op=", whole));
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--attention-form is sections, flash or auto, not 'online'"));
  const std::string silu = std::string(SPATIAL_SOURCE_DIR) + "/examples/ops/silu.textproto";
  CliRun other = Spatial(absl::StrCat("lower --target=test_tiny --attention-form=flash --op=", silu));
  EXPECT_EQ(other.code, 2);
  EXPECT_THAT(other.err, HasSubstr("--attention-form applies to an attention op;"));
  // auto is the default, so it is accepted for any op (it was a usage error).
  EXPECT_EQ(Spatial(absl::StrCat("lower --target=test_tiny --attention-form=auto --op=", silu)).code, 0);
  // The sections of a real decode's scores do not fit the accumulator: the refusal says which form maps.
  CliRun big = Spatial(absl::StrCat("lower --target=wormhole_n150 --attention-form=sections --op=", SPATIAL_SOURCE_DIR,
                                    "/examples/ops/attention.textproto"));
  EXPECT_EQ(big.code, 1);
  EXPECT_THAT(big.err, HasSubstr("AccTilesExceeded"));
  EXPECT_THAT(big.err, HasSubstr("the flash form (--attention-form=flash, or auto) streams them"));
  CliRun ragged = Spatial(absl::StrCat("lower --target=test_tiny --attention-form=flash --op=", spec(6)));
  EXPECT_EQ(ragged.code, 1);
  EXPECT_THAT(ragged.err, HasSubstr("refused: NotLowered: the flash form of an attention whose heads are not whole"));
}

TEST_F(SpatialCli, LowerRunAndReproduce) {
  std::string spec = std::string(SPATIAL_SOURCE_DIR) + "/examples/ops/silu.textproto";
  if (!fs::exists(spec)) spec = SiluSpec(100);
  std::string prog = Path("prog.textproto");
  CliRun lower = Spatial(absl::StrCat("lower --target=test_tiny --op=", spec, " -o ", prog));
  ASSERT_EQ(lower.code, 0) << lower.err;
  absl::StatusOr<Composition> c = ReadComposition(prog);
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<Tensor> results = CompositionResults(*c), inputs = CompositionInputs(*c);
  ASSERT_FALSE(results.empty());
  ASSERT_FALSE(inputs.empty());

  std::string out1 = Path("out1"), out2 = Path("out2");
  CliRun first = Spatial(absl::StrCat("vm ", prog, " --random-inputs=5 --output-dir=", out1));
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_THAT(first.out, HasSubstr(results[0].name));
  std::string given;
  for (const Tensor& t : inputs) {
    fs::path f = fs::path(out1) / "inputs" / (t.name + ".npy");
    absl::StatusOr<NpyArray> a = ReadNpy(f.string());
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->shape, (std::vector<int64_t>{t.rows, t.cols})) << t.name;
    for (double v : a->values) {  // uniform in [-2, 2), then rounded to bf16 (2 - 2^-9 rounds up to 2)
      ASSERT_GE(v, -2.0);
      ASSERT_LE(v, 2.0);
    }
    absl::StrAppend(&given, " --input ", t.name, "=", f.string());
  }
  for (const Tensor& t : results) {
    absl::StatusOr<NpyArray> a = ReadNpy((fs::path(out1) / (t.name + ".npy")).string());
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->shape, (std::vector<int64_t>{t.rows, t.cols})) << t.name;
    EXPECT_EQ(a->descr, IsInteger(t.precision) ? "<i8" : "<f8");
  }

  CliRun again = Spatial(absl::StrCat("vm ", prog, given, " --quiet --output-dir=", out2));
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_TRUE(again.out.empty()) << "--quiet printed: " << again.out;
  for (const Tensor& t : results) {
    std::string a = Slurp(fs::path(out1) / (t.name + ".npy")), b = Slurp(fs::path(out2) / (t.name + ".npy"));
    EXPECT_FALSE(a.empty());
    EXPECT_EQ(a, b) << t.name << " differs between the seeded run and its re-run";
  }
  // Same seed, same inputs; another seed, other inputs.
  CliRun same = Spatial(absl::StrCat("vm ", prog, " --random-inputs=5 --quiet --output-dir=", Path("out3")));
  CliRun other = Spatial(absl::StrCat("vm ", prog, " --random-inputs=6 --quiet --output-dir=", Path("out4")));
  ASSERT_EQ(same.code, 0);
  ASSERT_EQ(other.code, 0);
  std::string r0 = results[0].name + ".npy";
  EXPECT_EQ(Slurp(fs::path(out1) / r0), Slurp(fs::path(Path("out3")) / r0));
  EXPECT_NE(Slurp(fs::path(out1) / r0), Slurp(fs::path(Path("out4")) / r0));
}

TEST_F(SpatialCli, BinaryProgramsAndStdin) {
  std::string bin = Path("silu.binpb");
  CliRun lower = Spatial(absl::StrCat("lower --target=test_tiny --op=", SiluSpec(64), " -o ", bin));
  ASSERT_EQ(lower.code, 0) << lower.err;
  CliRun from_bin = Spatial("inspect --summary " + bin);
  EXPECT_EQ(from_bin.code, 0) << from_bin.err;
  EXPECT_THAT(from_bin.out, HasSubstr("for target test_tiny"));
  EXPECT_THAT(from_bin.out, HasSubstr("footprint:"));
  // Text on stdout, read back from stdin.
  CliRun text = Spatial(absl::StrCat("lower --target=test_tiny --op=", SiluSpec(64)));
  ASSERT_EQ(text.code, 0) << text.err;
  std::string prog = Write("piped.textproto", text.out);
  CliRun piped = Spatial("inspect -", prog);
  EXPECT_EQ(piped.code, 0) << piped.err;
  EXPECT_THAT(piped.out, HasSubstr("work items:"));
}

// Plants a fault the VM must report: the first load's origin moved far past its tensor.
TEST_F(SpatialCli, VmFaultIsAFailedRun) {
  std::string text = Slurp(LoweredSilu());
  size_t at = text.find("origin {");
  ASSERT_NE(at, std::string::npos);
  text.insert(at + 8, "\n base: 1000");
  std::string prog = Write("fault.textproto", text);
  CliRun r = Spatial("vm " + prog + " --random-inputs=1");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr(prog + ": error: TileOutOfRange: "));
}

// A program that parses but breaks the model's rules is a failed check (1), not unreadable input (2).
TEST_F(SpatialCli, InvalidProgramIsRejectedBeforeRunning) {
  std::string text = Slurp(LoweredSilu());
  size_t at = text.find("depth: ");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, text.find('\n', at) - at, "depth: 0");
  std::string prog = Write("invalid.textproto", text);
  for (const char* cmd : {"inspect ", "vm --random-inputs=1 "}) {
    CliRun r = Spatial(cmd + prog);
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_THAT(r.err, HasSubstr(prog + ": error: invalid program: ")) << cmd;
    EXPECT_THAT(r.err, HasSubstr("depth")) << cmd;
  }
}

// certify: a lowered program certifies (exit 0) and writes its certificate; the same program with a load moved
// past its tensor fails with the INDEX_OUT_OF_RANGE diagnostic (exit 1); an unreadable file is bad input (2).
TEST_F(SpatialCli, CertifyAcceptsAndRejects) {
  const std::string prog = LoweredSilu();
  CliRun ok = Spatial("certify " + prog + " -o " + Path("cert.textproto"));
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("certified on test_tiny"));
  EXPECT_THAT(Slurp(Path("cert.textproto")), HasSubstr("certified: true"));

  std::string text = Slurp(prog);
  size_t at = text.find("origin {");
  ASSERT_NE(at, std::string::npos);
  text.insert(at + 8, "\n base: 1000");
  CliRun bad = Spatial("certify " + Write("fault.textproto", text));
  EXPECT_EQ(bad.code, 1);
  EXPECT_THAT(bad.err, HasSubstr("[INDEX_OUT_OF_RANGE]"));

  CliRun missing = Spatial("certify " + Path("nope.textproto"));
  EXPECT_EQ(missing.code, 2);
}

// simulate: cycles and the comparison against the VM, results as .npy, the report proto; a VM fault is exit 1.
TEST_F(SpatialCli, SimulateReportsAndCompares) {
  const std::string prog = LoweredSilu();
  CliRun r = Spatial("simulate " + prog + " --random-inputs=1 --compare-vm --output-dir=" + Path("sim") +
                     " --report=" + Path("report.textproto") + " --trace=" + Path("trace.json"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("cycles"));
  EXPECT_TRUE(fs::exists(Path("sim/y.npy")));
  EXPECT_TRUE(fs::exists(Path("sim/inputs/x.npy")));
  EXPECT_THAT(Slurp(Path("report.textproto")), HasSubstr("total_cycles:"));
  EXPECT_THAT(Slurp(Path("trace.json")), HasSubstr("\"ph\":\"X\""));

  std::string text = Slurp(prog);
  size_t at = text.find("origin {");
  ASSERT_NE(at, std::string::npos);
  text.insert(at + 8, "\n base: 1000");
  // simulate certifies first: the out-of-range load is refused before anything runs.
  const std::string faulty = Write("fault.textproto", text);
  CliRun refused = Spatial("simulate " + faulty + " --random-inputs=1");
  EXPECT_EQ(refused.code, 1);
  EXPECT_THAT(refused.err, HasSubstr("[INDEX_OUT_OF_RANGE]"));
  EXPECT_THAT(refused.err, HasSubstr("not certified on test_tiny: not simulated (--no-certify runs it anyway)"));
  // With --no-certify it runs, warns, and the machine's VM faults on the same load.
  CliRun fault = Spatial("simulate " + faulty + " --random-inputs=1 --no-certify");
  EXPECT_EQ(fault.code, 1);
  EXPECT_THAT(fault.err, HasSubstr("warning: --no-certify"));
  EXPECT_THAT(fault.err, HasSubstr("TileOutOfRange"));
  // Timing alone computes no value, yet the machine refuses to time a load outside its tensor.
  CliRun timed = Spatial("simulate " + faulty + " --timing-only --no-certify");
  EXPECT_EQ(timed.code, 1);
  EXPECT_THAT(timed.err, HasSubstr("TileOutOfRange: section 'silu_64' item 0 stage 'load_x' (#0): tile 1000 of tensor "
                                   "'x' (8 tiles)"));
}

TEST_F(SpatialCli, DemoPasses) {
  CliRun r = Spatial("demo");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("PASS"));
  EXPECT_THAT(r.out, HasSubstr("wormhole_n150"));
  EXPECT_THAT(r.out, HasSubstr("1x3072"));
}

}  // namespace
}  // namespace spatial

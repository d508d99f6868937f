// Hostile sizes (issue "Reliability"): a spec whose sizes no program can hold, or whose products overflow int64, is
// refused with its real reason before anything is built from it (lowerings/size_budget.h). Every case here used to
// abort with std::bad_alloc after seconds at gigabytes, overflow int64 (undefined behaviour, found by UBSan), or be
// refused for the wrong reason; each now returns at once.
//
// "At once" is shown by what a lowering allocates, counted by this binary's operator new while Lower runs: a
// deterministic bound (DESIGN §11 keeps wall-clock budgets out of unit tests), far below what building one vector
// per work item of these specs would take.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lowerings/toolkit/size_budget.h"
#include "spatial/checked.h"
#include "spatial/proto_file.h"
#include "spatial/validate.h"
#include "tests/lowerings/harness.h"

namespace {

std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_bytes{0};

}  // namespace

// Counts the bytes every plain new asks for while g_counting is set (the aligned forms are not replaced, and nothing
// in a lowering uses them). Replacing the global operator new is the standard's own hook; it is shared by the whole
// test binary and costs one relaxed load when not counting.
// GCC inlines these replacements into their callers and then reports free() of a pointer from operator new
// (-Wmismatched-new-delete): here the pair is malloc/free by construction.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_bytes.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
// The nothrow forms too (std::stable_sort's temporary buffer asks for one): every plain delete frees with free().
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  if (g_counting.load(std::memory_order_relaxed)) g_bytes.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace spatial::testing {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t k2p31 = int64_t{1} << 31;
constexpr int64_t k2p40 = int64_t{1} << 40;
constexpr int64_t k2p62 = int64_t{1} << 62;
// What a refusal may allocate: the spec's copies, the messages, a few stages. Building one WorkItem per item of the
// cases below would take from 48 MiB (2^20 items) to 12 GiB (2^28).
constexpr int64_t kRefusalBytes = int64_t{4} << 20;

struct Lowered {
  absl::Status status;
  int64_t bytes = 0;
};

// Lower, counting what it allocates. The composition (if any) is destroyed after counting stops.
Lowered LowerCounted(const proto::OpSpec& spec, const Target& target, bool* validated = nullptr) {
  g_bytes.store(0);
  g_counting.store(true);
  absl::StatusOr<Composition> c = Lower(spec, target);
  g_counting.store(false);
  Lowered out{c.status(), g_bytes.load()};
  if (validated != nullptr) *validated = c.ok() && ValidateComposition(*c).ok();
  return out;
}

// The spec's status, checked to be `want` and to have allocated at most kRefusalBytes.
void ExpectStatus(const proto::OpSpec& spec, const std::string& target, const absl::Status& want) {
  SCOPED_TRACE(absl::StrCat(spec.ShortDebugString(), " on ", target));
  const Lowered l = LowerCounted(spec, Shipped(target));
  EXPECT_EQ(l.status, want);
  EXPECT_LE(l.bytes, kRefusalBytes) << "allocated " << l.bytes << " bytes to say " << l.status;
}

absl::Status Refused(const std::string& message) { return absl::UnimplementedError("NotLowered: " + message); }
absl::Status Malformed(const std::string& message) { return absl::InvalidArgumentError(message); }

// The shipped example of `kind` (examples/ops), the base every hostile spec below edits.
proto::OpSpec Example(const std::string& kind) {
  proto::OpSpec spec;
  const std::string path = absl::StrCat(SPATIAL_SOURCE_DIR, "/examples/ops/", kind, ".textproto");
  absl::Status read = ReadProtoFile(path, &spec);
  EXPECT_TRUE(read.ok()) << read;
  return spec;
}

proto::OpSpec Silu(int64_t n) {
  proto::OpSpec s = Spec({"x"});
  s.mutable_silu()->set_n(n);
  return s;
}

proto::OpSpec Matmul(int64_t m, int64_t k, int64_t n) {
  proto::OpSpec s = Spec({"a", "b"});
  s.mutable_matmul()->set_m(m);
  s.mutable_matmul()->set_k(k);
  s.mutable_matmul()->set_n(n);
  return s;
}

// ── The findings ──

// silu n = 2^31 fits a tensor (2^32) but is 2^26 one-tile items on Wormhole: refused before one item is built.
TEST(HostileSizesTest, SiluOf2To31IsRefusedForItsWorkItems) {
  ExpectStatus(Silu(k2p31), "wormhole_n150",
               Refused("silu n = 2147483648 needs 67108864 work items, more than the 1048576 a section holds"));
  ExpectStatus(Silu(k2p31), "test_tiny",
               Refused("silu n = 2147483648 needs 268435456 work items, more than the 1048576 a section holds"));
  // The same n as a matrix: one item per tile of the grid.
  proto::OpSpec matrix = Silu(k2p31);
  matrix.set_shape_rows(32768);
  matrix.set_shape_cols(65536);
  ExpectStatus(matrix, "wormhole_n150",
               Refused("silu of 32768 x 65536 needs 2097152 work items, more than the 1048576 a section holds"));
}

TEST(HostileSizesTest, MatmulOf2To40IsMalformed) {
  ExpectStatus(Matmul(k2p40, k2p40, k2p40), "wormhole_n150",
               Malformed("matmul: m x k = 1099511627776 x 1099511627776 elements (operand a) overflow int64, more "
                         "than the 4294967296 a tensor holds"));
  ExpectStatus(Matmul(32, k2p40, 32), "wormhole_n150",
               Malformed("matmul: m x k = 32 x 1099511627776 = 35184372088832 elements (operand a) exceed the "
                         "4294967296 a tensor holds"));
  ExpectStatus(Matmul(32, 32, k2p40), "test_tiny",
               Malformed("matmul: k x n = 32 x 1099511627776 = 35184372088832 elements (operand b) exceed the "
                         "4294967296 a tensor holds"));
  // Every tensor fits, but C's tile counts are primes (1031 x 1021 tiles of 8) and a row of 1021 fp32 tiles
  // does not fit test_tiny's memory: the only blocks are single tiles, 1052651 items.
  ExpectStatus(Matmul(8248, 8, 8168), "test_tiny",
               Refused("matmul m x k x n = 8248 x 8 x 8168 needs 1052651 work items, more than the 1048576 a "
                       "section holds"));
}

TEST(HostileSizesTest, AttentionOf2To31HeadsIsMalformed) {
  proto::OpSpec spec = Example("attention");  // Qwen3-8B decode: kv 8, hd 128, l 4096, one row
  spec.mutable_attention()->set_h(k2p31);
  ExpectStatus(spec, "wormhole_n150",
               Malformed("attention: rows x h x hd = 1 x 2147483648 x 128 = 274877906944 elements (operand q) exceed "
                         "the 4294967296 a tensor holds"));
  // Heads that fit their tensors, but which the three-section form (heads not whole tiles) unrolls one band each.
  proto::OpSpec narrow = spec;
  narrow.mutable_attention()->set_h(1 << 20);
  narrow.mutable_attention()->set_kv(1);
  narrow.mutable_attention()->set_hd(12);
  narrow.mutable_attention()->set_vd(12);
  ExpectStatus(narrow, "wormhole_n150",
               Refused("a three-section attention of 1048576 query heads needs 1048576 bands, more than the 1024 a "
                       "lowering unrolls"));
  // The cache's product (the flash fold formed g.rows * kv * hd unchecked).
  proto::OpSpec cache = Example("attention");
  cache.mutable_attention()->set_l(k2p62);
  ExpectStatus(cache, "wormhole_n150",
               Malformed("attention: l x kv x hd = 4611686018427387904 x 8 x 128 elements (operand k) overflow "
                         "int64, more than the 4294967296 a tensor holds"));
}

TEST(HostileSizesTest, FusedRowPastInt64IsMalformed) {
  proto::OpSpec spec = Example("fused_row");
  spec.mutable_fused_row()->set_rows(3037000500);
  spec.mutable_fused_row()->set_cols(3037000500);
  ExpectStatus(spec, "wormhole_n150",
               Malformed("fused_row: rows x cols = 3037000500 x 3037000500 elements (operand x) overflow int64, more "
                         "than the 4294967296 a tensor holds"));
  // 3037000499^2 fits int64 (it is just below 2^63), and is still no tensor.
  spec.mutable_fused_row()->set_rows(3037000499);
  spec.mutable_fused_row()->set_cols(3037000499);
  ExpectStatus(spec, "test_tiny",
               Malformed("fused_row: rows x cols = 3037000499 x 3037000499 = 9223372030926249001 elements (operand "
                         "x) exceed the 4294967296 a tensor holds"));
}

// The overflowing products UBSan reported, each at a size that reaches it, now refused for what they are (the
// transpose's wrapped to zero and was refused as "a transpose of an empty tensor").
TEST(HostileSizesTest, OverflowingProductsSayWhatOverflowed) {
  proto::OpSpec transpose = Spec({"x"});
  transpose.mutable_transpose()->set_rows(int64_t{1} << 32);
  transpose.mutable_transpose()->set_cols(int64_t{1} << 32);
  ExpectStatus(transpose, "test_tiny",
               Malformed("transpose: rows x cols = 4294967296 x 4294967296 elements (operand x) overflow int64, more "
                         "than the 4294967296 a tensor holds"));
  proto::OpSpec head_matmul = Spec({"x", "w"});
  head_matmul.mutable_head_matmul()->set_m(int64_t{1} << 32);
  head_matmul.mutable_head_matmul()->set_heads(int64_t{1} << 32);
  head_matmul.mutable_head_matmul()->set_a(1);
  head_matmul.mutable_head_matmul()->set_b(1);
  ExpectStatus(head_matmul, "test_tiny",
               Malformed("head_matmul: m x heads x a = 4294967296 x 4294967296 x 1 elements (operand x) overflow "
                         "int64, more than the 4294967296 a tensor holds"));
  // The pointwise shape's product (common.cc's PointwiseShape formed rows * cols unchecked).
  proto::OpSpec shape = Silu(16);
  shape.set_shape_rows(int64_t{1} << 32);
  shape.set_shape_cols(int64_t{1} << 32);
  ExpectStatus(shape, "test_tiny",
               Malformed("silu spec's shape_rows x shape_cols = 4294967296 x 4294967296 = more elements than int64 "
                         "counts disagrees with silu.n = 16"));
  // n near INT64_MAX (the tile count's ceil-divide, spatial/maps.h CeilDiv, overflowed on it).
  ExpectStatus(Silu(kMax), "wormhole_n150",
               Malformed("silu: n = 9223372036854775807 elements (operand x) exceed the 4294967296 a tensor holds"));
}

// A program shape that does not hold the op's n is refused naming both, never silently replaced by 1 x n.
TEST(HostileSizesTest, ShapeDisagreeingWithNIsMalformed) {
  proto::OpSpec spec = Silu(16);
  spec.set_shape_rows(2);
  spec.set_shape_cols(4);
  ExpectStatus(spec, "test_tiny",
               Malformed("silu spec's shape_rows x shape_cols = 2 x 4 = 8 elements disagrees with silu.n = 16"));
  EXPECT_EQ(ReferenceOp(spec, TensorMap{}).status(),
            Malformed("silu spec's shape_rows x shape_cols = 2 x 4 = 8 elements disagrees with silu.n = 16"));
  // Half a shape is no shape.
  spec.set_shape_cols(0);
  ExpectStatus(spec, "wormhole_n150",
               Malformed("silu spec's shape_rows x shape_cols = 2 x 0 = 0 elements disagrees with silu.n = 16"));
  // Every pointwise kind reads it the same way.
  proto::OpSpec relu = Spec({"x"});
  relu.mutable_relu()->set_n(12);
  relu.set_shape_rows(5);
  relu.set_shape_cols(3);
  ExpectStatus(relu, "test_tiny",
               Malformed("relu spec's shape_rows x shape_cols = 5 x 3 = 15 elements disagrees with relu.n = 12"));
  // A shape that holds n is the program's shape; 1 x n is the flat row.
  spec.set_shape_rows(4);
  spec.set_shape_cols(4);
  absl::StatusOr<Composition> c = Lower(spec, Shipped("test_tiny"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sections[0].name, "silu_4x4");
  spec.set_shape_rows(1);
  spec.set_shape_cols(16);
  c = Lower(spec, Shipped("test_tiny"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sections[0].name, "silu_16");
  // A kind with its own sizes takes no program shape.
  proto::OpSpec mm = Matmul(4, 4, 4);
  mm.set_shape_rows(2);
  mm.set_shape_cols(4);
  ExpectStatus(mm, "test_tiny",
               Malformed("shape_rows x shape_cols = 2 x 4 is the program shape of a pointwise op; a matmul spec takes "
                         "its sizes from its own fields"));
}

// ── More kinds, more limits ──

TEST(HostileSizesTest, BudgetsOfOtherKinds) {
  // A known fill is materialized into the program: past 2^24 values it is refused (the operand is a run-time input).
  proto::OpSpec relu = Spec({"x"});
  relu.mutable_relu()->set_int_(true);
  relu.mutable_relu()->set_n(int64_t{1} << 25);
  relu.mutable_operands(0)->mutable_fill()->set_const_i(3);
  ExpectStatus(relu, "wormhole_n150",
               Refused("a known fill of 33554432 values, more than the 16777216 a program embeds (an operand this "
                       "large is a run-time input)"));
  // A LUT attention unrolls every head in each of its sections.
  proto::OpSpec lut = Example("lut_attention");
  lut.mutable_lut_attention()->set_h(1 << 20);
  lut.mutable_lut_attention()->set_kv(1);
  ExpectStatus(lut, "wormhole_n150",
               Refused("a LUT attention of 1048576 query heads needs 1048576 unrolled heads, more than the 1024 a "
                       "lowering unrolls"));
  // A chunked gated delta: about a dozen sections per chunk of a tile's rows.
  proto::OpSpec gdn = Example("gated_delta");
  gdn.mutable_gated_delta()->set_rows(1 << 20);
  ExpectStatus(gdn, "wormhole_n150",
               Refused("a chunked gated delta of 1048576 rows needs 32768 chunks, more than the 1024 a lowering "
                       "unrolls"));
  // A transpose is one band per column.
  proto::OpSpec transpose = Spec({"x"});
  transpose.mutable_transpose()->set_rows(2);
  transpose.mutable_transpose()->set_cols(1 << 20);
  ExpectStatus(transpose, "wormhole_n150",
               Refused("a transpose of 2 x 1048576 needs 1048576 bands, more than the 1024 a lowering unrolls"));
  // A LUT attention's index shift past 62 has no integer meaning (it used to lower to a program no reader takes).
  proto::OpSpec shift = Example("lut_attention");
  shift.mutable_lut_attention()->set_s(64);
  ExpectStatus(shift, "test_tiny", Refused("a LUT attention index shift outside [0, 62] (64)"));
}

TEST(HostileSizesTest, NegativeSizesAreMalformed) {
  ExpectStatus(Silu(-3), "test_tiny", Malformed("silu.n is negative (-3)"));
  ExpectStatus(Silu(kMin), "test_tiny", Malformed("silu.n is negative (-9223372036854775808)"));
  ExpectStatus(Matmul(4, -1, k2p62), "test_tiny", Malformed("matmul.k is negative (-1)"));
  proto::OpSpec shape = Silu(16);
  shape.set_shape_rows(-1);
  shape.set_shape_cols(-16);
  ExpectStatus(shape, "test_tiny", Malformed("silu spec has a negative shape (-1 x -16)"));
  proto::OpSpec attention = Example("attention");
  attention.mutable_attention()->set_h(-1);
  ExpectStatus(attention, "wormhole_n150", Malformed("attention.h is negative (-1)"));
  proto::OpSpec row = Example("fused_row");
  row.mutable_fused_row()->set_rows(-1);
  row.mutable_fused_row()->set_cols(kMax);
  ExpectStatus(row, "wormhole_n150", Malformed("fused_row.rows is negative (-1)"));
  proto::OpSpec transpose = Spec({"x"});
  transpose.mutable_transpose()->set_rows(-1);
  transpose.mutable_transpose()->set_cols(4);
  ExpectStatus(transpose, "test_tiny", Malformed("transpose has a negative shape (-1 x 4)"));
}

// Every lowered kind (its shipped example) with each of its integer fields set to a hostile value, on both shipped
// targets: either a program the validator accepts, or an InvalidArgument or a refusal — never an abort, an
// overflow, or a vector sized from the value. Under the sanitizer build this is the UBSan check of every size path.
TEST(HostileSizesTest, EveryKindAtHostileSizes) {
  const std::filesystem::path dir = std::filesystem::path(SPATIAL_SOURCE_DIR) / "examples" / "ops";
  int lowered = 0;
  int refused = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".textproto") continue;
    const proto::OpSpec base = Example(entry.path().stem().string());
    const std::string kind = OpKindName(base);
    const auto* kind_field = proto::OpSpec::descriptor()->FindFieldByName(kind);
    ASSERT_NE(kind_field, nullptr) << kind;
    const auto* message = kind_field->message_type();
    for (int i = 0; i < message->field_count(); ++i) {
      const auto* field = message->field(i);
      if (field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_INT64) continue;
      for (int64_t v : {kMax, k2p62, k2p40, k2p31, int64_t{-1}, kMin}) {
        for (const char* target : {"test_tiny", "wormhole_n150"}) {
          proto::OpSpec spec = base;
          google::protobuf::Message* m = spec.GetReflection()->MutableMessage(&spec, kind_field);
          m->GetReflection()->SetInt64(m, field, v);
          SCOPED_TRACE(absl::StrCat(kind, ".", field->name(), " = ", v, " on ", target));
          bool valid = false;
          const Lowered l = LowerCounted(spec, Shipped(target), &valid);
          if (l.status.ok()) {
            ++lowered;
            EXPECT_TRUE(valid) << "lowered to a program the validator refuses";
            // Lowering at these values is of a small op (a clamp bound, a literal position): a small program.
            EXPECT_LE(l.bytes, int64_t{64} << 20);
            continue;
          }
          ++refused;
          EXPECT_TRUE(IsRefusal(l.status) || l.status.code() == absl::StatusCode::kInvalidArgument) << l.status;
          EXPECT_LE(l.bytes, kRefusalBytes) << "allocated " << l.bytes << " bytes to say " << l.status;
        }
      }
    }
  }
  EXPECT_GT(refused, 500);
  EXPECT_GT(lowered, 0);
}

// The same for the literal positions and windows inside a kind (a RowIndex literal, a Window span): the sums a
// lowering forms from them (P + rows - 1 against the cache) must not overflow either.
TEST(HostileSizesTest, EveryPositionAndWindowAtHostileValues) {
  const std::filesystem::path dir = std::filesystem::path(SPATIAL_SOURCE_DIR) / "examples" / "ops";
  int cases = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".textproto") continue;
    const proto::OpSpec base = Example(entry.path().stem().string());
    const std::string kind = OpKindName(base);
    const auto* kind_field = proto::OpSpec::descriptor()->FindFieldByName(kind);
    const auto* message = kind_field->message_type();
    for (int i = 0; i < message->field_count(); ++i) {
      const auto* field = message->field(i);
      if (field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
      const std::string type = field->message_type()->name();
      if (type != "RowIndex" && type != "Window") continue;
      for (const char* sub : {"literal", "sliding", "chunked"}) {
        const auto* value_field = field->message_type()->FindFieldByName(sub);
        if (value_field == nullptr) continue;
        for (int64_t v : {kMax, k2p62, k2p40, int64_t{0}, int64_t{-1}, kMin}) {
          for (const char* target : {"test_tiny", "wormhole_n150"}) {
            proto::OpSpec spec = base;
            google::protobuf::Message* m = spec.GetReflection()->MutableMessage(&spec, kind_field);
            google::protobuf::Message* index = m->GetReflection()->MutableMessage(m, field);
            // A named position is an operand: a literal one takes none.
            if (type == "RowIndex") {
              const auto* named = field->message_type()->FindFieldByName("named");
              const std::string was = index->GetReflection()->GetString(*index, named);
              if (!was.empty()) {
                proto::OpSpec pruned = spec;
                pruned.clear_operands();
                for (const proto::Operand& o : spec.operands()) {
                  if (o.name() != was) *pruned.add_operands() = o;
                }
                spec = pruned;
                m = spec.GetReflection()->MutableMessage(&spec, kind_field);
                index = m->GetReflection()->MutableMessage(m, field);
              }
            }
            index->GetReflection()->SetInt64(index, value_field, v);
            SCOPED_TRACE(absl::StrCat(kind, ".", field->name(), ".", sub, " = ", v, " on ", target));
            ++cases;
            bool valid = false;
            const Lowered l = LowerCounted(spec, Shipped(target), &valid);
            if (l.status.ok()) {
              EXPECT_TRUE(valid) << "lowered to a program the validator refuses";
              continue;
            }
            EXPECT_TRUE(IsRefusal(l.status) || l.status.code() == absl::StatusCode::kInvalidArgument) << l.status;
            EXPECT_LE(l.bytes, kRefusalBytes) << "allocated " << l.bytes << " bytes to say " << l.status;
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 50);
}

// The helpers themselves.
TEST(HostileSizesTest, CheckedArithmetic) {
  EXPECT_EQ(CheckedMul(int64_t{3037000499}, int64_t{3037000499}), int64_t{9223372030926249001});
  EXPECT_EQ(CheckedMul(int64_t{3037000500}, int64_t{3037000500}), std::nullopt);
  EXPECT_EQ(CheckedMul(kMin, int64_t{-1}), std::nullopt);
  EXPECT_EQ(CheckedAdd(kMax, int64_t{1}), std::nullopt);
  EXPECT_EQ(CheckedAdd(kMax, int64_t{-1}), kMax - 1);
  EXPECT_EQ(CheckedSub(kMin, int64_t{1}), std::nullopt);
  EXPECT_EQ(CheckedProduct({}), 1);
  EXPECT_EQ(CheckedProduct({int64_t{1} << 32, int64_t{1} << 31}), std::nullopt);
  EXPECT_EQ(CheckedCeilDiv(kMax, 32), (kMax >> 5) + 1);
  EXPECT_EQ(CheckedCeilDiv(64, 32), 2);
  EXPECT_EQ(CheckedCeilDiv(0, 32), 0);
  EXPECT_EQ(CheckedCeilDiv(-1, 32), std::nullopt);
  EXPECT_EQ(CheckedCeilDiv(5, 0), std::nullopt);
  EXPECT_EQ(CheckedMul(std::optional<int64_t>(), int64_t{0}), std::nullopt);
  EXPECT_EQ(WorkItemBudget("x", kMaxWorkItems), absl::OkStatus());
  EXPECT_EQ(WorkItemBudget("x", kMaxWorkItems + 1),
            Refused("x needs 1048577 work items, more than the 1048576 a section holds"));
  EXPECT_EQ(WorkItemBudget("x", std::nullopt),
            Refused("x needs more work items than the 1048576 a section holds"));
  EXPECT_EQ(UnrollBudget("x", "bands", kMaxUnrolled), absl::OkStatus());
  EXPECT_EQ(TableBudget("x", kMaxFillValues + 1),
            Refused("x needs a compile-time table of 16777217 values, more than the 16777216 a program embeds"));
  EXPECT_EQ(*CheckedElements("t", int64_t{1} << 16, int64_t{1} << 16), int64_t{1} << 32);
  EXPECT_EQ(CheckedElements("t", int64_t{1} << 16, (int64_t{1} << 16) + 1).status(),
            Malformed("t: 65536 x 65537 = 4295032832 elements (a tensor) exceed the 4294967296 a tensor holds"));
}

}  // namespace
}  // namespace spatial::testing

// The model layer (issue #15): config.json read with its refusals by message, the decode plan's ops in order, the
// layer lowered, composed and certified at a real model's size, and at a small size run on the f64 VM against a
// plain-loop Qwen3 reference (qwen3_reference.h) that shares no code with the lowerings.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "certify/certify.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/layer.h"
#include "models/model_config.h"
#include "sim/vm/vm.h"
#include "spatial/tensor_data.h"
#include "targets/loader.h"
#include "tests/models/qwen3_reference.h"

namespace spatial {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A config.json in the test's temporary directory.
std::string WriteConfig(const std::string& name, const std::string& body) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/", name, ".json");
  std::ofstream(path) << body;
  return path;
}

// A small Qwen3 (hidden 32, 4 query heads of 16 over 2 K/V heads, MLP 48) with `extra` fields before the brace.
std::string Qwen3Json(const std::string& extra, const std::string& arch = "Qwen3ForCausalLM") {
  return absl::StrCat(R"({"architectures": [")", arch, R"("], "model_type": "qwen3", "hidden_size": 32,
    "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 10000,
    "hidden_act": "silu", "rope_scaling": null, "torch_dtype": "bfloat16")",
                      extra, "}");
}

const Target& Wormhole() {
  static const Target t = *LoadTarget("wormhole_n150");
  return t;
}

absl::Status ReadError(const std::string& name, const std::string& body) {
  return ReadModelConfig(WriteConfig(name, body)).status();
}

TEST(ModelConfig, ReadsTheShippedExamples) {
  EXPECT_THAT(ExampleModelNames(), ::testing::IsSupersetOf({"qwen3-0.6b", "qwen3-8b"}));
  absl::StatusOr<ModelConfig> c = ReadModelConfig("qwen3-8b");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(c->hidden, 4096);
  EXPECT_EQ(c->intermediate, 12288);
  EXPECT_EQ(c->layers, 36);
  EXPECT_EQ(c->heads, 32);
  EXPECT_EQ(c->kv_heads, 8);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->rope_theta, 1000000);
  absl::StatusOr<ModelConfig> small = ReadModelConfig("qwen3-0.6b");
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->hidden, 1024);
  EXPECT_EQ(small->heads, 16);
}

TEST(ModelConfig, RefusalsNameTheFileAndTheField) {
  absl::Status missing = ReadModelConfig("no-such-model").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.message(), HasSubstr("no-such-model: error: no such config file or example model"));
  EXPECT_THAT(missing.message(), HasSubstr("qwen3-0.6b"));

  absl::Status json = ReadError("bad_json", "{\"hidden_size\": ");
  EXPECT_EQ(json.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(json.message(), HasSubstr("bad_json.json: error: not a model config.json"));

  absl::Status arch = ReadError("llama", Qwen3Json("", "LlamaForCausalLM"));
  EXPECT_THAT(arch.message(), HasSubstr("NotLowered"));
  EXPECT_THAT(arch.message(), HasSubstr("architecture 'LlamaForCausalLM' (model_type 'qwen3') is not recognized; "
                                        "recognized: Qwen3ForCausalLM"));

  absl::Status bias = ReadError("bias", Qwen3Json(R"(, "attention_bias": true)"));
  EXPECT_THAT(bias.message(), HasSubstr("attention_bias: projections with a bias are not recognized yet"));

  absl::Status act = ReadError("gelu", Qwen3Json("").replace(Qwen3Json("").find("silu"), 4, "gelu"));
  EXPECT_THAT(act.message(), HasSubstr("hidden_act 'gelu' (only silu's SwiGLU is recognized)"));

  std::string no_width = Qwen3Json("");
  no_width.replace(no_width.find("\"hidden_size\": 32,"), 18, "");
  absl::Status width = ReadError("no_width", no_width);
  EXPECT_EQ(width.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(width.message(), HasSubstr("no_width.json: error: 'hidden_size' must be positive, got 0"));

  std::string odd = Qwen3Json("");
  odd.replace(odd.find("\"num_key_value_heads\": 2"), 24, "\"num_key_value_heads\": 3");
  EXPECT_THAT(ReadError("odd_heads", odd).message(),
              HasSubstr("num_attention_heads 4 does not divide among num_key_value_heads 3"));
}

TEST(DecodeLayerPlan, TheOpsOfAQwen3LayerInOrder) {
  absl::StatusOr<ModelConfig> c = ReadModelConfig("qwen3-0.6b");
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<LayerPlan> p = DecodeLayerPlan(*c, 3, DecodePhase{100, 256}, Wormhole());
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<std::string> labels;
  for (const LayerOp& op : p->ops) labels.push_back(op.label);
  EXPECT_THAT(labels, ElementsAre("attn_norm", "q_proj", "k_proj", "v_proj", "q_norm", "k_norm", "q_rope", "k_rope",
                                  "k_cache_write", "v_cache_write", "attention", "o_proj", "attn_residual",
                                  "mlp_norm", "gate_proj", "up_proj", "silu", "swiglu_mul", "down_proj",
                                  "mlp_residual"));
  EXPECT_THAT(p->state, ElementsAre("k_cache", "v_cache"));
  EXPECT_EQ(p->ops.back().spec.out(), "x_out");
  EXPECT_EQ(p->ops[10].spec.attention().l(), 256);
  EXPECT_EQ(p->ops[10].spec.attention().kv(), 8);
  EXPECT_EQ(p->ops[1].spec.matmul().n(), 16 * 128);
}

TEST(DecodeLayerPlan, RefusesPhasesOutsideTheModel) {
  absl::StatusOr<ModelConfig> c = ReadModelConfig("qwen3-0.6b");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(DecodeLayerPlan(*c, 28, DecodePhase{1, 8}, Wormhole()).status().message(),
              HasSubstr("layer 28 is outside the model's 28 layers (0..27)"));
  EXPECT_THAT(DecodeLayerPlan(*c, 0, DecodePhase{9, 8}, Wormhole()).status().message(),
              HasSubstr("decode position 9 is outside the cache's rows 1..8"));
  EXPECT_THAT(DecodeLayerPlan(*c, 0, DecodePhase{0, 8}, Wormhole()).status().message(),
              HasSubstr("decode position 0 is outside the cache's rows 1..8"));
  EXPECT_THAT(DecodeLayerPlan(*c, 0, DecodePhase{1, 40961}, Wormhole()).status().message(),
              HasSubstr("a cache of 40961 rows: it must be 1..40960 (max_position_embeddings)"));
}

TEST(LowerLayer, Qwen3At4096ComposesAndCertifiesOnWormhole) {
  absl::StatusOr<ModelConfig> c = ReadModelConfig("qwen3-0.6b");
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<Target> target = LoadTarget("wormhole_n150");
  ASSERT_TRUE(target.ok()) << target.status();
  absl::StatusOr<LayerPlan> p = DecodeLayerPlan(*c, 0, DecodePhase{4096, 4096}, Wormhole());
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<LoweredLayer> l = LowerLayer(*p, *target);
  ASSERT_TRUE(l.ok()) << l.status();
  // The ops' sections tile the program in order, none empty.
  ASSERT_EQ(l->op_sections.size(), p->ops.size());
  int next = 0;
  for (const auto& [first, end] : l->op_sections) {
    EXPECT_EQ(first, next);
    EXPECT_GT(end, first);
    next = end;
  }
  EXPECT_EQ(next, static_cast<int>(l->program.sections.size()));
  CertifyResult cert = Certify(l->program, *target);
  for (const proto::Diagnostic& d : cert.diagnostics) ADD_FAILURE() << FormatDiagnostic(d, l->program.name);
}

// Inputs for the small layer: weights at the model's init scale around their Linear fan-in, norm weights near 1,
// caches and x of magnitude one, the exact angle tables for theta, the position.
class SmallLayer : public ::testing::TestWithParam<std::string> {};

TEST_P(SmallLayer, VmMatchesThePlainLoopReferenceAtF64Rounding) {
  absl::StatusOr<ModelConfig> c = ReadModelConfig(WriteConfig("small_qwen3", Qwen3Json("")));
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<Target> target = LoadTarget(GetParam());
  ASSERT_TRUE(target.ok()) << target.status();
  // Heads of 16: whole 8 x 8 tiles on test_tiny (the caches dense, the flash form), narrower than wormhole's 32
  // (the caches flat rows) -- both layouts of the cache writes.
  const int64_t cache = 20, half = c->head_dim / 2;
  for (int64_t position : {1, 7, 20}) {
    SCOPED_TRACE(absl::StrCat("position ", position, " on ", GetParam()));
    absl::StatusOr<LayerPlan> p = DecodeLayerPlan(*c, 1, DecodePhase{position, cache}, *target);
    ASSERT_TRUE(p.ok()) << p.status();
    absl::StatusOr<LoweredLayer> l = LowerLayer(*p, *target);
    ASSERT_TRUE(l.ok()) << l.status();
    CertifyResult cert = Certify(l->program, *target);
    for (const proto::Diagnostic& d : cert.diagnostics) ADD_FAILURE() << FormatDiagnostic(d, l->program.name);
    uint64_t state = 12345 + position;
    auto uniform = [&state](double lo, double hi) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      return lo + (hi - lo) * static_cast<double>(state >> 11) * 0x1.0p-53;
    };
    TensorMap inputs;
    for (const Tensor& t : CompositionInputs(l->program)) {
      TensorData d{t.rows, t.cols, t.precision, std::vector<double>(t.rows * t.cols)};
      const int64_t n = t.rows * t.cols;
      if (t.name == "pos") {
        d.values[0] = static_cast<double>(position);
      } else if (t.name == "rope_cos" || t.name == "rope_sin") {
        for (int64_t e = 0; e < n; ++e) {
          const double angle = static_cast<double>(e / half) * std::pow(c->rope_theta, -double(e % half) / half);
          d.values[e] = t.name == "rope_cos" ? std::cos(angle) : std::sin(angle);
        }
      } else if (absl::EndsWith(t.name, "norm_w")) {
        for (double& v : d.values) v = uniform(0.8, 1.2);
      } else if (t.name[0] == 'w') {
        const double bound = 1.0 / std::sqrt(static_cast<double>(t.rows));
        for (double& v : d.values) v = uniform(-bound, bound);
      } else {
        for (double& v : d.values) v = uniform(-1, 1);
      }
      inputs[t.name] = std::move(d);
    }
    absl::StatusOr<TensorMap> vm = RunComposition(l->program, target->tile_rows(), target->tile_cols(), inputs);
    ASSERT_TRUE(vm.ok()) << vm.status();
    auto in = [&](const char* name) { return inputs.at(name).values; };
    testing::Qwen3Weights w{in("attn_norm_w"), in("wq"),     in("wk"),         in("wv"),
                            in("q_norm_w"),    in("k_norm_w"), in("wo"),       in("mlp_norm_w"),
                            in("w_gate"),      in("w_up"),   in("w_down")};
    testing::Qwen3Step want =
        testing::Qwen3DecodeStep(*c, w, in("x"), in("k_cache"), in("v_cache"), position);
    auto expect_near = [&](const char* name, const std::vector<double>& ref) {
      ASSERT_TRUE(vm->count(name)) << "the VM produced no '" << name << "'";
      const std::vector<double>& got = vm->at(name).values;
      ASSERT_EQ(got.size(), ref.size()) << name;
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, std::fabs(got[i] - ref[i]) / std::max(std::fabs(ref[i]), 1.0));
      }
      EXPECT_LE(worst, 1e-12) << name;
    };
    expect_near("x_out", want.x_out);
    expect_near("k_cache", want.k_cache);
    expect_near("v_cache", want.v_cache);
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, SmallLayer, ::testing::Values("test_tiny", "wormhole_n150"));

}  // namespace
}  // namespace spatial

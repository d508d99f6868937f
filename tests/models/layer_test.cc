// The model layer (issue #15): config.json read with its refusals by message, the decode plan's ops in order, the
// layer lowered, composed and certified at a real model's size, and at a small size run on the f64 VM against a
// plain-loop decoder reference (decoder_reference.h) that shares no code with the lowerings.
#include <cmath>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "certify/certify.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/decode_token.h"
#include "models/layer.h"
#include "models/model_config.h"
#include "sim/numerics/target_model.h"
#include "sim/simulate.h"
#include "sim/vm/vm.h"
#include "spatial/tensor_data.h"
#include "targets/loader.h"
#include "tests/models/decoder_reference.h"

namespace spatial {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A config.json in the temporary directory, its file named after the test too: ctest runs the tests in parallel
// processes, and two that wrote one path would read each other's half-written file.
std::string WriteConfig(const std::string& name, const std::string& body) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info ? absl::StrCat(info->test_suite_name(), "_", info->name()) : "none";
  for (char& ch : test) {
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  const std::string path = absl::StrCat(::testing::TempDir(), "/", test, "_", name, ".json");
  std::ofstream(path) << body;
  return path;
}

// A small Qwen3 (hidden 32, 4 query heads of 16 over 2 K/V heads, MLP 48) with `extra` fields before the brace.
std::string Qwen3Json(const std::string& extra, const std::string& arch = "Qwen3ForCausalLM") {
  return absl::StrCat(R"({"architectures": [")", arch, R"("], "model_type": "qwen3", "hidden_size": 32,
    "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 10000,
    "hidden_act": "silu", "rope_scaling": null, "torch_dtype": "bfloat16", "vocab_size": 256)",
                      extra, "}");
}

// The small models of the VM check: each architecture's layer at hidden 32, heads of 16.
std::string SmallModel(const std::string& kind) {
  if (kind == "llama") {
    // Llama 3.1's scaled RoPE, its bands squeezed to the small head: the tables carry the scaled angles.
    return absl::StrReplaceAll(Qwen3Json(R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
      "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64})",
                                         "LlamaForCausalLM"),
                               {{R"("rope_scaling": null, )", ""}});
  }
  if (kind == "gpt_oss") {
    // Biased projections, sinks, layer 0 sliding over 5 positions and layer 1 full, the biased mixture of 32 experts
    // of 32 (top 3; whole tiles, so a prefill takes the dense form on wormhole too) with the clamped SwiGLU, yarn's
    // RoPE squeezed to the small head.
    return absl::StrReplaceAll(
        Qwen3Json(R"(, "attention_bias": true, "num_local_experts": 32, "num_experts_per_tok": 3,
      "swiglu_limit": 7.0, "sliding_window": 5, "layer_types": ["sliding_attention", "full_attention"],
      "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "beta_fast": 32.0, "beta_slow": 1.0,
      "original_max_position_embeddings": 64, "truncate": false})",
                  "GptOssForCausalLM"),
        {{R"("rope_scaling": null, )", ""}, {R"("intermediate_size": 48)", R"("intermediate_size": 32)"}});
  }
  if (kind == "deepseek") {
    // Latent attention (q rank 16; 32 heads, a latent, nope and values of 32 and a rope part of 64: the MLA op
    // wants whole tiles and heads in whole tile rows, wormhole's RoPE a rotated half of whole tiles), layer 0
    // dense, layer 1 the sigmoid mixture of 32 experts of 32 in 4 groups (2 kept), top 2 renormalized times 2.5, a
    // shared expert; yarn with DeepSeek's mscale terms.
    return absl::StrReplaceAll(
        Qwen3Json(R"(, "q_lora_rank": 16, "kv_lora_rank": 32, "qk_nope_head_dim": 32, "qk_rope_head_dim": 64,
      "v_head_dim": 32, "n_routed_experts": 32, "num_experts_per_tok": 2, "n_group": 4, "topk_group": 2,
      "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "norm_topk_prob": true, "n_shared_experts": 1,
      "moe_intermediate_size": 32, "first_k_dense_replace": 1, "moe_layer_freq": 1,
      "rope_scaling": {"type": "yarn", "factor": 8.0, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0,
      "mscale_all_dim": 0.7, "original_max_position_embeddings": 64})",
                  "DeepseekV3ForCausalLM"),
        {{R"("rope_scaling": null, )", ""},
         {R"("num_attention_heads": 4, "num_key_value_heads": 2)",
          R"("num_attention_heads": 32, "num_key_value_heads": 32)"}});
  }
  if (kind == "qwen3_next") {
    // Layer 0 a Gated DeltaNet (2 key heads, 4 value heads, 16 wide, a conv of 4 taps), layer 1 the gated attention
    // with RoPE over half of each head; both the mixture of 32 experts of 32 (top 3) and its gated shared expert of
    // 16.
    return Qwen3Json(R"(, "num_experts": 32, "num_experts_per_tok": 3, "moe_intermediate_size": 32,
      "norm_topk_prob": true, "decoder_sparse_step": 1, "shared_expert_intermediate_size": 16,
      "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
      "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4, "partial_rotary_factor": 0.5,
      "layer_types": ["linear_attention", "full_attention"])",
                     "Qwen3NextForCausalLM");
  }
  if (kind == "qwen3_moe") {
    // Layer 0 kept dense (mlp_only_layers), layer 1 the mixture: 32 experts of 32, the top 3 renormalized.
    return Qwen3Json(R"(, "num_experts": 32, "num_experts_per_tok": 3, "moe_intermediate_size": 32,
      "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [0])",
                     "Qwen3MoeForCausalLM");
  }
  return Qwen3Json("");
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

  absl::Status arch = ReadError("mamba", Qwen3Json("", "MambaForCausalLM"));
  EXPECT_THAT(arch.message(), HasSubstr("NotLowered"));
  EXPECT_THAT(arch.message(), HasSubstr("architecture 'MambaForCausalLM' (model_type 'qwen3') is not recognized; "
                                        "recognized: DeepseekV3ForCausalLM, GptOssForCausalLM, LlamaForCausalLM, "
                                        "Qwen3ForCausalLM, Qwen3MoeForCausalLM, Qwen3NextForCausalLM"));

  std::string odd_types = SmallModel("gpt_oss");
  odd_types.replace(odd_types.find("\"full_attention\""), 16, "\"chunked_attention\"");
  EXPECT_THAT(ReadError("odd_types", odd_types).message(),
              HasSubstr("layer_types[1] 'chunked_attention' is not recognized"));

  absl::Status act = ReadError("gelu", Qwen3Json("").replace(Qwen3Json("").find("silu"), 4, "gelu"));
  EXPECT_THAT(act.message(), HasSubstr("hidden_act 'gelu' (only silu's SwiGLU is recognized)"));

  std::string no_width = Qwen3Json("");
  no_width.replace(no_width.find("\"hidden_size\": 32,"), 18, "");
  absl::Status width = ReadError("no_width", no_width);
  EXPECT_EQ(width.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(width.message(), HasSubstr("no_width.json: error: 'hidden_size' is missing (it must be positive)"));

  std::string odd = Qwen3Json("");
  odd.replace(odd.find("\"num_key_value_heads\": 2"), 24, "\"num_key_value_heads\": 3");
  EXPECT_THAT(ReadError("odd_heads", odd).message(),
              HasSubstr("num_attention_heads 4 does not divide among num_key_value_heads 3"));
}

// `json` with `key` set to `value`: a scalar key's value replaced where it stands, else the key added at the end.
std::string WithKey(std::string json, const std::string& key, const std::string& value) {
  const std::string quoted = absl::StrCat("\"", key, "\":");
  const size_t at = json.find(quoted);
  if (at == std::string::npos) {
    json.insert(json.rfind('}'), absl::StrCat(", ", quoted, " ", value));
    return json;
  }
  const size_t from = at + quoted.size();
  json.replace(from, json.find_first_of(",}", from) - from, absl::StrCat(" ", value));
  return json;
}

// A present key outside its bounds is refused by name (InvalidArgument: `spatial model` exits 2), never read as
// unset: a negative K/V head count ran as multi-head attention, a negative shared expert count dropped the shared
// expert, a zero sparse step ran as 1, and a huge layer count allocated until it aborted or ran for minutes.
TEST(ModelConfig, PresentKeysOutsideTheirBoundsAreRefusedByName) {
  struct Case {
    std::string model, key, value, message;
  };
  const std::string layers_bound = "more than 4096, the most layers this reader takes";
  const std::vector<Case> cases = {
      {"qwen3", "num_hidden_layers", "9223372036854775807", "'num_hidden_layers' is 9223372036854775807, " +
                                                                layers_bound},
      {"qwen3", "num_hidden_layers", "17179869184", "'num_hidden_layers' is 17179869184, " + layers_bound},
      {"qwen3", "num_hidden_layers", "2147483648", "'num_hidden_layers' is 2147483648, " + layers_bound},
      {"qwen3", "num_hidden_layers", "4097", "'num_hidden_layers' is 4097, " + layers_bound},
      {"qwen3", "num_hidden_layers", "-1", "'num_hidden_layers' must be positive, got -1"},
      {"qwen3", "num_key_value_heads", "-1", "'num_key_value_heads' must be positive, got -1"},
      {"qwen3", "num_key_value_heads", "0", "'num_key_value_heads' must be positive, got 0"},
      {"qwen3", "head_dim", "-1", "'head_dim' must be positive, got -1"},
      {"qwen3", "hidden_size", "2147483648", "'hidden_size' is 2147483648, more than 2147483647 (2^31 - 1)"},
      {"deepseek", "first_k_dense_replace", "2147483648",
       "'first_k_dense_replace' is 2147483648, more than num_hidden_layers (2)"},
      {"deepseek", "first_k_dense_replace", "3", "'first_k_dense_replace' is 3, more than num_hidden_layers (2)"},
      {"deepseek", "first_k_dense_replace", "-1", "'first_k_dense_replace' must not be negative, got -1"},
      {"deepseek", "n_shared_experts", "-1", "'n_shared_experts' must not be negative, got -1"},
      {"deepseek", "n_shared_experts", "9223372036854775807", "'n_shared_experts' is 9223372036854775807, more than"},
      {"deepseek", "n_shared_experts", "1000000000",
       "'n_shared_experts' 1000000000 of moe_intermediate_size 32 is a shared expert wider than 2147483647"},
      {"deepseek", "moe_layer_freq", "0", "'moe_layer_freq' must be positive, got 0"},
      {"deepseek", "n_group", "-1", "'n_group' must be positive, got -1"},
      {"deepseek", "n_group", "64", "'n_group' is 64, more than n_routed_experts (32)"},
      {"deepseek", "n_group", "3", "n_group 3 does not divide n_routed_experts 32"},
      {"deepseek", "topk_group", "0", "'topk_group' must be positive, got 0"},
      {"deepseek", "topk_group", "5", "'topk_group' is 5, more than n_group (4)"},
      {"deepseek", "routed_scaling_factor", "0", "'routed_scaling_factor' must be positive, got 0"},
      {"deepseek", "routed_scaling_factor", "-2.5", "'routed_scaling_factor' must be positive, got -2.5"},
      {"qwen3_next", "shared_expert_intermediate_size", "-1",
       "'shared_expert_intermediate_size' must not be negative, got -1"},
      {"qwen3_next", "partial_rotary_factor", "-1", "'partial_rotary_factor' must be in (0, 1], got -1"},
      {"qwen3_next", "partial_rotary_factor", "0", "'partial_rotary_factor' must be in (0, 1], got 0"},
      {"qwen3_next", "partial_rotary_factor", "1.5", "'partial_rotary_factor' must be in (0, 1], got 1.5"},
      {"qwen3_next", "full_attention_interval", "0", "'full_attention_interval' must be positive, got 0"},
      {"qwen3_next", "full_attention_interval", "-1", "'full_attention_interval' must be positive, got -1"},
      {"qwen3_next", "decoder_sparse_step", "0", "'decoder_sparse_step' must be positive, got 0"},
      {"qwen3_moe", "decoder_sparse_step", "-1", "'decoder_sparse_step' must be positive, got -1"},
      {"qwen3_moe", "mlp_only_layers", "[0, 2]", "mlp_only_layers[1] = 2 is not a layer (0..1)"},
      {"qwen3_moe", "mlp_only_layers", "[-1]", "mlp_only_layers[0] = -1 is not a layer (0..1)"},
      {"gpt_oss", "sliding_window", "-1", "'sliding_window' must be positive, got -1"},
      {"gpt_oss", "sliding_window", "null", "'sliding_window' is missing and layer_types has sliding layers"},
  };
  for (const Case& c : cases) {
    std::string json = SmallModel(c.model);
    if (c.key == "mlp_only_layers") {
      json = absl::StrReplaceAll(json, {{R"("mlp_only_layers": [0])", absl::StrCat(R"("mlp_only_layers": )",
                                                                                    c.value)}});
    } else {
      json = WithKey(json, c.key, c.value);
    }
    const std::string name = absl::StrCat(c.model, "_", c.key);
    absl::Status st = ReadError(name, json);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.key << "=" << c.value << ": " << st;
    EXPECT_THAT(st.message(), HasSubstr(absl::StrCat(name, ".json: error: ", c.message))) << c.key << "=" << c.value;
  }
}

// Only an absent or null key takes its default; the bounds themselves are read.
TEST(ModelConfig, AbsentOrNullKeysTakeTheirDefaults) {
  for (const char* value : {"null", ""}) {
    std::string json = SmallModel("qwen3");
    json = *value ? WithKey(WithKey(json, "num_key_value_heads", value), "head_dim", value)
                  : absl::StrReplaceAll(json, {{R"("num_key_value_heads": 2,)", ""}, {R"("head_dim": 16,)", ""}});
    absl::StatusOr<ModelConfig> c = ReadModelConfig(WriteConfig(*value ? "null" : "absent", json));
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->kv_heads, 4) << "absent: a K/V head per query head";
    EXPECT_EQ(c->head_dim, 8) << "absent: hidden_size / num_attention_heads";
  }
  absl::StatusOr<ModelConfig> deepest =
      ReadModelConfig(WriteConfig("deepest", WithKey(SmallModel("qwen3"), "num_hidden_layers", "4096")));
  ASSERT_TRUE(deepest.ok()) << deepest.status();
  EXPECT_EQ(deepest->layers, 4096);
  absl::StatusOr<ModelConfig> none_shared =
      ReadModelConfig(WriteConfig("none_shared", WithKey(SmallModel("deepseek"), "n_shared_experts", "0")));
  ASSERT_TRUE(none_shared.ok()) << none_shared.status();
  EXPECT_EQ(none_shared->shared_dff, 0);
  absl::StatusOr<ModelConfig> all_dense =
      ReadModelConfig(WriteConfig("all_dense", WithKey(SmallModel("deepseek"), "first_k_dense_replace", "2")));
  ASSERT_TRUE(all_dense.ok()) << all_dense.status();
  EXPECT_FALSE(all_dense->IsMoeLayer(1));
  absl::StatusOr<ModelConfig> next =
      ReadModelConfig(WriteConfig("next", absl::StrReplaceAll(SmallModel("qwen3_next"),
                                                              {{R"("partial_rotary_factor": 0.5,)", ""}})));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->partial_rotary, 0.25);
}

std::vector<std::string> Labels(const LayerPlan& plan) {
  std::vector<std::string> labels;
  for (const LayerOp& op : plan.ops) labels.push_back(op.label);
  return labels;
}

TEST(DecodeLayerPlan, TheOpsOfAQwen3LayerInOrder) {
  absl::StatusOr<ModelConfig> c = ReadModelConfig("qwen3-0.6b");
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<LayerPlan> p = DecodeLayerPlan(*c, 3, DecodePhase{100, 256, {}}, Wormhole());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(Labels(*p), ElementsAre("attn_norm", "q_proj", "k_proj", "v_proj", "q_norm", "k_norm", "q_rope", "k_rope",
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
  EXPECT_THAT(DecodeLayerPlan(*c, 28, DecodePhase{1, 8, {}}, Wormhole()).status().message(),
              HasSubstr("layer 28 is outside the model's 28 layers (0..27)"));
  EXPECT_THAT(DecodeLayerPlan(*c, 0, DecodePhase{9, 8, {}}, Wormhole()).status().message(),
              HasSubstr("decode position 9 is outside the cache's rows 1..8"));
  EXPECT_THAT(DecodeLayerPlan(*c, 0, DecodePhase{0, 8, {}}, Wormhole()).status().message(),
              HasSubstr("decode position 0 is outside the cache's rows 1..8"));
  EXPECT_THAT(DecodeLayerPlan(*c, 0, DecodePhase{1, 40961, {}}, Wormhole()).status().message(),
              HasSubstr("a cache of 40961 rows: it must be 1..40960 (max_position_embeddings)"));
}

TEST(ModelConfig, ReadsTheMixtureAndTheScaledRope) {
  absl::StatusOr<ModelConfig> moe = ReadModelConfig("qwen3-30b-a3b");
  ASSERT_TRUE(moe.ok()) << moe.status();
  EXPECT_EQ(moe->experts, 128);
  EXPECT_EQ(moe->experts_per_token, 8);
  EXPECT_EQ(moe->moe_intermediate, 768);
  EXPECT_TRUE(moe->norm_topk);
  EXPECT_TRUE(moe->qk_norm);
  ASSERT_EQ(LayerKinds(*moe).size(), 1u);
  EXPECT_EQ(LayerKinds(*moe)[0].count, 48);
  EXPECT_TRUE(LayerKinds(*moe)[0].moe);
  absl::StatusOr<ModelConfig> llama = ReadModelConfig("llama-3.1-8b");
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_FALSE(llama->qk_norm);
  EXPECT_EQ(llama->head_dim, 128);  // hidden_size / num_attention_heads: the file has no head_dim
  EXPECT_EQ(llama->rope_scaling.type, "llama3");
  EXPECT_EQ(llama->rope_scaling.original_max_positions, 8192);
  // The llama3 bands at head_dim 128, theta 500000: the fastest pair is kept, the slowest slowed by the factor 8.
  EXPECT_DOUBLE_EQ(llama->RopeInvFreq(0), 1.0);
  EXPECT_DOUBLE_EQ(llama->RopeInvFreq(63), std::pow(500000.0, -63.0 / 64) / 8);
  std::string dense_first = SmallModel("qwen3_moe");
  absl::StatusOr<ModelConfig> mixed = ReadModelConfig(WriteConfig("mixed", dense_first));
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_FALSE(mixed->IsMoeLayer(0));
  EXPECT_TRUE(mixed->IsMoeLayer(1));
  ASSERT_EQ(LayerKinds(*mixed).size(), 2u);
  EXPECT_EQ(LayerKinds(*mixed)[1].first, 1);

  EXPECT_THAT(ReadError("dynamic", absl::StrReplaceAll(Qwen3Json(R"(, "rope_scaling": {"rope_type": "dynamic"})"),
                                                      {{R"("rope_scaling": null, )", ""}}))
                  .message(),
              HasSubstr("rope_scaling 'dynamic' is not recognized (llama3 and yarn are)"));
  EXPECT_THAT(ReadError("too_many", Qwen3Json(R"(, "num_experts": 4, "num_experts_per_tok": 5,
      "moe_intermediate_size": 8)", "Qwen3MoeForCausalLM")).message(),
              HasSubstr("num_experts_per_tok 5 chooses more than the 4 experts"));
  EXPECT_THAT(ReadError("no_experts", Qwen3Json("", "Qwen3MoeForCausalLM")).message(),
              HasSubstr("'num_experts' is missing (it must be positive)"));
}

TEST(DecodeLayerPlan, LlamaHasNoQkNormsAndTheMixtureReplacesTheMlp) {
  absl::StatusOr<ModelConfig> llama = ReadModelConfig("llama-3.1-8b");
  ASSERT_TRUE(llama.ok()) << llama.status();
  absl::StatusOr<LayerPlan> l = DecodeLayerPlan(*llama, 0, DecodePhase{128, 128, {}}, Wormhole());
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_THAT(Labels(*l), ::testing::Not(::testing::Contains("q_norm")));
  EXPECT_EQ(l->ops[4].label, "q_rope");
  EXPECT_EQ(l->ops[4].spec.operands(0).name(), "q");
  EXPECT_EQ(l->ops[4].spec.rope().theta(), 0.0);  // scaled: the tables' angles
  absl::StatusOr<ModelConfig> moe = ReadModelConfig("qwen3-30b-a3b");
  ASSERT_TRUE(moe.ok()) << moe.status();
  WeightFormats formats{proto::BFP8_B, proto::BFP4_B, proto::BFP8_B, proto::BFP8_B};
  absl::StatusOr<LayerPlan> m = DecodeLayerPlan(*moe, 5, DecodePhase{4096, 4096, formats}, Wormhole());
  ASSERT_TRUE(m.ok()) << m.status();
  const std::vector<std::string> labels = Labels(*m);
  EXPECT_THAT(labels, ::testing::Contains("moe"));
  EXPECT_THAT(labels, ::testing::Not(::testing::Contains("gate_proj")));
  const proto::MoeSpec& spec = m->ops[labels.size() - 2].spec.moe();
  EXPECT_EQ(spec.ne(), 128);
  EXPECT_EQ(spec.k(), 8);
  EXPECT_EQ(spec.dff(), 768);
  EXPECT_TRUE(spec.renormalize());
  EXPECT_EQ(m->ops[1].spec.matmul().in1_format(), proto::BFP8_B);
  LayerPlan head = HeadPlan(*moe, formats);
  ASSERT_EQ(head.ops.size(), 2u);
  EXPECT_EQ(head.ops[1].spec.matmul().n(), 151936);
  EXPECT_EQ(head.ops[1].spec.matmul().in1_format(), proto::BFP8_B);
}

// Every shipped example's layer (and its head) lowers, composes and certifies at decode 4096 on wormhole_n150, and
// at a prefill of 128 where the layer is dense (a mixture is refused at prefill, by its message).
class ExampleLayer : public ::testing::TestWithParam<std::string> {};

TEST_P(ExampleLayer, LowersAndCertifiesAtPrefill128) {
  absl::StatusOr<ModelConfig> c = ReadModelConfig(GetParam());
  ASSERT_TRUE(c.ok()) << c.status();
  for (const LayerKind& kind : LayerKinds(*c)) {
    absl::StatusOr<LayerPlan> p = PrefillLayerPlan(*c, kind.first, PrefillPhase{128, 128, {}}, Wormhole());
    ASSERT_TRUE(p.ok()) << p.status();
    absl::StatusOr<LoweredLayer> l = LowerLayer(*p, Wormhole());
    ASSERT_TRUE(l.ok()) << l.status();
    CertifyResult cert = Certify(l->program, Wormhole());
    for (const proto::Diagnostic& d : cert.diagnostics) ADD_FAILURE() << FormatDiagnostic(d, l->program.name);
  }
}

TEST_P(ExampleLayer, LowersAndCertifiesAtDecode4096) {
  absl::StatusOr<ModelConfig> c = ReadModelConfig(GetParam());
  ASSERT_TRUE(c.ok()) << c.status();
  for (const LayerKind& kind : LayerKinds(*c)) {
    absl::StatusOr<LayerPlan> p = DecodeLayerPlan(*c, kind.first, DecodePhase{4096, 4096, {}}, Wormhole());
    ASSERT_TRUE(p.ok()) << p.status();
    for (const LayerPlan& plan : {*p, HeadPlan(*c, {})}) {
      absl::StatusOr<LoweredLayer> l = LowerLayer(plan, Wormhole());
      ASSERT_TRUE(l.ok()) << l.status();
      CertifyResult cert = Certify(l->program, Wormhole());
      for (const proto::Diagnostic& d : cert.diagnostics) ADD_FAILURE() << FormatDiagnostic(d, l->program.name);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleLayer, ::testing::ValuesIn(ExampleModelNames()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

TEST(LowerLayer, Qwen3NextAtFullSize) {
  absl::StatusOr<ModelConfig> c = ReadModelConfig("qwen3-next-80b-a3b");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->RotaryDim(), 64);
  ASSERT_EQ(LayerKinds(*c).size(), 2u);
  EXPECT_EQ(LayerKindName(LayerKinds(*c)[0]), "Gated DeltaNet, mixture of experts");
  EXPECT_EQ(LayerKinds(*c)[0].count, 36);
  EXPECT_EQ(LayerKinds(*c)[1].first, 3);
  EXPECT_EQ(LayerKinds(*c)[1].count, 12);
  EXPECT_TRUE(SameKind(KindOf(*c, 44), LayerKinds(*c)[0]));
  EXPECT_TRUE(SameKind(KindOf(*c, 47), LayerKinds(*c)[1]));
  absl::StatusOr<LayerPlan> linear = DecodeLayerPlan(*c, 0, DecodePhase{4096, 4096, {}}, Wormhole());
  ASSERT_TRUE(linear.ok()) << linear.status();
  EXPECT_THAT(Labels(*linear),
              ElementsAre("attn_norm", "qkvz_proj", "qkv_part", "z_part", "ba_proj", "b_part", "a_part",
                          "causal_conv", "conv_silu", "q_part", "k_part", "v_part", "q_l2norm", "k_l2norm", "beta",
                          "decay", "gated_delta", "out_proj", "attn_residual", "mlp_norm", "moe", "mlp_residual"));
  EXPECT_THAT(linear->state, ElementsAre("conv_state", "gdn_state"));
  EXPECT_EQ(c->experts, 512);
  for (int64_t layer : {0, 3}) {
    SCOPED_TRACE(absl::StrCat("layer ", layer));
    absl::StatusOr<LayerPlan> p = DecodeLayerPlan(*c, layer, DecodePhase{4096, 4096, {}}, Wormhole());
    ASSERT_TRUE(p.ok()) << p.status();
    absl::StatusOr<LoweredLayer> l = LowerLayer(*p, Wormhole());
    ASSERT_TRUE(l.ok()) << l.status();
    CertifyResult cert = Certify(l->program, Wormhole());
    for (const proto::Diagnostic& d : cert.diagnostics) ADD_FAILURE() << FormatDiagnostic(d, l->program.name);
  }
}

// A whole token's time counts every layer and the head, and says what the model keeps in DRAM: Qwen3-0.6B's
// weights in bf16 are its 0.44 B non-embedding parameters plus the 0.16 B of the LM head (tied to the embedding),
// about 1.19 GB with the norm rows' tile padding; DeepSeek-V3's 671 B do not fit a 12 GB card.
TEST(DecodeTokenTime, CountsEveryLayerAndSaysWhetherTheModelFits) {
  absl::StatusOr<ModelConfig> small = ReadModelConfig("qwen3-0.6b");
  ASSERT_TRUE(small.ok()) << small.status();
  absl::StatusOr<TokenTime> t = DecodeTokenTime(*small, DecodePhase{128, 128, {}}, Wormhole());
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->parts.size(), 2u);
  EXPECT_EQ(t->parts[0].count, 28);
  EXPECT_DOUBLE_EQ(t->cycles, 28.0 * t->parts[0].cycles + t->parts[1].cycles);
  EXPECT_GT(t->weight_bytes, 1.15e9);
  EXPECT_LT(t->weight_bytes, 1.25e9);
  // The caches: 28 layers x 2 x 128 rows x 8 heads x 128 bf16.
  EXPECT_DOUBLE_EQ(t->state_bytes, 28.0 * 2 * 128 * 1024 * 2);
  EXPECT_DOUBLE_EQ(t->capacity_bytes, 12884901888.0);
  EXPECT_TRUE(t->fits());
  absl::StatusOr<ModelConfig> big = ReadModelConfig("deepseek-v3");
  ASSERT_TRUE(big.ok()) << big.status();
  absl::StatusOr<TokenTime> b = DecodeTokenTime(*big, DecodePhase{128, 128, {}}, Wormhole());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_GT(b->weight_bytes, 1.2e12);
  EXPECT_FALSE(b->fits());
}

TEST(LowerLayer, Qwen3At4096ComposesAndCertifiesOnWormhole) {
  absl::StatusOr<ModelConfig> c = ReadModelConfig("qwen3-0.6b");
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<Target> target = LoadTarget("wormhole_n150");
  ASSERT_TRUE(target.ok()) << target.status();
  absl::StatusOr<LayerPlan> p = DecodeLayerPlan(*c, 0, DecodePhase{4096, 4096, {}}, Wormhole());
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<LoweredLayer> l = LowerLayer(*p, *target);
  ASSERT_TRUE(l.ok()) << l.status();
  // The parts' sections tile the program in order, none empty; at decode every part is an op of the plan (one
  // row is both layouts: nothing is moved).
  ASSERT_EQ(l->parts.size(), p->ops.size());
  int next = 0;
  for (size_t i = 0; i < l->parts.size(); ++i) {
    EXPECT_EQ(l->parts[i].label, p->ops[i].label);
    EXPECT_EQ(l->parts[i].first, next);
    EXPECT_GT(l->parts[i].end, l->parts[i].first);
    next = l->parts[i].end;
  }
  EXPECT_EQ(next, static_cast<int>(l->program.sections.size()));
  CertifyResult cert = Certify(l->program, *target);
  for (const proto::Diagnostic& d : cert.diagnostics) ADD_FAILURE() << FormatDiagnostic(d, l->program.name);
}

// The reference's weights: each the run input of its name (empty when the layer has none).
// The values of run input `name` (empty when the layer has none).
std::vector<double> ValuesOf(const TensorMap& inputs, const std::string& name) {
  auto it = inputs.find(name);
  return it == inputs.end() ? std::vector<double>() : it->second.values;
}

testing::DecoderWeights WeightsOf(const TensorMap& inputs) {
  auto in = [&](const char* name) { return ValuesOf(inputs, name); };
  testing::DecoderWeights w;
  w.attn_norm_w = in("attn_norm_w");
  w.wq = in("wq");
  w.wk = in("wk");
  w.wv = in("wv");
  w.q_norm_w = in("q_norm_w");
  w.k_norm_w = in("k_norm_w");
  w.wo = in("wo");
  w.mlp_norm_w = in("mlp_norm_w");
  w.w_gate = in("w_gate");
  w.w_up = in("w_up");
  w.w_down = in("w_down");
  w.router = in("router");
  w.experts_gate = in("experts_gate");
  w.experts_up = in("experts_up");
  w.experts_down = in("experts_down");
  w.bq = in("bq");
  w.bk = in("bk");
  w.bv = in("bv");
  w.bo = in("bo");
  w.sinks = in("sinks");
  w.router_bias = in("router_bias");
  w.experts_gate_bias = in("experts_gate_bias");
  w.experts_up_bias = in("experts_up_bias");
  w.experts_down_bias = in("experts_down_bias");
  w.wq_a = in("wq_a");
  w.q_a_norm_w = in("q_a_norm_w");
  w.wq_b = in("wq_b");
  w.wkv_a = in("wkv_a");
  w.kv_a_norm_w = in("kv_a_norm_w");
  w.w_uk = in("w_uk");
  w.w_uv = in("w_uv");
  w.selection_bias = in("selection_bias");
  w.shared_gate = in("shared_gate");
  w.shared_up = in("shared_up");
  w.shared_down = in("shared_down");
  w.w_qkvz = in("w_qkvz");
  w.w_ba = in("w_ba");
  w.conv_w = in("conv_w");
  w.dt_bias = in("dt_bias");
  w.a_rate = in("a_rate");
  w.gdn_norm_w = in("gdn_norm_w");
  w.w_out = in("w_out");
  w.shared_expert_gate = in("shared_expert_gate");
  return w;
}

struct SmallCase {
  std::string model, target;
  friend void PrintTo(const SmallCase& c, std::ostream* os) { *os << c.model << " on " << c.target; }
};

class SmallLayer : public ::testing::TestWithParam<SmallCase> {
 protected:
  void SetUp() override {
    const std::string& model = GetParam().model;
    absl::StatusOr<ModelConfig> c = ReadModelConfig(WriteConfig("small_" + model, SmallModel(model)));
    ASSERT_TRUE(c.ok()) << c.status();
    config_ = *std::move(c);
    absl::StatusOr<Target> t = LoadTarget(GetParam().target);
    ASSERT_TRUE(t.ok()) << t.status();
    target_ = *std::move(t);
  }

  // `plan` lowered, certified and run on the VM with LayerRunInputs at `position`: the inputs and every tensor the
  // VM leaves (empty after a failure, which is reported).
  std::pair<TensorMap, TensorMap> LowerAndRun(const LayerPlan& plan, int64_t position) {
    absl::StatusOr<LoweredLayer> l = LowerLayer(plan, *target_);
    EXPECT_TRUE(l.ok()) << l.status();
    if (!l.ok()) return {};
    CertifyResult cert = Certify(l->program, *target_);
    for (const proto::Diagnostic& d : cert.diagnostics) ADD_FAILURE() << FormatDiagnostic(d, l->program.name);
    TensorMap inputs = LayerRunInputs(l->program, config_, position, 12345 + position);
    absl::StatusOr<TensorMap> vm = RunComposition(l->program, target_->tile_rows(), target_->tile_cols(), inputs);
    EXPECT_TRUE(vm.ok()) << vm.status();
    if (!vm.ok()) return {};
    return {std::move(inputs), *std::move(vm)};
  }

  ModelConfig config_;
  std::optional<Target> target_;
};

// The VM's `name` against the reference's values, max |got - want| / max(|want|, 1) at f64 rounding.
void ExpectNearReference(const TensorMap& vm, const std::string& name, const std::vector<double>& want) {
  ASSERT_TRUE(vm.count(name)) << "the VM produced no '" << name << "'";
  const std::vector<double>& got = vm.at(name).values;
  ASSERT_EQ(got.size(), want.size()) << name;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::fabs(got[i] - want[i]) / std::max(std::fabs(want[i]), 1.0));
  }
  EXPECT_LE(worst, 1e-12) << name;
}

TEST_P(SmallLayer, VmMatchesThePlainLoopReferenceAtF64Rounding) {
  const ModelConfig& c = config_;
  // Heads of 16: whole 8 x 8 tiles on test_tiny (the caches dense, the flash form), narrower than wormhole's 32
  // (the caches flat rows) -- both layouts of the cache writes.
  const int64_t cache = 20;
  for (int64_t layer : {0, 1}) {
    for (int64_t position : {1, 7, 20}) {
      SCOPED_TRACE(absl::StrCat("layer ", layer, " at position ", position));
      absl::StatusOr<LayerPlan> p = DecodeLayerPlan(c, layer, DecodePhase{position, cache, {}}, *target_);
      ASSERT_TRUE(p.ok()) << p.status();
      const auto [inputs, vm] = LowerAndRun(*p, position);
      if (vm.empty()) return;
      // Latent attention (DeepSeek-V3) keeps one cache, kv_cache: the reference's k_cache slot holds it.
      const bool latent = c.mla.on();
      testing::DecoderStep want = testing::DecodeStep(
          c, layer, WeightsOf(inputs), ValuesOf(inputs, "x"), ValuesOf(inputs, latent ? "kv_cache" : "k_cache"),
          ValuesOf(inputs, "v_cache"), position, ValuesOf(inputs, "conv_state"), ValuesOf(inputs, "gdn_state"));
      ExpectNearReference(vm, "x_out", want.x_out);
      if (c.IsLinearLayer(layer)) {
        ExpectNearReference(vm, "conv_state", want.conv_state);
        ExpectNearReference(vm, "gdn_state", want.gdn_state);
      } else if (latent) {
        ExpectNearReference(vm, "kv_cache", want.k_cache);
      } else {
        ExpectNearReference(vm, "k_cache", want.k_cache);
        ExpectNearReference(vm, "v_cache", want.v_cache);
      }
    }
  }
}

// A prefill of T tokens from position 1 is T decode steps in a row: row t attends rows 0..t, which the steps
// before it wrote. The reference runs them so; the VM runs the prefill's one composition (T x n matmuls, the
// relayouts, a causal attention of T rows, T cache rows written at once).
TEST_P(SmallLayer, PrefillMatchesStepByStepDecodeAtF64Rounding) {
  const ModelConfig& c = config_;
  const int64_t cache = 20;
  // On wormhole_n150 these heads of 16 are narrower than a tile: at 9 tokens the per-head norm needs a blocked form
  // that wants whole-tile heads, and the attention's 36 x 20 score page outgrows Dst, so only 3 tokens run there.
  // test_tiny's 8-wide tiles take both sizes, 9 spanning two tile rows.
  const std::vector<int64_t> sizes =
      GetParam().target == "test_tiny" ? std::vector<int64_t>{3, 9} : std::vector<int64_t>{3};
  for (int64_t layer : {0, 1}) {
    for (int64_t tokens : sizes) {
      SCOPED_TRACE(absl::StrCat("layer ", layer, ", a prefill of ", tokens));
      absl::StatusOr<LayerPlan> p = PrefillLayerPlan(c, layer, PrefillPhase{tokens, cache, {}}, *target_);
      ASSERT_TRUE(p.ok()) << p.status();
      // test_tiny's 90 KB site cannot hold the rope of DeepSeek's 32 query heads over a block of rows (the decode's
      // one row fits); wormhole_n150 runs the whole latent prefill.
      if (c.mla.on() && GetParam().target == "test_tiny") {
        const absl::Status refused = LowerLayer(*p, *target_).status();
        EXPECT_THAT(refused.message(), HasSubstr("op 'q_rope': a rope whose section 'rope_"));
        EXPECT_THAT(refused.message(), HasSubstr("of a site's memory, more than its 90112 (target test_tiny)"));
        continue;
      }
      const auto [inputs, vm] = LowerAndRun(*p, 1);
      if (vm.empty()) return;
      const testing::DecoderWeights w = WeightsOf(inputs);
      const std::vector<double> x = ValuesOf(inputs, "x");
      ASSERT_EQ(static_cast<int64_t>(x.size()), tokens * c.hidden);
      // Latent attention (DeepSeek-V3) keeps one cache, kv_cache: the reference's k_cache slot holds it.
      const bool latent = c.mla.on();
      std::vector<double> k_cache = ValuesOf(inputs, latent ? "kv_cache" : "k_cache");
      std::vector<double> v_cache = ValuesOf(inputs, "v_cache"), x_out;
      // A Gated DeltaNet layer carries its conv ring and memory from token to token instead.
      std::vector<double> conv_state = ValuesOf(inputs, "conv_state"), gdn_state = ValuesOf(inputs, "gdn_state");
      for (int64_t t = 0; t < tokens; ++t) {
        const std::vector<double> row(x.begin() + t * c.hidden, x.begin() + (t + 1) * c.hidden);
        testing::DecoderStep step =
            testing::DecodeStep(c, layer, w, row, k_cache, v_cache, t + 1, conv_state, gdn_state);
        x_out.insert(x_out.end(), step.x_out.begin(), step.x_out.end());
        k_cache = std::move(step.k_cache);
        v_cache = std::move(step.v_cache);
        conv_state = std::move(step.conv_state);
        gdn_state = std::move(step.gdn_state);
      }
      ExpectNearReference(vm, "x_out", x_out);
      if (c.IsLinearLayer(layer)) {
        ExpectNearReference(vm, "conv_state", conv_state);
        ExpectNearReference(vm, "gdn_state", gdn_state);
      } else if (latent) {
        ExpectNearReference(vm, "kv_cache", k_cache);
      } else {
        ExpectNearReference(vm, "k_cache", k_cache);
        ExpectNearReference(vm, "v_cache", v_cache);
      }
    }
  }
}

// ★ A PREFILL MIXTURE'S ROUTING IS A CHOICE the VM comparison follows (PlanChoices): the dense weights chosen by the
// logits' order. A decode's routing (a table of picks) and a dense layer have none. With them, --values compares the
// routing as a choice and what follows it given the machine's choice: every output within on a small Qwen3 mixture.
TEST(PlanChoices, APrefillMixtureRoutesByItsLogits) {
  absl::StatusOr<ModelConfig> c = ReadModelConfig(WriteConfig("choices", SmallModel("qwen3_moe")));
  ASSERT_TRUE(c.ok()) << c.status();
  const absl::StatusOr<Target> loaded = LoadTarget("test_tiny");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Target& tiny = *loaded;
  absl::StatusOr<LayerPlan> prefill = PrefillLayerPlan(*c, 1, PrefillPhase{9, 20, {}}, tiny);
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  const std::vector<SimOptions::Choice> choices = PlanChoices(*prefill);
  ASSERT_EQ(choices.size(), 1u);
  EXPECT_THAT(choices[0].tensor, ::testing::EndsWith("__moe_dense"));
  EXPECT_THAT(choices[0].scores, ::testing::EndsWith("__moe_logits"));
  absl::StatusOr<LayerPlan> dense = PrefillLayerPlan(*c, 0, PrefillPhase{9, 20, {}}, tiny);
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_TRUE(PlanChoices(*dense).empty());
  absl::StatusOr<LayerPlan> decode = DecodeLayerPlan(*c, 1, DecodePhase{9, 20, {}}, tiny);
  ASSERT_TRUE(decode.ok()) << decode.status();
  EXPECT_TRUE(PlanChoices(*decode).empty());

  const std::unique_ptr<ValueModel> numerics = MakeTargetModel(tiny);
  SimOptions o;
  o.model = numerics.get();
  o.compare_vm = true;
  o.choices = choices;
  absl::StatusOr<PlanRun> run = RunPlan(*prefill, tiny, 1, o, [&](const Composition& comp) {
    TensorMap in = LayerRunInputs(comp, *c, 1, 5);
    for (auto& [name, d] : in) {
      if (!IsInteger(d.precision)) numerics->StoreRound(d.precision, d.values.data(), d.values.size());
    }
    return in;
  });
  ASSERT_TRUE(run.ok()) << run.status();
  bool routed = false;
  for (const proto::OutputError& e : run->report.errors()) {
    EXPECT_TRUE(e.within()) << e.tensor() << " rel L2 " << e.rel_l2();
    if (e.tensor() == choices[0].tensor) {
      routed = true;
      EXPECT_EQ(e.elements(), 9 * 32);
      EXPECT_FALSE(e.given_machine_choices());  // a choice is compared with the exact VM's own
    }
  }
  EXPECT_TRUE(routed);
}

std::vector<SmallCase> SmallCases() {
  std::vector<SmallCase> out;
  for (const char* model : {"qwen3", "llama", "qwen3_moe", "gpt_oss", "deepseek"}) {
    for (const char* target : {"test_tiny", "wormhole_n150"}) out.push_back({model, target});
  }
  // Not on test_tiny: its RoPE refuses a rotated half (4) narrower than its 8-wide tile over a 20-row table ("a
  // rope reading a cache whose rows are narrower than a tile loads the cache whole, and this cache is wider than a
  // site's page").
  out.push_back({"qwen3_next", "wormhole_n150"});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Models, SmallLayer, ::testing::ValuesIn(SmallCases()),
                         [](const auto& info) { return info.param.model + "_" + info.param.target; });

}  // namespace
}  // namespace spatial

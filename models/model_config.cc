#include "models/model_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lowerings/toolkit/common.h"
#include "proto/model_config.pb.h"
#include "spatial/proto_file.h"
#include "spatial/status_macros.h"

#include <google/protobuf/util/json_util.h>

namespace spatial {
namespace {

// The examples' folder in the source tree (the tool is run from a build of it).
std::string ExamplesDir() { return SPATIAL_MODELS_DIR; }

// The most layers read. The deepest published decoders have about 128 (Llama 3.1 405B: 126, DeepSeek-V3: 61);
// the per-layer tables and the loops over layers (layer kinds, the whole token) are sized by the count, and an
// absurd one (2^31, 2^63 - 1) allocated gigabytes, aborted or ran for minutes instead of being refused.
constexpr int64_t kMaxLayers = 4096;
constexpr const char* kMaxLayersText = "4096, the most layers this reader takes (the deepest decoders have ~128)";
// The largest width, head count or length read: an int32's, so the product of two (a weight's elements, a
// shared expert's width) still fits int64.
constexpr int64_t kMaxWidth = (int64_t{1} << 31) - 1;
constexpr const char* kMaxWidthText = "2147483647 (2^31 - 1), the largest size this reader takes";

// The numbers of a config.json by key, checked where they are read. The proto's fields are named as the file's keys
// and hold presence (proto/model_config.proto), so a key is looked up by its name once: only an absent key (or a
// null one, which the JSON parser leaves unset) takes the default `unset`, or is missing when it has none. A
// present value outside its bounds is an error naming the file, the key and the bound, never read as "unset".
class Keys {
 public:
  Keys(const std::string& path, const proto::HfConfig& hf) : path_(path), hf_(hf) {}

  // Integer key `key` in [lo, hi]; `hi_text` says what hi is ("num_hidden_layers (61)").
  absl::StatusOr<int64_t> Int(const char* key, int64_t lo, int64_t hi, std::optional<int64_t> unset,
                              const std::string& hi_text = kMaxWidthText) const {
    ASSIGN_OR_RETURN(const google::protobuf::FieldDescriptor* f, Field(key));
    if (!hf_.GetReflection()->HasField(hf_, f)) return Unset(key, unset, lo == 0 ? "non-negative" : "positive");
    const int64_t v = hf_.GetReflection()->GetInt64(hf_, f);
    if (v < lo) {
      return Error(lo == 1   ? absl::StrCat("'", key, "' must be positive, got ", v)
                   : lo == 0 ? absl::StrCat("'", key, "' must not be negative, got ", v)
                             : absl::StrCat("'", key, "' must be at least ", lo, ", got ", v));
    }
    if (v > hi) return Error(absl::StrCat("'", key, "' is ", v, ", more than ", hi_text));
    return v;
  }

  // A finite real key above 0.
  absl::StatusOr<double> Positive(const char* key, std::optional<double> unset) const {
    ASSIGN_OR_RETURN(const google::protobuf::FieldDescriptor* f, Field(key));
    if (!hf_.GetReflection()->HasField(hf_, f)) return Unset(key, unset, "positive");
    const double v = hf_.GetReflection()->GetDouble(hf_, f);
    if (!(v > 0) || !std::isfinite(v)) return Error(absl::StrCat("'", key, "' must be positive, got ", v));
    return v;
  }

  // A real key in (0, 1]: a fraction of something.
  absl::StatusOr<double> Fraction(const char* key, double unset) const {
    ASSIGN_OR_RETURN(const google::protobuf::FieldDescriptor* f, Field(key));
    if (!hf_.GetReflection()->HasField(hf_, f)) return unset;
    const double v = hf_.GetReflection()->GetDouble(hf_, f);
    if (!(v > 0 && v <= 1)) return Error(absl::StrCat("'", key, "' must be in (0, 1], got ", v));
    return v;
  }

 private:
  absl::StatusOr<const google::protobuf::FieldDescriptor*> Field(const char* key) const {
    const google::protobuf::FieldDescriptor* f = hf_.GetDescriptor()->FindFieldByName(key);
    // A key this file reads that the proto lacks is a bug here, not in the config.
    if (f == nullptr || !f->has_presence()) {
      return absl::InternalError(absl::StrCat("model_config.cc reads '", key, "', which proto::HfConfig does not "
                                              "hold with presence"));
    }
    return f;
  }

  template <typename T>
  absl::StatusOr<T> Unset(const char* key, std::optional<T> unset, const char* must) const {
    if (unset) return *unset;
    return Error(absl::StrCat("'", key, "' is missing (it must be ", must, ")"));
  }

  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": error: ", what));
  }

  const std::string& path_;
  const proto::HfConfig& hf_;
};

}  // namespace

std::vector<std::string> RecognizedArchitectures() {
  return {"DeepseekV3ForCausalLM", "GptOssForCausalLM", "LlamaForCausalLM", "Qwen3ForCausalLM",
          "Qwen3MoeForCausalLM", "Qwen3NextForCausalLM"};
}

bool ModelConfig::IsMoeLayer(int64_t layer) const {
  if (experts <= 0) return false;
  if (std::find(dense_layers.begin(), dense_layers.end(), layer) != dense_layers.end()) return false;
  if (moe_layer_freq > 1 && layer % moe_layer_freq != 0) return false;
  return sparse_step > 0 && (layer + 1) % sparse_step == 0;
}

double ModelConfig::YarnMscale(double m) const {
  const RopeScaling& r = rope_scaling;
  return r.type == "yarn" && r.factor > 1 ? 0.1 * m * std::log(r.factor) + 1 : 1.0;
}

double ModelConfig::RopeTableScale() const {
  // With mscale and mscale_all_dim given (DeepSeek-V3) the factor is their ratio, else get_mscale(factor, 1).
  const RopeScaling& r = rope_scaling;
  if (r.mscale > 0 && r.mscale_all_dim > 0) return YarnMscale(r.mscale) / YarnMscale(r.mscale_all_dim);
  return YarnMscale(1.0);
}

double ModelConfig::RopeInvFreq(int64_t i) const {
  const int64_t half = RotaryDim() / 2;
  const double inv = std::pow(rope_theta, -static_cast<double>(i) / static_cast<double>(half));
  if (rope_scaling.type == "yarn") {
    // transformers' _compute_yarn_parameters: pairs rotating more than beta_fast times over the original context
    // keep their frequency, fewer than beta_slow times are interpolated by the factor, a linear ramp between.
    const RopeScaling& r = rope_scaling;
    const double dim = static_cast<double>(RotaryDim()), old = static_cast<double>(r.original_max_positions);
    auto correction_dim = [&](double rotations) {
      return dim * std::log(old / (rotations * 2 * M_PI)) / (2 * std::log(rope_theta));
    };
    double low = correction_dim(r.beta_fast), high = correction_dim(r.beta_slow);
    if (r.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1);
    if (low == high) high += 0.001;
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolation = 1 - ramp;
    return inv / r.factor * (1 - extrapolation) + inv * extrapolation;
  }
  if (rope_scaling.type != "llama3") return inv;
  // transformers' _compute_llama3_parameters: long wavelengths slowed by the factor, short ones kept, the band
  // between blended linearly in the inverse wavelength.
  const RopeScaling& r = rope_scaling;
  const double old = static_cast<double>(r.original_max_positions);
  const double wavelen = 2 * M_PI / inv;
  if (wavelen > old / r.low_freq_factor) return inv / r.factor;
  if (wavelen < old / r.high_freq_factor) return inv;
  const double smooth = (old / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  return (1 - smooth) * inv / r.factor + smooth * inv;
}

std::vector<std::string> ExampleModelNames() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(ExamplesDir(), ec)) {
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<ModelConfig> ReadModelConfig(const std::string& name_or_path) {
  std::string path = name_or_path;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    const std::string example = absl::StrCat(ExamplesDir(), "/", name_or_path, ".json");
    if (name_or_path.find('/') != std::string::npos || !std::filesystem::exists(example, ec)) {
      return absl::InvalidArgumentError(absl::StrCat(name_or_path, ": error: no such config file or example model (",
                                                     "examples: ", absl::StrJoin(ExampleModelNames(), ", "), ")"));
    }
    path = example;
  }
  std::string json;
  if (absl::Status st = ReadFileToString(path, &json); !st.ok()) return st;
  proto::HfConfig hf;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // a config.json has many fields a layer's shape does not need
  if (auto st = google::protobuf::util::JsonStringToMessage(json, &hf, options); !st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": error: not a model config.json: ", st.message().as_string()));
  }
  ModelConfig c;
  c.source = path;
  c.architecture = hf.architectures_size() > 0 ? hf.architectures(0) : "";
  const std::vector<std::string> known = RecognizedArchitectures();
  if (std::find(known.begin(), known.end(), c.architecture) == known.end()) {
    return NotLowered(absl::StrCat(path, ": architecture '", c.architecture, "' (model_type '", hf.model_type(),
                                   "') is not recognized; recognized: ", absl::StrJoin(known, ", ")));
  }
  const Keys keys(path, hf);
  const std::nullopt_t required = std::nullopt;
  // The layer count first: the per-layer tables below are sized by it.
  ASSIGN_OR_RETURN(c.layers, keys.Int("num_hidden_layers", 1, kMaxLayers, required, kMaxLayersText));
  ASSIGN_OR_RETURN(c.hidden, keys.Int("hidden_size", 1, kMaxWidth, required));
  ASSIGN_OR_RETURN(c.intermediate, keys.Int("intermediate_size", 1, kMaxWidth, required));
  ASSIGN_OR_RETURN(c.heads, keys.Int("num_attention_heads", 1, kMaxWidth, required));
  // Absent: multi-head attention, a K/V head per query head.
  ASSIGN_OR_RETURN(c.kv_heads, keys.Int("num_key_value_heads", 1, kMaxWidth, c.heads));
  // Absent: the hidden width split among the heads.
  ASSIGN_OR_RETURN(c.head_dim, keys.Int("head_dim", 1, kMaxWidth, c.hidden / c.heads));
  if (c.head_dim < 1) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": error: 'head_dim' is absent and hidden_size ", c.hidden,
                                                   " / num_attention_heads ", c.heads, " is 0"));
  }
  ASSIGN_OR_RETURN(c.max_positions, keys.Int("max_position_embeddings", 1, kMaxWidth, required));
  ASSIGN_OR_RETURN(c.vocab, keys.Int("vocab_size", 1, kMaxWidth, required));
  ASSIGN_OR_RETURN(c.eps, keys.Positive("rms_norm_eps", required));
  ASSIGN_OR_RETURN(c.rope_theta, keys.Positive("rope_theta", required));
  c.qk_norm = c.architecture != "LlamaForCausalLM";
  c.rope_scaling.type = !hf.rope_scaling().rope_type().empty() ? hf.rope_scaling().rope_type()
                                                                : hf.rope_scaling().type();
  c.rope_scaling.mscale = hf.rope_scaling().mscale();
  c.rope_scaling.mscale_all_dim = hf.rope_scaling().mscale_all_dim();
  if (c.rope_scaling.type == "default") c.rope_scaling.type.clear();
  c.rope_scaling.factor = hf.rope_scaling().factor();
  c.rope_scaling.low_freq_factor = hf.rope_scaling().low_freq_factor();
  c.rope_scaling.high_freq_factor = hf.rope_scaling().high_freq_factor();
  c.rope_scaling.original_max_positions = hf.rope_scaling().original_max_position_embeddings();
  c.rope_scaling.beta_fast = hf.rope_scaling().beta_fast();
  c.rope_scaling.beta_slow = hf.rope_scaling().beta_slow();
  c.rope_scaling.truncate = hf.rope_scaling().truncate();
  c.attention_bias = hf.attention_bias();
  c.sliding.assign(static_cast<size_t>(c.layers), false);
  if (c.architecture == "GptOssForCausalLM") {
    c.qk_norm = false;
    c.sinks = true;
    // Absent: no window, refused below if a layer slides.
    ASSIGN_OR_RETURN(c.sliding_window, keys.Int("sliding_window", 1, kMaxWidth, 0));
    ASSIGN_OR_RETURN(c.experts, keys.Int("num_local_experts", 1, kMaxWidth, required));
    ASSIGN_OR_RETURN(c.experts_per_token, keys.Int("num_experts_per_tok", 1, kMaxWidth, required));
    c.moe_intermediate = c.intermediate;
    c.norm_topk = true;  // GptOssTopKRouter: the softmax of the top k logits
    c.moe_biases = true;
    ASSIGN_OR_RETURN(c.swiglu_limit, keys.Positive("swiglu_limit", required));
    c.swiglu_alpha = 1.702;  // GptOssExperts.alpha (modeling_gpt_oss.py; not in the config)
    if (hf.layer_types_size() > 0 && hf.layer_types_size() != c.layers) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": error: layer_types has ", hf.layer_types_size(),
                                                     " entries for ", c.layers, " layers"));
    }
    for (int64_t l = 0; l < c.layers; ++l) {
      // Absent: GptOssConfig's default, even layers sliding.
      const std::string type = hf.layer_types_size() > 0 ? hf.layer_types(static_cast<int>(l))
                                                         : (l % 2 == 0 ? "sliding_attention" : "full_attention");
      if (type != "sliding_attention" && type != "full_attention") {
        return NotLowered(absl::StrCat(path, ": layer_types[", l, "] '", type, "' is not recognized"));
      }
      c.sliding[l] = type == "sliding_attention";
    }
    if (c.sliding_window == 0 && std::find(c.sliding.begin(), c.sliding.end(), true) != c.sliding.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": error: 'sliding_window' is missing and layer_types has sliding layers"));
    }
  }
  if (c.architecture == "DeepseekV3ForCausalLM") {
    c.qk_norm = false;
    ASSIGN_OR_RETURN(c.experts, keys.Int("n_routed_experts", 1, kMaxWidth, required));
    ASSIGN_OR_RETURN(c.experts_per_token, keys.Int("num_experts_per_tok", 1, kMaxWidth, required));
    ASSIGN_OR_RETURN(c.moe_intermediate, keys.Int("moe_intermediate_size", 1, kMaxWidth, required));
    c.norm_topk = hf.norm_topk_prob();
    c.sigmoid = hf.scoring_func() == "sigmoid";
    c.selection_bias = true;  // e_score_correction_bias (topk_method noaux_tc)
    // Absent: one group of every expert (no group selection); present, the top topk_group of n_group groups.
    ASSIGN_OR_RETURN(c.groups, keys.Int("n_group", 1, c.experts, 0, absl::StrCat("n_routed_experts (", c.experts,
                                                                                   ")")));
    if (c.groups > 0) {
      ASSIGN_OR_RETURN(c.groups_kept, keys.Int("topk_group", 1, c.groups, required,
                                               absl::StrCat("n_group (", c.groups, ")")));
      if (c.experts % c.groups != 0) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": error: n_group ", c.groups,
                                                       " does not divide n_routed_experts ", c.experts));
      }
    }
    // Absent: the weights unscaled (0 is "unset" to the MoE op).
    ASSIGN_OR_RETURN(c.routed_scale, keys.Positive("routed_scaling_factor", 0.0));
    // Absent: no shared expert; 0 is none as well (transformers builds one of no width).
    ASSIGN_OR_RETURN(const int64_t shared, keys.Int("n_shared_experts", 0, kMaxWidth, 0));
    if (shared > kMaxWidth / c.moe_intermediate) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": error: 'n_shared_experts' ", shared, " of moe_intermediate_size ", c.moe_intermediate,
          " is a shared expert wider than ", kMaxWidthText));
    }
    c.shared_dff = shared * c.moe_intermediate;
    // Absent: every layer past the dense ones a mixture.
    ASSIGN_OR_RETURN(c.moe_layer_freq, keys.Int("moe_layer_freq", 1, kMaxLayers, 1, kMaxLayersText));
    // Absent: no layer kept dense.
    ASSIGN_OR_RETURN(const int64_t first_dense, keys.Int("first_k_dense_replace", 0, c.layers, 0,
                                                         absl::StrCat("num_hidden_layers (", c.layers, ")")));
    for (int64_t l = 0; l < first_dense; ++l) c.dense_layers.push_back(l);
    ASSIGN_OR_RETURN(c.mla.q_rank, keys.Int("q_lora_rank", 1, kMaxWidth, required));
    ASSIGN_OR_RETURN(c.mla.kv_rank, keys.Int("kv_lora_rank", 1, kMaxWidth, required));
    ASSIGN_OR_RETURN(c.mla.nope, keys.Int("qk_nope_head_dim", 1, kMaxWidth, required));
    ASSIGN_OR_RETURN(c.mla.rope, keys.Int("qk_rope_head_dim", 1, kMaxWidth, required));
    ASSIGN_OR_RETURN(c.mla.vd, keys.Int("v_head_dim", 1, kMaxWidth, required));
    c.head_dim = c.mla.nope + c.mla.rope;  // the query-key width a head attends with
    if (!hf.scoring_func().empty() && hf.scoring_func() != "sigmoid" && hf.scoring_func() != "softmax") {
      return NotLowered(absl::StrCat(path, ": scoring_func '", hf.scoring_func(), "' is not recognized"));
    }
  }
  c.linear.assign(c.sliding.size(), false);
  if (c.architecture == "Qwen3NextForCausalLM") {
    ASSIGN_OR_RETURN(c.gdn.k_heads, keys.Int("linear_num_key_heads", 1, kMaxWidth, required));
    ASSIGN_OR_RETURN(c.gdn.v_heads, keys.Int("linear_num_value_heads", 1, kMaxWidth, required));
    ASSIGN_OR_RETURN(c.gdn.k_dim, keys.Int("linear_key_head_dim", 1, kMaxWidth, required));
    ASSIGN_OR_RETURN(c.gdn.v_dim, keys.Int("linear_value_head_dim", 1, kMaxWidth, required));
    ASSIGN_OR_RETURN(c.gdn.conv, keys.Int("linear_conv_kernel_dim", 1, kMaxWidth, required));
    c.output_gate = true;
    // Absent: Qwen3NextConfig's default, a quarter of each head; present, a fraction of the head in (0, 1].
    ASSIGN_OR_RETURN(c.partial_rotary, keys.Fraction("partial_rotary_factor", 0.25));
    // Absent: no shared expert; 0 is none as well (one of no width adds nothing).
    ASSIGN_OR_RETURN(c.shared_dff, keys.Int("shared_expert_intermediate_size", 0, kMaxWidth, 0));
    c.shared_gate = c.shared_dff > 0;
    if (hf.layer_types_size() > 0 && hf.layer_types_size() != c.layers) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": error: layer_types has ", hf.layer_types_size(),
                                                     " entries for ", c.layers, " layers"));
    }
    // Absent: Qwen3NextConfig's default, every 4th layer full attention.
    ASSIGN_OR_RETURN(const int64_t interval, keys.Int("full_attention_interval", 1, kMaxLayers, 4, kMaxLayersText));
    for (int64_t l = 0; l < c.layers; ++l) {
      const std::string type = hf.layer_types_size() > 0 ? hf.layer_types(static_cast<int>(l))
                                                         : ((l + 1) % interval == 0 ? "full_attention"
                                                                                    : "linear_attention");
      if (type != "linear_attention" && type != "full_attention") {
        return NotLowered(absl::StrCat(path, ": layer_types[", l, "] '", type, "' is not recognized"));
      }
      c.linear[l] = type == "linear_attention";
    }
  }
  if (c.architecture == "Qwen3MoeForCausalLM" || c.architecture == "Qwen3NextForCausalLM") {
    ASSIGN_OR_RETURN(c.experts, keys.Int("num_experts", 1, kMaxWidth, required));
    ASSIGN_OR_RETURN(c.experts_per_token, keys.Int("num_experts_per_tok", 1, kMaxWidth, required));
    ASSIGN_OR_RETURN(c.moe_intermediate, keys.Int("moe_intermediate_size", 1, kMaxWidth, required));
    c.norm_topk = hf.norm_topk_prob();
    // Absent: every layer a mixture.
    ASSIGN_OR_RETURN(c.sparse_step, keys.Int("decoder_sparse_step", 1, kMaxLayers, 1, kMaxLayersText));
    for (int i = 0; i < hf.mlp_only_layers_size(); ++i) {
      const int64_t l = hf.mlp_only_layers(i);
      if (l < 0 || l >= c.layers) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": error: mlp_only_layers[", i, "] = ", l,
                                                       " is not a layer (0..", c.layers - 1, ")"));
      }
      c.dense_layers.push_back(l);
    }
  }
  if (c.experts_per_token > c.experts) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": error: num_experts_per_tok ", c.experts_per_token,
                                                   " chooses more than the ", c.experts, " experts"));
  }
  if (c.architecture == "Qwen3NextForCausalLM") {
    if (c.gdn.v_heads % c.gdn.k_heads != 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": error: linear_num_value_heads ", c.gdn.v_heads,
                                                     " does not divide among linear_num_key_heads ",
                                                     c.gdn.k_heads));
    }
    if (c.RotaryDim() < 2 || c.RotaryDim() % 2 != 0 || c.RotaryDim() > c.head_dim) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": error: partial_rotary_factor ", c.partial_rotary,
                                                     " rotates ", c.RotaryDim(), " of a head of ", c.head_dim,
                                                     ": RoPE rotates pairs"));
    }
  }
  if (c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": error: head_dim ", c.head_dim, " is odd: RoPE rotates pairs"));
  }
  if (c.heads % c.kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": error: num_attention_heads ", c.heads,
                                                   " does not divide among num_key_value_heads ", c.kv_heads));
  }
  if (!hf.hidden_act().empty() && hf.hidden_act() != "silu") {
    return NotLowered(absl::StrCat(path, ": hidden_act '", hf.hidden_act(), "' (only silu's SwiGLU is recognized)"));
  }
  if (!c.rope_scaling.type.empty()) {
    const RopeScaling& r = c.rope_scaling;
    if (r.type != "llama3" && r.type != "yarn") {
      return NotLowered(absl::StrCat(path, ": rope_scaling '", r.type, "' is not recognized (llama3 and yarn are)"));
    }
    if (r.type == "yarn" && (!(r.factor > 0) || !(r.beta_fast > r.beta_slow) || !(r.beta_slow > 0) ||
                             r.original_max_positions <= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": error: rope_scaling yarn needs factor > 0, 0 < beta_slow < beta_fast and "
                "original_max_position_embeddings > 0"));
    }
    if (r.type == "llama3" && (!(r.factor > 0) || !(r.low_freq_factor > 0) ||
                               !(r.high_freq_factor > r.low_freq_factor) || r.original_max_positions <= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": error: rope_scaling llama3 needs factor > 0, 0 < low_freq_factor < high_freq_factor and "
                "original_max_position_embeddings > 0"));
    }
  }
  return c;
}

}  // namespace spatial

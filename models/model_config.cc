#include "models/model_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lowerings/toolkit/common.h"
#include "proto/model_config.pb.h"
#include "spatial/proto_file.h"

#include <google/protobuf/util/json_util.h>

namespace spatial {
namespace {

// The examples' folder in the source tree (the tool is run from a build of it).
std::string ExamplesDir() { return SPATIAL_MODELS_DIR; }

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
  c.hidden = hf.hidden_size();
  c.intermediate = hf.intermediate_size();
  c.layers = hf.num_hidden_layers();
  c.heads = hf.num_attention_heads();
  c.kv_heads = hf.num_key_value_heads() > 0 ? hf.num_key_value_heads() : hf.num_attention_heads();
  c.head_dim = hf.head_dim() > 0 ? hf.head_dim() : (c.heads > 0 ? c.hidden / c.heads : 0);
  c.max_positions = hf.max_position_embeddings();
  c.vocab = hf.vocab_size();
  c.eps = hf.rms_norm_eps();
  c.rope_theta = hf.rope_theta();
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
  c.sliding.assign(static_cast<size_t>(std::max<int64_t>(hf.num_hidden_layers(), 0)), false);
  if (c.architecture == "GptOssForCausalLM") {
    c.qk_norm = false;
    c.sinks = true;
    c.sliding_window = hf.sliding_window();
    c.experts = hf.num_local_experts();
    c.experts_per_token = hf.num_experts_per_tok();
    c.moe_intermediate = hf.intermediate_size();
    c.norm_topk = true;  // GptOssTopKRouter: the softmax of the top k logits
    c.moe_biases = true;
    c.swiglu_limit = hf.swiglu_limit();
    c.swiglu_alpha = 1.702;  // GptOssExperts.alpha (modeling_gpt_oss.py; not in the config)
    if (hf.layer_types_size() > 0 && hf.layer_types_size() != hf.num_hidden_layers()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": error: layer_types has ", hf.layer_types_size(),
                                                     " entries for ", hf.num_hidden_layers(), " layers"));
    }
    for (int64_t l = 0; l < static_cast<int64_t>(c.sliding.size()); ++l) {
      // Absent: GptOssConfig's default, even layers sliding.
      const std::string type = hf.layer_types_size() > 0 ? hf.layer_types(static_cast<int>(l))
                                                         : (l % 2 == 0 ? "sliding_attention" : "full_attention");
      if (type != "sliding_attention" && type != "full_attention") {
        return NotLowered(absl::StrCat(path, ": layer_types[", l, "] '", type, "' is not recognized"));
      }
      c.sliding[l] = type == "sliding_attention";
    }
  }
  if (c.architecture == "DeepseekV3ForCausalLM") {
    c.qk_norm = false;
    c.experts = hf.n_routed_experts();
    c.experts_per_token = hf.num_experts_per_tok();
    c.moe_intermediate = hf.moe_intermediate_size();
    c.norm_topk = hf.norm_topk_prob();
    c.sigmoid = hf.scoring_func() == "sigmoid";
    c.selection_bias = true;  // e_score_correction_bias (topk_method noaux_tc)
    c.groups = hf.n_group();
    c.groups_kept = hf.topk_group();
    c.routed_scale = hf.routed_scaling_factor();
    c.shared_dff = hf.n_shared_experts() * hf.moe_intermediate_size();
    c.moe_layer_freq = hf.moe_layer_freq() > 0 ? hf.moe_layer_freq() : 1;
    for (int64_t l = 0; l < hf.first_k_dense_replace(); ++l) c.dense_layers.push_back(l);
    c.mla = LatentAttention{hf.q_lora_rank(), hf.kv_lora_rank(), hf.qk_nope_head_dim(), hf.qk_rope_head_dim(),
                            hf.v_head_dim()};
    c.head_dim = c.mla.nope + c.mla.rope;  // the query-key width a head attends with
    if (!hf.scoring_func().empty() && hf.scoring_func() != "sigmoid" && hf.scoring_func() != "softmax") {
      return NotLowered(absl::StrCat(path, ": scoring_func '", hf.scoring_func(), "' is not recognized"));
    }
  }
  c.linear.assign(c.sliding.size(), false);
  if (c.architecture == "Qwen3NextForCausalLM") {
    c.gdn = LinearAttention{hf.linear_num_key_heads(), hf.linear_num_value_heads(), hf.linear_key_head_dim(),
                            hf.linear_value_head_dim(), hf.linear_conv_kernel_dim()};
    c.output_gate = true;
    // Absent: Qwen3NextConfig's default, a quarter of each head.
    c.partial_rotary = hf.partial_rotary_factor() > 0 ? hf.partial_rotary_factor() : 0.25;
    c.shared_dff = hf.shared_expert_intermediate_size();
    c.shared_gate = c.shared_dff > 0;
    if (hf.layer_types_size() > 0 && hf.layer_types_size() != hf.num_hidden_layers()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": error: layer_types has ", hf.layer_types_size(),
                                                     " entries for ", hf.num_hidden_layers(), " layers"));
    }
    const int64_t interval = hf.full_attention_interval() > 0 ? hf.full_attention_interval() : 4;
    for (int64_t l = 0; l < static_cast<int64_t>(c.linear.size()); ++l) {
      // Absent: Qwen3NextConfig's default, every interval-th layer full attention.
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
    c.experts = hf.num_experts();
    c.experts_per_token = hf.num_experts_per_tok();
    c.moe_intermediate = hf.moe_intermediate_size();
    c.norm_topk = hf.norm_topk_prob();
    c.sparse_step = hf.decoder_sparse_step() > 0 ? hf.decoder_sparse_step() : 1;
    c.dense_layers.assign(hf.mlp_only_layers().begin(), hf.mlp_only_layers().end());
  }
  auto positive = [&](const char* field, double v) -> absl::Status {
    if (v > 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(path, ": error: '", field, "' must be positive, got ", v));
  };
  for (auto [field, v] : std::initializer_list<std::pair<const char*, double>>{
           {"hidden_size", static_cast<double>(c.hidden)},
           {"intermediate_size", static_cast<double>(c.intermediate)},
           {"num_hidden_layers", static_cast<double>(c.layers)},
           {"num_attention_heads", static_cast<double>(c.heads)},
           {"head_dim", static_cast<double>(c.head_dim)},
           {"max_position_embeddings", static_cast<double>(c.max_positions)},
           {"rms_norm_eps", c.eps},
           {"rope_theta", c.rope_theta},
           {"vocab_size", static_cast<double>(c.vocab)}}) {
    if (absl::Status st = positive(field, v); !st.ok()) return st;
  }
  if (c.architecture == "GptOssForCausalLM") {
    for (auto [field, v] : std::initializer_list<std::pair<const char*, double>>{
             {"num_local_experts", static_cast<double>(c.experts)},
             {"num_experts_per_tok", static_cast<double>(c.experts_per_token)},
             {"swiglu_limit", c.swiglu_limit}}) {
      if (absl::Status st = positive(field, v); !st.ok()) return st;
    }
    if (std::find(c.sliding.begin(), c.sliding.end(), true) != c.sliding.end()) {
      if (absl::Status st = positive("sliding_window", static_cast<double>(c.sliding_window)); !st.ok()) return st;
    }
  }
  if (c.architecture == "DeepseekV3ForCausalLM") {
    for (auto [field, v] : std::initializer_list<std::pair<const char*, double>>{
             {"n_routed_experts", static_cast<double>(c.experts)},
             {"num_experts_per_tok", static_cast<double>(c.experts_per_token)},
             {"moe_intermediate_size", static_cast<double>(c.moe_intermediate)},
             {"kv_lora_rank", static_cast<double>(c.mla.kv_rank)},
             {"q_lora_rank", static_cast<double>(c.mla.q_rank)},
             {"qk_nope_head_dim", static_cast<double>(c.mla.nope)},
             {"qk_rope_head_dim", static_cast<double>(c.mla.rope)},
             {"v_head_dim", static_cast<double>(c.mla.vd)}}) {
      if (absl::Status st = positive(field, v); !st.ok()) return st;
    }
    if (c.groups > 0 && (c.experts % c.groups != 0 || c.groups_kept < 1 || c.groups_kept > c.groups)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": error: n_group ", c.groups, " and topk_group ",
                                                     c.groups_kept, " do not divide ", c.experts, " experts"));
    }
  }
  if (c.experts_per_token > c.experts) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": error: num_experts_per_tok ", c.experts_per_token,
                                                   " chooses more than the ", c.experts, " experts"));
  }
  if (c.architecture == "Qwen3NextForCausalLM") {
    for (auto [field, v] : std::initializer_list<std::pair<const char*, int64_t>>{
             {"linear_num_key_heads", c.gdn.k_heads},
             {"linear_num_value_heads", c.gdn.v_heads},
             {"linear_key_head_dim", c.gdn.k_dim},
             {"linear_value_head_dim", c.gdn.v_dim},
             {"linear_conv_kernel_dim", c.gdn.conv}}) {
      if (absl::Status st = positive(field, static_cast<double>(v)); !st.ok()) return st;
    }
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
  if (c.architecture == "Qwen3MoeForCausalLM" || c.architecture == "Qwen3NextForCausalLM") {
    for (auto [field, v] : std::initializer_list<std::pair<const char*, int64_t>>{
             {"num_experts", c.experts},
             {"num_experts_per_tok", c.experts_per_token},
             {"moe_intermediate_size", c.moe_intermediate}}) {
      if (absl::Status st = positive(field, static_cast<double>(v)); !st.ok()) return st;
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

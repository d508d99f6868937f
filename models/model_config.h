// A model's architecture facts from its Hugging Face `config.json` (issue #15): the public numbers a layer's op
// specs are built from (no weights). Read with protobuf's JSON parser (proto/model_config.proto); an architecture
// the layer recognizer (models/layer.h) does not know is refused by name.
#ifndef MODELS_MODEL_CONFIG_H_
#define MODELS_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace spatial {

// RoPE's frequency scaling: "llama3" (Llama 3.1's wavelength bands), "yarn" (gpt-oss), or none (type empty).
struct RopeScaling {
  std::string type;
  double factor = 1, low_freq_factor = 1, high_freq_factor = 1;
  int64_t original_max_positions = 0;
  double beta_fast = 0, beta_slow = 0;  // yarn
  bool truncate = false;
  double mscale = 0, mscale_all_dim = 0;  // yarn's attention factor terms (DeepSeek-V3); 0: unset
};

// Multi-head latent attention (DeepSeek-V3): q through a q_rank bottleneck, K and V through one kv_rank latent.
struct LatentAttention {
  int64_t q_rank = 0, kv_rank = 0, nope = 0, rope = 0, vd = 0;
  bool on() const { return kv_rank > 0; }
};

// Gated DeltaNet's linear attention (Qwen3-Next's linear_attention layers): k_heads query/key heads of k_dim,
// v_heads value heads of v_dim, a depthwise causal conv of `conv` taps over q, k and v.
struct LinearAttention {
  int64_t k_heads = 0, v_heads = 0, k_dim = 0, v_dim = 0, conv = 0;
};

struct ModelConfig {
  std::string source;        // the file it was read from
  std::string architecture;  // architectures[0], "Qwen3ForCausalLM"
  bool qk_norm = false;      // Qwen3: a per-head RMSNorm of q and k before RoPE (Llama, gpt-oss have none)
  bool attention_bias = false;  // q, k, v and o projections with a bias (gpt-oss)
  bool sinks = false;           // a learned sink logit per query head in the softmax's denominator (gpt-oss)
  int64_t sliding_window = 0;   // the positions a sliding layer attends (its last W)
  std::vector<bool> sliding;    // per layer: attends a sliding window (gpt-oss's layer_types)
  int64_t hidden = 0;
  int64_t intermediate = 0;
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_positions = 0;
  int64_t vocab = 0;
  double eps = 0;
  double rope_theta = 0;
  RopeScaling rope_scaling;
  // Mixture of experts (0 experts: every MLP dense): experts per layer, chosen per token, each one's SwiGLU width,
  // whether the chosen scores are renormalized, every how many layers the MLP is sparse, the layers kept dense.
  int64_t experts = 0;
  int64_t experts_per_token = 0;
  int64_t moe_intermediate = 0;
  bool norm_topk = false;
  int64_t sparse_step = 1;
  std::vector<int64_t> dense_layers;
  // gpt-oss's mixture: a router with a bias, experts whose gate, up and down have biases, and its clamped SwiGLU
  // (gate clamped above at the limit, up to [-limit, limit], gate * sigmoid(alpha * gate) * (up + 1)).
  bool moe_biases = false;
  double swiglu_limit = 0;  // 0: the plain SwiGLU
  double swiglu_alpha = 0;
  // DeepSeek-V3's mixture: sigmoid scores, a selection bias (e_score_correction_bias), the top groups_kept of
  // `groups` groups, the weights times routed_scale, a shared expert of shared_dff beside the routed ones.
  bool sigmoid = false;
  bool selection_bias = false;
  int64_t groups = 0, groups_kept = 0;
  double routed_scale = 0;
  int64_t shared_dff = 0;
  int64_t moe_layer_freq = 1;
  LatentAttention mla;
  // Qwen3-Next: the Gated DeltaNet of its linear layers, which layers are linear, the attention layers' output gate
  // (o * sigmoid(gate), the gate q_proj's second half a head), the rotated fraction of a head, and the shared
  // expert's sigmoid gate.
  LinearAttention gdn;
  std::vector<bool> linear;
  bool output_gate = false;
  double partial_rotary = 1.0;
  bool shared_gate = false;

  // Whether layer `layer`'s MLP is the mixture (transformers' Qwen3MoeDecoderLayer: not in mlp_only_layers, and
  // (layer + 1) a multiple of decoder_sparse_step).
  bool IsMoeLayer(int64_t layer) const;
  bool IsSlidingLayer(int64_t layer) const {
    return layer >= 0 && layer < static_cast<int64_t>(sliding.size()) && sliding[layer];
  }
  bool IsLinearLayer(int64_t layer) const {
    return layer >= 0 && layer < static_cast<int64_t>(linear.size()) && linear[layer];
  }
  // The width RoPE rotates: the head (its partial_rotary_factor part: Qwen3-Next's 64 of 256), or latent
  // attention's rope part.
  int64_t RotaryDim() const {
    return mla.on() ? mla.rope : static_cast<int64_t>(static_cast<double>(head_dim) * partial_rotary);
  }
  // RoPE's inverse frequency of pair i < RotaryDim()/2: theta^(-i/half), scaled as rope_scaling says.
  double RopeInvFreq(int64_t i) const;
  // The factor the angle tables' cos and sin carry: yarn's attention factor 0.1 ln(factor) + 1, else 1.
  double RopeTableScale() const;
  // transformers' yarn get_mscale(factor, m): 0.1 m ln(factor) + 1 (1 without a yarn factor above 1).
  double YarnMscale(double m) const;
};

// The architectures the recognizer lowers, sorted.
std::vector<std::string> RecognizedArchitectures();

// The example configs shipped in examples/models (their names: "qwen3-8b"), sorted.
std::vector<std::string> ExampleModelNames();

// Reads `name_or_path`: a config.json path, or the name of an example config. Errors name the file and the field:
// an unreadable file or bad JSON (InvalidArgument), a missing required key, a present key outside its bounds (a
// non-positive size, more than 4096 layers or a size beyond 2^31 - 1, first_k_dense_replace beyond the layers; only
// an absent or null key takes its default, never a present 0 or -1), query heads that do not divide among the K/V
// heads, a mixture that chooses none or more experts than it has, layer_types of the wrong length; an
// architecture not in RecognizedArchitectures(), an activation other than silu, a RoPE scaling other than llama3
// or yarn, and a layer type other than sliding_attention or full_attention are NotLowered, naming them.
absl::StatusOr<ModelConfig> ReadModelConfig(const std::string& name_or_path);

}  // namespace spatial

#endif  // MODELS_MODEL_CONFIG_H_

// One decoder layer of a model as the op specs of its lowering (issue #15), and that layer lowered into one
// composition: the recognizer turns (config, layer index, phase) into the layer's ops in order, their tensors
// shared by name, and LowerLayer lowers each op for a target and joins their sections.
//
// ★ ONE TOKEN'S DECODE STEP, AS THE MODEL RUNS IT (Qwen3ForCausalLM, transformers' modeling_qwen3.py): the residual
// stream x (1 x hidden) -> RMSNorm -> q, k, v projections -> per-head RMSNorm of q and k -> RoPE at the token's
// position -> k and v written into the caches at that row -> attention over the first P positions -> o projection
// -> + x -> RMSNorm -> SwiGLU MLP (silu(gate) * up, then down) -> + -> x_out.
//
// Llama (modeling_llama.py) is the same without the q/k norms. A mixture layer (Qwen3MoeForCausalLM) replaces the
// SwiGLU MLP by the MoE op (lowerings/moe/moe.h: router, top k, the chosen experts' SwiGLUs). gpt-oss
// (modeling_gpt_oss.py): no q/k norms, projections with biases (bq, bk, bv, bo), a sink logit per head (sinks),
// every other layer a sliding window, the mixture with biases and the clamped SwiGLU.
//
// Qwen3-Next (modeling_qwen3_next.py): its attention layers' q_proj also writes an output gate a head (the attention
// times its sigmoid before o_proj) and RoPE turns a quarter of each head; three in four layers are a Gated DeltaNet
// instead (w_qkvz, w_ba, conv_w, dt_bias, a_rate = -exp(A_log), gdn_norm_w, w_out; carried state conv_state and
// gdn_state), and the mixture's shared expert is weighed by sigmoid(h2 . shared_expert_gate). Its norms' weights are
// zero-centred (x * (1 + w)); a weight here is that 1 + w.
//
// Names: the run's inputs are x, pos (the 1-based position P, one int), the weights (attn_norm_w, wq, wk, wv,
// q_norm_w, k_norm_w (Qwen3), wo, mlp_norm_w, then w_gate, w_up, w_down or router, experts_gate, experts_up,
// experts_down (MoeSpec's layout); dense matmul weights stored as the matmul's k x n, i.e. transposed from
// PyTorch's Linear; gpt-oss adds bq, bk, bv, bo, sinks and router_bias, experts_gate_bias, experts_up_bias,
// experts_down_bias), the angle tables rope_cos / rope_sin (cache x head_dim/2, flat: row p, pair i holds
// RopeTableScale() * cos or sin of p * RopeInvFreq(i)), and the carried state k_cache / v_cache (cache x
// kv_heads*head_dim: dense tiles where the attention reads them so, else flat). The result is x_out; the caches
// are rewritten in place.
#ifndef MODELS_LAYER_H_
#define MODELS_LAYER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/graph.h"
#include "models/model_config.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "spatial/tensor_data.h"
#include "targets/target.h"

namespace spatial {

// Storage formats of the matmul weights (MatmulSpec.in1_format); unset: the target's matrix input precision.
// tt-metal's tt_transformers "performance" decode keeps the attention weights and FF2 in bfp8_b and FF1/FF3 (gate,
// up) in bfp4_b.
struct WeightFormats {
  proto::Precision attention = proto::PRECISION_UNSPECIFIED;  // wq, wk, wv, wo
  proto::Precision gate_up = proto::PRECISION_UNSPECIFIED;    // w_gate, w_up
  proto::Precision down = proto::PRECISION_UNSPECIFIED;       // w_down
  proto::Precision lm_head = proto::PRECISION_UNSPECIFIED;
};

// The named weight recipes: "default" (every weight the target's matrix input precision), "bf16", "bfp8_b",
// "bfp4_b" (every matmul weight so), and tt_transformers' two decode recipes: "ff13_bfp4" (gate and up bfp4_b, the
// rest bfp8_b: models/README.md's "bfp4 MLP FF1+FF3"; also called "performance") and "mlp_bfp4" (gate, up and
// down bfp4_b, the rest bfp8_b: PERF.md's "bfp4 MLP and bfp8 attention weights"). False for any other name.
bool WeightRecipe(const std::string& name, WeightFormats* out);
inline constexpr const char* kWeightRecipeNames = "default, bf16, bfp8_b, bfp4_b, ff13_bfp4 (= performance), mlp_bfp4";

// A decode step at 1-based position `position` (the token attends positions 1..P, P itself its own) over caches
// of `cache` rows.
struct DecodePhase {
  int64_t position = 0;
  int64_t cache = 0;
  WeightFormats weights;
};

// A prefill of `tokens` tokens from position 1 (each row attends itself and the rows before it) into caches of
// `cache` rows.
struct PrefillPhase {
  int64_t tokens = 0;
  int64_t cache = 0;
  WeightFormats weights;
};

struct LayerOp {
  std::string label;  // "q_proj", "attention", ...
  proto::OpSpec spec;
};

struct LayerPlan {
  std::string name;  // "qwen3-8b_layer0_decode_p4096_l8192"
  std::vector<LayerOp> ops;
  std::vector<std::string> weights;  // the weight tensors the run is given
  std::vector<std::string> state;    // carried state: the caches
};

// The ops of layer `layer` of `config` at a decode step on `target` (which chooses the caches' layout). Errors
// (InvalidArgument): a layer outside [0, num_hidden_layers), a position outside [1, cache], a cache of no rows or
// longer than the model's max_position_embeddings.
absl::StatusOr<LayerPlan> DecodeLayerPlan(const ModelConfig& config, int64_t layer, const DecodePhase& phase,
                                          const Target& target);

// The ops of layer `layer` at a prefill: the decode step's ops over T rows (matmuls of m = T, norms and pointwise
// ops over T x n, the per-head norms and RoPE over the flat rows of T tokens, T cache rows written, a causal
// attention of T query rows), with the relayouts between the two layouts. Errors as DecodeLayerPlan's, and a prefill
// of no tokens or more than the cache holds (InvalidArgument); a mixture-of-experts layer is NotLowered (the MoE op
// routes one token).
absl::StatusOr<LayerPlan> PrefillLayerPlan(const ModelConfig& config, int64_t layer, const PrefillPhase& phase,
                                           const Target& target);

// The model's head after its last layer, for a whole token's time: the final RMSNorm and the LM head (hidden x
// vocab_size). Reads x (the last layer's x_out), final_norm_w and lm_head; its result is logits.
LayerPlan HeadPlan(const ModelConfig& config, const WeightFormats& formats);

// The distinct kinds of layer a model has, for --all-layers: each kind's first layer and how many layers are of it
// (Qwen3-30B-A3B: every layer a mixture; a dense model: one kind of every layer; gpt-oss: sliding and full).
struct LayerKind {
  int64_t first = 0;
  int64_t count = 0;
  bool moe = false;
  bool sliding = false;  // attends a sliding window (gpt-oss's sliding_attention layers)
  bool linear = false;   // a Gated DeltaNet (Qwen3-Next's linear_attention layers)
};
std::vector<LayerKind> LayerKinds(const ModelConfig& config);
// The kind of layer `layer` (first = layer, count 0), and whether two kinds are one (first and count aside).
LayerKind KindOf(const ModelConfig& config, int64_t layer);
inline bool SameKind(const LayerKind& a, const LayerKind& b) {
  return a.moe == b.moe && a.sliding == b.sliding && a.linear == b.linear;
}
// "sliding attention, mixture of experts", "dense MLP", ...
std::string LayerKindName(const LayerKind& kind);

// Values for every run input of `program` (a lowered layer of `config`): weights uniform within 1/sqrt of their fan-in
// (an initializer's scale), norm weights in [0.8, 1.2], sinks in [-2, 2], x and the caches in [-1, 1), the angle
// tables as the config's RoPE has them (RopeTableScale * cos/sin of p * RopeInvFreq(i)), pos = `position`; the
// same values for the same seed on every machine (a 64-bit LCG, not <random>).
TensorMap LayerRunInputs(const Composition& program, const ModelConfig& config, int64_t position, uint64_t seed);

// A lowered layer: the program and its parts (lowerings/graph.h), the plan's ops among them in plan order.
using LoweredLayer = LoweredGraph;

// The plan's ops composed by LowerGraph (lowerings/graph.h: the layouts meet where the ops do), given the token's rows
// x, pos, the RoPE tables, the plan's weights and its state. A refusal stays one and names the op ("NotLowered:
// op 'attention': ...").
absl::StatusOr<LoweredLayer> LowerLayer(const LayerPlan& plan, const Target& target);

}  // namespace spatial

#endif  // MODELS_LAYER_H_

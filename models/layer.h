// One decoder layer of a model as the op specs of its lowering (issue #15), and that layer lowered into one
// composition: the recognizer turns (config, layer index, phase) into the layer's ops in order, their tensors
// shared by name, and LowerLayer lowers each op for a target and joins their sections.
//
// ★ ONE TOKEN'S DECODE STEP, AS THE MODEL RUNS IT (Qwen3ForCausalLM, transformers' modeling_qwen3.py): the residual
// stream x (1 x hidden) -> RMSNorm -> q, k, v projections -> per-head RMSNorm of q and k -> RoPE at the token's
// position -> k and v written into the caches at that row -> attention over the first P positions -> o projection
// -> + x -> RMSNorm -> SwiGLU MLP (silu(gate) * up, then down) -> + -> x_out.
//
// Names: the run's inputs are x, pos (the 1-based position P, one int), the weights (attn_norm_w, wq, wk, wv,
// q_norm_w, k_norm_w, wo, mlp_norm_w, w_gate, w_up, w_down; stored as the matmul's k x n, i.e. transposed from
// PyTorch's Linear), the angle tables rope_cos / rope_sin (cache x head_dim/2, flat), and the carried state
// k_cache / v_cache (cache x kv_heads*head_dim: dense tiles where the attention reads them so, else flat). The result is x_out; the caches are rewritten in place.
#ifndef MODELS_LAYER_H_
#define MODELS_LAYER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "models/model_config.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// A decode step at 1-based position `position` (the token attends positions 1..P, P itself its own) over caches
// of `cache` rows.
struct DecodePhase {
  int64_t position = 0;
  int64_t cache = 0;
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

// The ops of layer `layer` of `config` at a decode step on `target` (which chooses the caches' layout). Errors (InvalidArgument): a layer outside
// [0, num_hidden_layers), a position outside [1, cache], a cache of no rows or longer than the model's
// max_position_embeddings.
absl::StatusOr<LayerPlan> DecodeLayerPlan(const ModelConfig& config, int64_t layer, const DecodePhase& phase,
                                          const Target& target);

struct LoweredLayer {
  Composition program;
  // Per op of the plan: its sections, [first, end) in program.sections.
  std::vector<std::pair<int, int>> op_sections;
};

// Each op lowered by Lower (lowerings/registry.h) for `target`, the sections joined in plan order. A refusal names
// the op ("layer op 'attention': NotLowered: ...").
absl::StatusOr<LoweredLayer> LowerLayer(const LayerPlan& plan, const Target& target);

}  // namespace spatial

#endif  // MODELS_LAYER_H_

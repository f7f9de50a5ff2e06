#include "worker/model/hf_model_loader.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/strings.h"
#include "nlohmann/json.hpp"
#include "worker/model/safetensors_reader.h"

namespace ripplekv::worker {
namespace {

using Json = nlohmann::json;

// A config.json is a few KiB; anything over 16 MiB is not one.
constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;  // bytes

// Typed access to config.json fields. `null` counts as absent (HF writes e.g. "head_dim": null).
class ConfigReader {
 public:
  ConfigReader(const Json& root, const std::string& display_name)
      : root_(root), name_(display_name) {}

  const Json* Find(const Json& obj, std::string_view key) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
  }

  Status Missing(std::string_view field) const {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": required field '", Sv(field), "' is missing"));
  }
  Status Mistyped(std::string_view field, std::string_view want, const Json& got) const {
    std::string shown = got.dump();
    if (shown.size() > 80) shown = shown.substr(0, 77) + "...";
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": field '", Sv(field), "' must be ", Sv(want), ", got ", shown));
  }

  // A positive integer that fits an int.
  StatusOr<int> PositiveInt(const Json& obj, std::string_view key, std::string_view field) const {
    const Json* v = Find(obj, key);
    if (v == nullptr) return Missing(field);
    if (v->is_number_unsigned() && v->get<uint64_t>() > 0 && v->get<uint64_t>() <= INT_MAX) {
      return static_cast<int>(v->get<uint64_t>());
    }
    if (v->is_number_integer() && v->get<int64_t>() > 0 && v->get<int64_t>() <= INT_MAX) {
      return static_cast<int>(v->get<int64_t>());
    }
    return Mistyped(field, "a positive integer of at most 2147483647", *v);
  }
  StatusOr<int> PositiveInt(std::string_view key) const { return PositiveInt(root_, key, key); }
  StatusOr<int> PositiveIntOr(std::string_view key, int fallback) const {
    if (Find(root_, key) == nullptr) return fallback;
    return PositiveInt(key);
  }

  // A finite number > 0 (integers accepted).
  StatusOr<double> PositiveNumber(const Json& obj, std::string_view key,
                                  std::string_view field) const {
    const Json* v = Find(obj, key);
    if (v == nullptr) return Missing(field);
    if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() <= 0) {
      return Mistyped(field, "a positive number", *v);
    }
    return v->get<double>();
  }
  StatusOr<double> PositiveNumber(std::string_view key) const {
    return PositiveNumber(root_, key, key);
  }
  StatusOr<double> PositiveNumberOr(std::string_view key, double fallback) const {
    if (Find(root_, key) == nullptr) return fallback;
    return PositiveNumber(key);
  }

  StatusOr<bool> BoolOr(std::string_view key, bool fallback) const {
    const Json* v = Find(root_, key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) return Mistyped(key, "true or false", *v);
    return v->get<bool>();
  }

  StatusOr<std::string> String(const Json& obj, std::string_view key,
                               std::string_view field) const {
    const Json* v = Find(obj, key);
    if (v == nullptr) return Missing(field);
    if (!v->is_string()) return Mistyped(field, "a string", *v);
    return v->get<std::string>();
  }

  const Json& root() const { return root_; }
  const std::string& name() const { return name_; }

 private:
  const Json& root_;
  const std::string& name_;
};

Status ParseRopeScaling(const ConfigReader& r, ModelConfig* config) {
  const Json* scaling = r.Find(r.root(), "rope_scaling");
  if (scaling == nullptr) return absl::OkStatus();
  if (!scaling->is_object()) return r.Mistyped("rope_scaling", "an object or null", *scaling);
  // transformers writes "rope_type"; older configs write "type".
  const Json* type = r.Find(*scaling, "rope_type");
  std::string_view type_field = "rope_scaling.rope_type";
  if (type == nullptr) {
    type = r.Find(*scaling, "type");
    type_field = "rope_scaling.type";
  }
  if (type == nullptr) return r.Missing("rope_scaling.rope_type");
  if (!type->is_string()) return r.Mistyped(type_field, "a string", *type);
  const std::string& kind = type->get_ref<const std::string&>();
  if (kind == "default") return absl::OkStatus();
  if (kind != "llama3") {
    return absl::UnimplementedError(absl::StrCat(r.name(), ": rope_scaling type '", kind,
                                                 "' is not supported (only 'llama3' is)"));
  }
  ASSIGN_OR_RETURN(double factor, r.PositiveNumber(*scaling, "factor", "rope_scaling.factor"));
  ASSIGN_OR_RETURN(double low,
                   r.PositiveNumber(*scaling, "low_freq_factor", "rope_scaling.low_freq_factor"));
  ASSIGN_OR_RETURN(double high,
                   r.PositiveNumber(*scaling, "high_freq_factor", "rope_scaling.high_freq_factor"));
  ASSIGN_OR_RETURN(int original, r.PositiveInt(*scaling, "original_max_position_embeddings",
                                               "rope_scaling.original_max_position_embeddings"));
  if (high < low) {
    return absl::InvalidArgumentError(
        absl::StrCat(r.name(), ": field 'rope_scaling.high_freq_factor' (", high,
                     ") must be at least 'rope_scaling.low_freq_factor' (", low, ")"));
  }
  config->rope_scaling.factor = static_cast<float>(factor);
  config->rope_scaling.low_freq_factor = static_cast<float>(low);
  config->rope_scaling.high_freq_factor = static_cast<float>(high);
  config->rope_scaling.original_max_positions = original;
  return absl::OkStatus();
}

// Features of the HF classes our forward pass does not compute: refuse rather than run a
// different model.
Status CheckUnsupportedFeatures(const ConfigReader& r, const std::string& model_type) {
  if (const Json* act = r.Find(r.root(), "hidden_act")) {
    if (!act->is_string()) return r.Mistyped("hidden_act", "a string", *act);
    if (act->get_ref<const std::string&>() != "silu") {
      return absl::UnimplementedError(absl::StrCat(r.name(), ": hidden_act '",
                                                   act->get<std::string>(),
                                                   "' is not supported (only 'silu' is)"));
    }
  }
  if (model_type != "qwen2") {  // Qwen2 biases are implied by the type, not by a flag
    ASSIGN_OR_RETURN(bool attention_bias, r.BoolOr("attention_bias", false));
    if (attention_bias) {
      return absl::UnimplementedError(
          absl::StrCat(r.name(), ": attention_bias = true (an o_proj bias) is not supported"));
    }
  }
  ASSIGN_OR_RETURN(bool mlp_bias, r.BoolOr("mlp_bias", false));
  if (mlp_bias) {
    return absl::UnimplementedError(absl::StrCat(r.name(), ": mlp_bias = true is not supported"));
  }
  return absl::OkStatus();
}

// The tensors LoadHfModel reads, with the shape the config implies and where each goes.
struct TensorSlot {
  std::string name;
  kernels::Shape shape;
  kernels::Tensor* dst = nullptr;     // fp32 (norms, biases), or
  kernels::Weight* matrix = nullptr;  // a weight matrix (expanded to fp32 for now)
};

std::vector<TensorSlot> PlanTensors(const ModelConfig& c, Model* m) {
  const int64_t d = c.d_model;
  const int64_t q_out = static_cast<int64_t>(c.n_heads) * c.head_dim;
  const int64_t kv_out = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
  const int64_t ff = c.d_ff;
  std::vector<TensorSlot> slots;
  slots.push_back({"model.embed_tokens.weight", {c.vocab_size, d}, nullptr, &m->tok_embeddings});
  m->layers.resize(static_cast<size_t>(c.n_layers));
  for (int i = 0; i < c.n_layers; ++i) {
    LayerWeights& l = m->layers[static_cast<size_t>(i)];
    const std::string p = absl::StrCat("model.layers.", i, ".");
    slots.push_back({p + "input_layernorm.weight", {d}, &l.attn_norm});
    slots.push_back({p + "self_attn.q_proj.weight", {q_out, d}, nullptr, &l.wq});
    slots.push_back({p + "self_attn.k_proj.weight", {kv_out, d}, nullptr, &l.wk});
    slots.push_back({p + "self_attn.v_proj.weight", {kv_out, d}, nullptr, &l.wv});
    slots.push_back({p + "self_attn.o_proj.weight", {d, q_out}, nullptr, &l.wo});
    if (c.qkv_bias) {
      slots.push_back({p + "self_attn.q_proj.bias", {q_out}, &l.bq});
      slots.push_back({p + "self_attn.k_proj.bias", {kv_out}, &l.bk});
      slots.push_back({p + "self_attn.v_proj.bias", {kv_out}, &l.bv});
    }
    slots.push_back({p + "post_attention_layernorm.weight", {d}, &l.ffn_norm});
    slots.push_back({p + "mlp.gate_proj.weight", {ff, d}, nullptr, &l.w_gate});
    slots.push_back({p + "mlp.up_proj.weight", {ff, d}, nullptr, &l.w_up});
    slots.push_back({p + "mlp.down_proj.weight", {d, ff}, nullptr, &l.w_down});
  }
  slots.push_back({"model.norm.weight", {d}, &m->output_norm});
  if (!c.tied_embeddings) {
    slots.push_back({"lm_head.weight", {c.vocab_size, d}, nullptr, &m->output});
  }
  return slots;
}

}  // namespace

StatusOr<ModelConfig> ParseHfConfig(std::string_view json_text, const std::string& display_name) {
  Json root;
  try {
    root = Json::parse(json_text.begin(), json_text.end());
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(display_name, ": not valid JSON at byte offset ",
                                                   e.byte > 0 ? e.byte - 1 : 0, ": ", e.what()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(display_name, ": could not be parsed as JSON: ", e.what()));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(display_name, ": not a JSON object"));
  }
  ConfigReader r(root, display_name);
  ModelConfig c;

  ASSIGN_OR_RETURN(c.architecture, r.String(root, "model_type", "model_type"));
  if (c.architecture != "llama" && c.architecture != "mistral" && c.architecture != "qwen2") {
    return absl::UnimplementedError(
        absl::StrCat(display_name, ": model_type '", c.architecture,
                     "' is not supported (llama, mistral and qwen2 are)"));
  }
  c.name = c.architecture;
  if (const Json* arch = r.Find(root, "architectures")) {
    if (!arch->is_array() || (!arch->empty() && !(*arch)[0].is_string())) {
      return r.Mistyped("architectures", "an array of strings", *arch);
    }
    if (!arch->empty()) c.name = (*arch)[0].get<std::string>();
  }
  RETURN_IF_ERROR(CheckUnsupportedFeatures(r, c.architecture));

  ASSIGN_OR_RETURN(c.d_model, r.PositiveInt("hidden_size"));
  ASSIGN_OR_RETURN(c.d_ff, r.PositiveInt("intermediate_size"));
  ASSIGN_OR_RETURN(c.n_layers, r.PositiveInt("num_hidden_layers"));
  ASSIGN_OR_RETURN(c.n_heads, r.PositiveInt("num_attention_heads"));
  ASSIGN_OR_RETURN(c.n_kv_heads, r.PositiveIntOr("num_key_value_heads", c.n_heads));
  if (c.n_heads % c.n_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(display_name, ": field 'num_key_value_heads' (", c.n_kv_heads,
                     ") must divide 'num_attention_heads' (", c.n_heads, ")"));
  }
  if (r.Find(root, "head_dim") == nullptr && c.d_model % c.n_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(display_name, ": field 'head_dim' is absent and 'hidden_size' (", c.d_model,
                     ") is not a multiple of 'num_attention_heads' (", c.n_heads, ")"));
  }
  ASSIGN_OR_RETURN(c.head_dim, r.PositiveIntOr("head_dim", c.d_model / c.n_heads));
  if (c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(display_name, ": field 'head_dim' (", c.head_dim, ") must be even for RoPE"));
  }
  ASSIGN_OR_RETURN(double eps, r.PositiveNumber("rms_norm_eps"));
  c.rms_eps = static_cast<float>(eps);
  ASSIGN_OR_RETURN(double theta, r.PositiveNumberOr("rope_theta", 10000.0));
  c.rope_theta = static_cast<float>(theta);
  ASSIGN_OR_RETURN(c.context_length, r.PositiveInt("max_position_embeddings"));
  ASSIGN_OR_RETURN(c.vocab_size, r.PositiveInt("vocab_size"));
  ASSIGN_OR_RETURN(c.tied_embeddings, r.BoolOr("tie_word_embeddings", false));
  RETURN_IF_ERROR(ParseRopeScaling(r, &c));

  // A sliding window equals full attention up to its length, so clamp the context to it.
  bool windowed = c.architecture == "mistral";
  if (c.architecture == "qwen2") {
    ASSIGN_OR_RETURN(windowed, r.BoolOr("use_sliding_window", false));
  }
  if (windowed && r.Find(root, "sliding_window") != nullptr) {
    ASSIGN_OR_RETURN(int window, r.PositiveInt("sliding_window"));
    c.context_length = std::min(c.context_length, window);
  }

  c.rope_style = RopeStyle::kHalfSplit;
  c.qkv_bias = c.architecture == "qwen2";
  return c;
}

StatusOr<ModelConfig> LoadHfConfig(const std::string& dir) {
  const std::string path = JoinPath(dir, "config.json");
  ASSIGN_OR_RETURN(const std::string text, ReadFileBounded(path, kMaxConfigBytes));
  return ParseHfConfig(text, path);
}

StatusOr<Model> LoadHfModel(const std::string& dir, WeightStorage storage) {
  Model model;
  ASSIGN_OR_RETURN(model.config, LoadHfConfig(dir));
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsModelFiles> opened, SafetensorsModelFiles::Open(dir));
  // Stored weights point into the files' mappings: the model shares ownership of the files.
  std::shared_ptr<const SafetensorsModelFiles> files = std::move(opened);

  if (files->FindTensor("lm_head.weight") == nullptr) model.config.tied_embeddings = true;
  // Each layer has at least nine tensors; bound the layer count by the files before allocating
  // anything per layer, so a corrupt num_hidden_layers cannot trigger a huge allocation.
  const std::vector<std::string> names = files->TensorNames();
  if (static_cast<uint64_t>(model.config.n_layers) * 9 > names.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": config.json says num_hidden_layers = ", model.config.n_layers,
                     ", but the weight files hold only ", names.size(), " tensors in all"));
  }
  std::vector<TensorSlot> slots = PlanTensors(model.config, &model);

  // Check everything before converting anything: a wrong file fails fast, not after minutes.
  for (const TensorSlot& slot : slots) {
    const SafetensorsTensorInfo* info = files->FindTensor(slot.name);
    if (info == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": tensor '", slot.name, "' is missing from the weight files"));
    }
    if (info->dtype != SafetensorsDtype::kF32 && info->dtype != SafetensorsDtype::kF16 &&
        info->dtype != SafetensorsDtype::kBF16) {
      return absl::UnimplementedError(absl::StrCat(dir, ": tensor '", slot.name, "' has dtype ",
                                                   Sv(SafetensorsDtypeName(info->dtype)),
                                                   "; only F32, F16 and BF16 are loaded"));
    }
    if (info->shape != slot.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir, ": tensor '", slot.name, "' has shape ", kernels::ShapeString(info->shape),
          " but config.json implies ", kernels::ShapeString(slot.shape)));
    }
  }
  for (const TensorSlot& slot : slots) {
    if (slot.matrix != nullptr && storage == WeightStorage::kStored) {
      // Checked above: every tensor is F32, F16 or BF16.
      const kernels::GgmlType type = *GgmlTypeOf(files->FindTensor(slot.name)->dtype);
      ASSIGN_OR_RETURN(std::span<const uint8_t> bytes, files->TensorData(slot.name));
      // safetensors does not align tensors: an F32 one behind an odd-sized F16 one is copied.
      const bool misaligned = type == kernels::GgmlType::kF32 &&
                              reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) != 0;
      if (!misaligned) {
        ASSIGN_OR_RETURN(*slot.matrix, kernels::Weight::Stored(type, bytes, slot.shape, files));
        continue;
      }
    }
    ASSIGN_OR_RETURN(kernels::Tensor tensor, files->LoadTensor(slot.name));
    if (slot.dst != nullptr) {
      *slot.dst = std::move(tensor);
    } else {
      *slot.matrix = kernels::Weight(std::move(tensor));
    }
  }
  return model;
}

}  // namespace ripplekv::worker

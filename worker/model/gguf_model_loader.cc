#include "worker/model/gguf_model_loader.h"

#include <cmath>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "base/strings.h"

namespace ripplekv::worker {

namespace {

constexpr std::string_view kSupportedArchitectures = "llama, mistral, qwen2";
constexpr std::string_view kRopeFreqsTensor = "rope_freqs.weight";
// Tensors of one transformer block (blk.N.<name>.weight).
constexpr int kTensorsPerLayer = 9;

bool IsSupportedArchitecture(std::string_view arch) {
  return arch == "llama" || arch == "mistral" || arch == "qwen2";
}

// Reads metadata for one architecture, turning "missing" and "wrong type" into InvalidArgument
// messages that say which key the loader needed.
class ConfigReader {
 public:
  ConfigReader(const GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

  std::string Key(std::string_view suffix) const { return Cat(arch_, ".", suffix); }

  // A required integer in [1, INT32_MAX].
  StatusOr<int> PositiveInt(std::string_view suffix) const {
    const std::string key = Key(suffix);
    if (file_.Find(key) == nullptr) return MissingKey(key);
    ASSIGN_OR_RETURN(int64_t v, file_.GetInt(key));
    return CheckPositive(key, v);
  }

  // An optional integer in [1, INT32_MAX]; `fallback` when absent.
  StatusOr<int> OptionalPositiveInt(std::string_view suffix, int fallback) const {
    if (file_.Find(Key(suffix)) == nullptr) return fallback;
    return PositiveInt(suffix);
  }

  // A float that must be finite and > 0; `fallback` when absent and fallback is set.
  StatusOr<float> PositiveFloat(std::string_view suffix, std::optional<float> fallback) const {
    const std::string key = Key(suffix);
    if (file_.Find(key) == nullptr) {
      if (fallback.has_value()) return *fallback;
      return MissingKey(key);
    }
    ASSIGN_OR_RETURN(double v, file_.GetFloat(key));
    if (!(v > 0.0) || !std::isfinite(static_cast<float>(v))) {
      return absl::InvalidArgumentError(
          Cat(file_.path(), ": metadata '", key, "' is ", v, "; must be a finite number > 0"));
    }
    return static_cast<float>(v);
  }

  Status MissingKey(std::string_view key) const {
    return absl::InvalidArgumentError(Cat(file_.path(), ": metadata key '", key,
                                          "' is missing (required for architecture '", arch_,
                                          "')"));
  }

 private:
  StatusOr<int> CheckPositive(std::string_view key, int64_t v) const {
    if (v < 1 || v > std::numeric_limits<int>::max()) {
      return absl::InvalidArgumentError(Cat(file_.path(), ": metadata '", key, "' is ", v,
                                            "; must be in [1, ", std::numeric_limits<int>::max(),
                                            "]"));
    }
    return static_cast<int>(v);
  }

  const GgufFile& file_;
  std::string arch_;
};

Status Inconsistent(const GgufFile& file, std::string_view what) {
  return absl::InvalidArgumentError(Cat(file.path(), ": ", what));
}

// Only llama3-style frequency factors (a tensor) are implemented; a scaling type in metadata
// would change every rotation, so it is refused unless it is a no-op.
Status CheckRopeScaling(const GgufFile& file, const ConfigReader& keys) {
  const std::string type_key = keys.Key("rope.scaling.type");
  const std::string factor_key = keys.Key("rope.scaling.factor");
  const std::string linear_key = keys.Key("rope.scale_linear");
  double factor = 1.0;
  if (file.Find(factor_key) != nullptr) {
    ASSIGN_OR_RETURN(factor, file.GetFloat(factor_key));
  }
  if (file.Find(type_key) != nullptr) {
    ASSIGN_OR_RETURN(std::string type, file.GetString(type_key));
    if (type != "none" && factor != 1.0) {
      return absl::UnimplementedError(
          Cat(file.path(), ": rope scaling '", type, "' (factor ", factor,
              ") is not supported; only Llama 3 frequency factors (", kRopeFreqsTensor, ") are"));
    }
  }
  if (file.Find(linear_key) != nullptr) {
    ASSIGN_OR_RETURN(double linear, file.GetFloat(linear_key));
    if (linear != 1.0) {
      return absl::UnimplementedError(Cat(file.path(), ": linear rope scaling (", linear_key, " = ",
                                          linear, ") is not supported"));
    }
  }
  return absl::OkStatus();
}

// One tensor the model needs: its GGUF name, the row-major shape it must have, where it goes.
struct Wanted {
  std::string name;
  kernels::Shape shape;
  kernels::Tensor* destination = nullptr;  // fp32 (norms, biases, RoPE factors), or
  kernels::Weight* matrix = nullptr;       // a weight matrix
};

kernels::Shape RowMajorShape(const GgufTensorInfo& info) {
  return kernels::Shape(info.dims.rbegin(), info.dims.rend());
}

Status CheckShape(const GgufFile& file, const GgufTensorInfo& info, const kernels::Shape& want) {
  kernels::Shape got = RowMajorShape(info);
  if (got == want) return absl::OkStatus();
  return absl::InvalidArgumentError(Cat(file.path(), ": tensor '", info.name, "' has shape ",
                                        kernels::ShapeString(got), ", expected ",
                                        kernels::ShapeString(want), " (row-major [ne1, ne0])"));
}

}  // namespace

StatusOr<ModelConfig> ReadGgufConfig(const GgufFile& file) {
  if (file.Find("general.architecture") == nullptr) {
    return absl::InvalidArgumentError(
        Cat(file.path(), ": metadata key 'general.architecture' is missing"));
  }
  ASSIGN_OR_RETURN(std::string arch, file.GetString("general.architecture"));
  if (!IsSupportedArchitecture(arch)) {
    return absl::InvalidArgumentError(Cat("unsupported architecture '", arch, "' in ", file.path(),
                                          "; supported: ", kSupportedArchitectures));
  }
  ModelConfig c;
  c.architecture = arch;
  if (file.Find("general.name") != nullptr) {
    ASSIGN_OR_RETURN(c.name, file.GetString("general.name"));
  }
  const ConfigReader keys(file, arch);
  ASSIGN_OR_RETURN(c.n_layers, keys.PositiveInt("block_count"));
  ASSIGN_OR_RETURN(c.d_model, keys.PositiveInt("embedding_length"));
  ASSIGN_OR_RETURN(c.d_ff, keys.PositiveInt("feed_forward_length"));
  ASSIGN_OR_RETURN(c.n_heads, keys.PositiveInt("attention.head_count"));
  ASSIGN_OR_RETURN(c.n_kv_heads, keys.OptionalPositiveInt("attention.head_count_kv", c.n_heads));
  ASSIGN_OR_RETURN(c.context_length, keys.PositiveInt("context_length"));
  ASSIGN_OR_RETURN(c.rms_eps, keys.PositiveFloat("attention.layer_norm_rms_epsilon", std::nullopt));
  ASSIGN_OR_RETURN(c.rope_theta, keys.PositiveFloat("rope.freq_base", 10000.0f));

  if (c.n_heads % c.n_kv_heads != 0) {
    return Inconsistent(file, Cat("attention.head_count ", c.n_heads,
                                  " is not a multiple of attention.head_count_kv ", c.n_kv_heads));
  }
  // head_dim: explicit key_length, else the rotary dimension count, else d_model / n_heads.
  const int default_head_dim = c.d_model / c.n_heads;
  ASSIGN_OR_RETURN(int rope_dims, keys.OptionalPositiveInt("rope.dimension_count", 0));
  ASSIGN_OR_RETURN(int key_length, keys.OptionalPositiveInt("attention.key_length", 0));
  ASSIGN_OR_RETURN(int value_length, keys.OptionalPositiveInt("attention.value_length", 0));
  c.head_dim = key_length != 0 ? key_length : rope_dims != 0 ? rope_dims : default_head_dim;
  if (key_length == 0 && rope_dims == 0 && c.d_model % c.n_heads != 0) {
    return Inconsistent(
        file, Cat("embedding_length ", c.d_model, " is not a multiple of attention.head_count ",
                  c.n_heads, " and no head size is given"));
  }
  if (value_length != 0 && value_length != c.head_dim) {
    return absl::UnimplementedError(Cat(file.path(), ": value head size ", value_length,
                                        " differs from key head size ", c.head_dim));
  }
  if (rope_dims != 0 && rope_dims != c.head_dim) {
    return absl::UnimplementedError(Cat(file.path(), ": partial rotary embedding (",
                                        keys.Key("rope.dimension_count"), " = ", rope_dims,
                                        ", head size ", c.head_dim, ") is not supported"));
  }
  if (c.head_dim % 2 != 0) {
    return Inconsistent(file, Cat("head size ", c.head_dim, " is odd; RoPE needs pairs"));
  }
  if (static_cast<int64_t>(c.n_heads) * c.head_dim > std::numeric_limits<int>::max()) {
    return Inconsistent(file, "attention.head_count * head size overflows");
  }
  RETURN_IF_ERROR(CheckRopeScaling(file, keys));

  // llama.cpp permutes Q/K rows of llama-family models at conversion so that adjacent pairs
  // rotate together; qwen2 keeps the HF (NeoX) half-split layout.
  c.rope_style = arch == "qwen2" ? RopeStyle::kHalfSplit : RopeStyle::kInterleaved;
  c.qkv_bias = arch == "qwen2";

  const GgufTensorInfo* embd = file.FindTensor("token_embd.weight");
  if (embd == nullptr) {
    return Inconsistent(file, "tensor 'token_embd.weight' is missing");
  }
  if (embd->dims.size() != 2 || embd->dims[1] > std::numeric_limits<int>::max()) {
    return Inconsistent(file, Cat("tensor 'token_embd.weight' has shape ",
                                  kernels::ShapeString(RowMajorShape(*embd)),
                                  ", expected [vocab_size, ", c.d_model, "]"));
  }
  c.vocab_size = static_cast<int>(embd->dims[1]);
  ASSIGN_OR_RETURN(int declared_vocab, keys.OptionalPositiveInt("vocab_size", c.vocab_size));
  if (declared_vocab != c.vocab_size) {
    return Inconsistent(file, Cat(keys.Key("vocab_size"), " is ", declared_vocab,
                                  " but tensor 'token_embd.weight' has ", c.vocab_size, " rows"));
  }
  c.tied_embeddings = file.FindTensor("output.weight") == nullptr;
  return c;
}

StatusOr<Model> LoadGgufModel(const GgufFile& file, WeightStorage storage,
                              std::shared_ptr<const void> owner) {
  if (storage == WeightStorage::kStored && owner == nullptr) {
    return absl::InvalidArgumentError(
        Cat(file.path(), ": stored weights need an owner that keeps the file mapped"));
  }
  Model model;
  ASSIGN_OR_RETURN(model.config, ReadGgufConfig(file));
  const ModelConfig& c = model.config;
  if (static_cast<uint64_t>(c.n_layers) > file.tensors().size() / kTensorsPerLayer) {
    return Inconsistent(file, Cat(c.architecture, ".block_count is ", c.n_layers,
                                  " but the file has only ", file.tensors().size(), " tensors"));
  }
  const int64_t d = c.d_model, q_out = int64_t{c.n_heads} * c.head_dim,
                kv_out = int64_t{c.n_kv_heads} * c.head_dim, ff = c.d_ff, vocab = c.vocab_size;

  std::vector<Wanted> wanted;
  wanted.push_back({"token_embd.weight", {vocab, d}, nullptr, &model.tok_embeddings});
  wanted.push_back({"output_norm.weight", {d}, &model.output_norm});
  if (!c.tied_embeddings) wanted.push_back({"output.weight", {vocab, d}, nullptr, &model.output});
  if (file.FindTensor(kRopeFreqsTensor) != nullptr) {
    wanted.push_back({std::string(kRopeFreqsTensor), {c.head_dim / 2}, &model.rope_freq_factors});
  }
  model.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights& w = model.layers[l];
    auto name = [l](std::string_view part) { return Cat("blk.", l, ".", part); };
    wanted.push_back({name("attn_norm.weight"), {d}, &w.attn_norm});
    wanted.push_back({name("attn_q.weight"), {q_out, d}, nullptr, &w.wq});
    wanted.push_back({name("attn_k.weight"), {kv_out, d}, nullptr, &w.wk});
    wanted.push_back({name("attn_v.weight"), {kv_out, d}, nullptr, &w.wv});
    wanted.push_back({name("attn_output.weight"), {d, q_out}, nullptr, &w.wo});
    if (c.qkv_bias) {
      wanted.push_back({name("attn_q.bias"), {q_out}, &w.bq});
      wanted.push_back({name("attn_k.bias"), {kv_out}, &w.bk});
      wanted.push_back({name("attn_v.bias"), {kv_out}, &w.bv});
    }
    wanted.push_back({name("ffn_norm.weight"), {d}, &w.ffn_norm});
    wanted.push_back({name("ffn_gate.weight"), {ff, d}, nullptr, &w.w_gate});
    wanted.push_back({name("ffn_up.weight"), {ff, d}, nullptr, &w.w_up});
    wanted.push_back({name("ffn_down.weight"), {d, ff}, nullptr, &w.w_down});
  }

  // Check everything before the (slow) dequantization, so a bad file fails fast.
  std::vector<const GgufTensorInfo*> infos;
  infos.reserve(wanted.size());
  std::set<std::string_view> used;
  for (const Wanted& want : wanted) {
    const GgufTensorInfo* info = file.FindTensor(want.name);
    if (info == nullptr) {
      return Inconsistent(file, Cat("tensor '", want.name, "' is missing (expected shape ",
                                    kernels::ShapeString(want.shape), ")"));
    }
    RETURN_IF_ERROR(CheckShape(file, *info, want.shape));
    infos.push_back(info);
    used.insert(info->name);
  }
  for (const GgufTensorInfo& info : file.tensors()) {
    if (!used.contains(info.name)) {
      return Inconsistent(file,
                          Cat("unexpected tensor '", info.name, "' (not used by architecture '",
                              c.architecture, "' with ", c.n_layers, " layers)"));
    }
  }

  for (size_t i = 0; i < wanted.size(); ++i) {
    if (wanted[i].destination != nullptr) {
      ASSIGN_OR_RETURN(*wanted[i].destination, file.LoadTensor(*infos[i]));
    } else if (storage == WeightStorage::kF32) {
      ASSIGN_OR_RETURN(kernels::Tensor expanded, file.LoadTensor(*infos[i]));
      *wanted[i].matrix = kernels::Weight(std::move(expanded));
    } else {
      ASSIGN_OR_RETURN(*wanted[i].matrix,
                       kernels::Weight::Stored(infos[i]->type, file.TensorData(*infos[i]),
                                               wanted[i].shape, owner));
    }
  }
  return model;
}

}  // namespace ripplekv::worker

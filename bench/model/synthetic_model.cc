#include "bench/model/synthetic_model.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <future>
#include <numbers>
#include <vector>

#include "base/strings.h"
#include "bench/model/gguf_writer.h"
#include "kernels/dequant/dequant.h"
#include "kernels/dequant/quantize.h"

namespace ripplekv::bench {

namespace {

constexpr std::array<std::string_view, 3> kLlama3Specials = {"<|begin_of_text|>", "<|end_of_text|>",
                                                             "<|eot_id|>"};
constexpr std::array<std::string_view, 3> kChatMlSpecials = {"<|endoftext|>", "<|im_start|>",
                                                             "<|im_end|>"};
constexpr std::array<std::string_view, 3> kSentencePieceSpecials = {"<unk>", "<s>", "</s>"};

// Published configs (config.json of each model; GGUF context_length as llama.cpp converts it).
constexpr std::array<SyntheticShape, 5> kShapes = {{
    {.name = "llama3-8b",
     .description = "Llama 3.1 8B",
     .architecture = "llama",
     .n_layers = 32,
     .d_model = 4096,
     .d_ff = 14336,
     .n_heads = 32,
     .n_kv_heads = 8,
     .vocab_size = 128256,
     .context_length = 131072,
     .rms_eps = 1e-5f,
     .rope_theta = 500000.0f,
     .llama3_rope = true,
     .tokenizer_pre = "llama-bpe",
     .specials = kLlama3Specials,
     .bos = 0,
     .eos = 1,
     .eot = 2,
     .add_bos = true},
    {.name = "llama3-70b",
     .description = "Llama 3.1 70B",
     .architecture = "llama",
     .n_layers = 80,
     .d_model = 8192,
     .d_ff = 28672,
     .n_heads = 64,
     .n_kv_heads = 8,
     .vocab_size = 128256,
     .context_length = 131072,
     .rms_eps = 1e-5f,
     .rope_theta = 500000.0f,
     .llama3_rope = true,
     .tokenizer_pre = "llama-bpe",
     .specials = kLlama3Specials,
     .bos = 0,
     .eos = 1,
     .eot = 2,
     .add_bos = true},
    {.name = "qwen2-7b",
     .description = "Qwen2 7B",
     .architecture = "qwen2",
     .n_layers = 28,
     .d_model = 3584,
     .d_ff = 18944,
     .n_heads = 28,
     .n_kv_heads = 4,
     .vocab_size = 152064,
     .context_length = 32768,
     .rms_eps = 1e-6f,
     .rope_theta = 1000000.0f,
     .qkv_bias = true,
     .tokenizer_pre = "qwen2",
     .specials = kChatMlSpecials,
     .bos = 0,
     .eos = 0,
     .eot = 2,
     .add_bos = false},
    // v0.1 (rope theta 10000, vocabulary 32000); its 4096-token sliding window is not modelled.
    {.name = "mistral-7b",
     .description = "Mistral 7B v0.1",
     .architecture = "llama",
     .n_layers = 32,
     .d_model = 4096,
     .d_ff = 14336,
     .n_heads = 32,
     .n_kv_heads = 8,
     .vocab_size = 32000,
     .context_length = 32768,
     .rms_eps = 1e-5f,
     .rope_theta = 10000.0f,
     .tokenizer_pre = "default",
     .specials = kSentencePieceSpecials,
     .bos = 1,
     .eos = 2,
     .add_bos = true},
    {.name = "smollm2-135m",
     .description = "SmolLM2 135M",
     .architecture = "llama",
     .n_layers = 30,
     .d_model = 576,
     .d_ff = 1536,
     .n_heads = 9,
     .n_kv_heads = 3,
     .vocab_size = 49152,
     .context_length = 8192,
     .rms_eps = 1e-5f,
     .rope_theta = 100000.0f,
     .tied_embeddings = true,
     .tokenizer_pre = "smollm",
     .specials = kChatMlSpecials,
     .bos = 1,
     .eos = 2,
     .add_bos = false},
}};

// llama.cpp's LLAMA_FTYPE for a file whose matrices are `type`.
uint32_t FileType(kernels::GgmlType type) {
  switch (type) {
    case kernels::GgmlType::kF32:
      return 0;
    case kernels::GgmlType::kF16:
      return 1;
    case kernels::GgmlType::kQ4_0:
      return 2;
    case kernels::GgmlType::kQ8_0:
      return 7;
    case kernels::GgmlType::kBF16:
      return 32;
    default:
      return 0;
  }
}

// GPT-2's byte-to-unicode table: printable bytes stand for themselves, the others for code
// points from 256 up, in byte order. Returns the UTF-8 text of byte b's token.
std::vector<std::string> ByteTokens() {
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  std::vector<std::string> out(256);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const int cp = printable(b) ? b : next++;
    std::string s;
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else {  // every code point here is < 0x800: two bytes
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    out[b] = std::move(s);
  }
  return out;
}

// Llama 3.1 rope frequency factors, as llama.cpp's convert_hf_to_gguf.py computes them
// (factor 8, low_freq_factor 1, high_freq_factor 4, original context 8192).
std::vector<float> Llama3RopeFactors(int head_dim, double theta) {
  constexpr double kFactor = 8.0, kLow = 1.0, kHigh = 4.0, kOldContext = 8192.0;
  const double low_wavelen = kOldContext / kLow, high_wavelen = kOldContext / kHigh;
  std::vector<float> out;
  for (int i = 0; i < head_dim; i += 2) {
    const double freq = 1.0 / std::pow(theta, static_cast<double>(i) / head_dim);
    const double wavelen = 2.0 * std::numbers::pi / freq;
    double f;
    if (wavelen < high_wavelen) {
      f = 1.0;
    } else if (wavelen > low_wavelen) {
      f = kFactor;
    } else {
      const double smooth = (kOldContext / wavelen - kLow) / (kHigh - kLow);
      f = 1.0 / ((1.0 - smooth) / kFactor + smooth);
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256+ (Blackman & Vigna), seeded by SplitMix64; its top bits are the good ones, and
// only the top 23 of each 32-bit half are used.
class Xoshiro256Plus {
 public:
  explicit Xoshiro256Plus(uint64_t seed) {
    for (uint64_t& s : s_) s = SplitMix64(seed);
  }
  uint64_t Next() {
    const uint64_t result = s_[0] + s_[3];
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = (s_[3] << 45) | (s_[3] >> 19);
    return result;
  }

 private:
  uint64_t s_[4];
};

// [1, 2) from the top 23 bits of a 32-bit word.
inline float UnitFloat(uint32_t bits) { return std::bit_cast<float>((bits >> 9) | 0x3F800000u); }

// n values uniform in [-a, a) from the stream of (seed, tensor, row).
void FillUniform(uint64_t seed, uint64_t tensor, uint64_t row, float a, float* out, int64_t n) {
  uint64_t key = seed;
  const uint64_t k1 = SplitMix64(key) ^ (tensor * 0xD1B54A32D192ED03ull);
  uint64_t key2 = k1 ^ (row * 0xA0761D6478BD642Full);
  Xoshiro256Plus rng(SplitMix64(key2));
  const float scale = 2.0f * a;
  int64_t i = 0;
  for (; i + 1 < n; i += 2) {
    const uint64_t r = rng.Next();
    out[i] = (UnitFloat(static_cast<uint32_t>(r >> 32)) - 1.5f) * scale;
    out[i + 1] = (UnitFloat(static_cast<uint32_t>(r)) - 1.5f) * scale;
  }
  if (i < n) out[i] = (UnitFloat(static_cast<uint32_t>(rng.Next() >> 32)) - 1.5f) * scale;
}

enum class Fill { kUniform, kOnes, kRopeFactors };

struct PlannedTensor {
  std::string name;
  std::vector<int64_t> dims;  // GGUF order
  kernels::GgmlType type;
  Fill fill;
  float std = 0.0f;  // kUniform
};

}  // namespace

std::span<const SyntheticShape> SyntheticShapes() { return kShapes; }

StatusOr<SyntheticShape> FindSyntheticShape(std::string_view name) {
  std::string known;
  for (const SyntheticShape& s : kShapes) {
    if (s.name == name) return s;
    known += known.empty() ? "" : ", ";
    known += s.name;
  }
  return absl::InvalidArgumentError(Cat("unknown model shape '", name, "' (known: ", known, ")"));
}

StatusOr<SyntheticModelStats> WriteSyntheticModel(const std::string& path,
                                                  const SyntheticModelOptions& options) {
  const SyntheticShape& shape = options.shape;
  const int n_layers = options.n_layers != 0 ? options.n_layers : shape.n_layers;
  const int vocab = options.vocab_size != 0 ? options.vocab_size : shape.vocab_size;
  const int n_specials = static_cast<int>(shape.specials.size());
  if (n_layers < 1) {
    return absl::InvalidArgumentError(Cat("layer count ", n_layers, " must be >= 1"));
  }
  if (vocab < n_specials + 256) {
    return absl::InvalidArgumentError(Cat("vocabulary size ", vocab, " is below the ",
                                          n_specials + 256, " tokens of the byte-level tokenizer"));
  }
  if (!kernels::CanQuantize(options.type)) {
    return absl::InvalidArgumentError(Cat("cannot write matrices as ",
                                          kernels::TraitsOf(options.type).name,
                                          " (q4_0, q8_0, f16, bf16, f32 can be written)"));
  }
  if (shape.n_heads < 1 || shape.n_kv_heads < 1 || shape.d_model % shape.n_heads != 0 ||
      shape.n_heads % shape.n_kv_heads != 0) {
    return absl::InvalidArgumentError(Cat("shape '", shape.name, "' has inconsistent heads"));
  }
  if (options.chunk_bytes < 1) {
    return absl::InvalidArgumentError(Cat("chunk size ", options.chunk_bytes, " must be >= 1"));
  }
  const int64_t d = shape.d_model, ff = shape.d_ff, head_dim = d / shape.n_heads;
  const int64_t q_out = shape.n_heads * head_dim, kv_out = shape.n_kv_heads * head_dim;
  const kernels::GgmlType mat = options.type, f32 = kernels::GgmlType::kF32;

  // The tensors, in llama.cpp's order.
  std::vector<PlannedTensor> plan;
  const float in_d = 1.0f / std::sqrt(static_cast<float>(d));
  const float residual = 1.0f / std::sqrt(2.0f * static_cast<float>(n_layers));
  plan.push_back({"token_embd.weight", {d, vocab}, mat, Fill::kUniform, in_d});
  if (shape.llama3_rope)
    plan.push_back({"rope_freqs.weight", {head_dim / 2}, f32, Fill::kRopeFactors});
  for (int l = 0; l < n_layers; ++l) {
    auto name = [l](std::string_view part) { return Cat("blk.", l, ".", part); };
    plan.push_back({name("attn_norm.weight"), {d}, f32, Fill::kOnes});
    plan.push_back({name("attn_q.weight"), {d, q_out}, mat, Fill::kUniform, in_d});
    if (shape.qkv_bias) plan.push_back({name("attn_q.bias"), {q_out}, f32, Fill::kUniform, 0.02f});
    plan.push_back({name("attn_k.weight"), {d, kv_out}, mat, Fill::kUniform, in_d});
    if (shape.qkv_bias) plan.push_back({name("attn_k.bias"), {kv_out}, f32, Fill::kUniform, 0.02f});
    plan.push_back({name("attn_v.weight"), {d, kv_out}, mat, Fill::kUniform, in_d});
    if (shape.qkv_bias) plan.push_back({name("attn_v.bias"), {kv_out}, f32, Fill::kUniform, 0.02f});
    plan.push_back({name("attn_output.weight"),
                    {q_out, d},
                    mat,
                    Fill::kUniform,
                    residual / std::sqrt(static_cast<float>(q_out))});
    plan.push_back({name("ffn_norm.weight"), {d}, f32, Fill::kOnes});
    plan.push_back({name("ffn_gate.weight"), {d, ff}, mat, Fill::kUniform, in_d});
    plan.push_back({name("ffn_up.weight"), {d, ff}, mat, Fill::kUniform, in_d});
    plan.push_back({name("ffn_down.weight"),
                    {ff, d},
                    mat,
                    Fill::kUniform,
                    residual / std::sqrt(static_cast<float>(ff))});
  }
  plan.push_back({"output_norm.weight", {d}, f32, Fill::kOnes});
  if (!shape.tied_embeddings)
    plan.push_back({"output.weight", {d, vocab}, mat, Fill::kUniform, in_d});

  GgufStreamWriter writer({.sync = options.sync});
  const std::string arch(shape.architecture);
  auto key = [&arch](std::string_view suffix) { return Cat(arch, ".", suffix); };
  writer.SetString("general.architecture", arch);
  writer.SetString("general.name", Cat("synthetic ", shape.name));
  writer.SetString("general.description", Cat("Random weights in the shape of ", shape.description,
                                              " (bench/make-model)"));
  writer.SetUint32("general.file_type", FileType(mat));
  writer.SetUint32("general.quantization_version", 2);
  writer.SetString("ripplekv.synthetic.shape", shape.name);
  writer.SetUint64("ripplekv.synthetic.seed", options.seed);
  writer.SetUint32(key("block_count"), static_cast<uint32_t>(n_layers));
  writer.SetUint32(key("context_length"), static_cast<uint32_t>(shape.context_length));
  writer.SetUint32(key("embedding_length"), static_cast<uint32_t>(d));
  writer.SetUint32(key("feed_forward_length"), static_cast<uint32_t>(ff));
  writer.SetUint32(key("attention.head_count"), static_cast<uint32_t>(shape.n_heads));
  writer.SetUint32(key("attention.head_count_kv"), static_cast<uint32_t>(shape.n_kv_heads));
  writer.SetFloat32(key("rope.freq_base"), shape.rope_theta);
  writer.SetFloat32(key("attention.layer_norm_rms_epsilon"), shape.rms_eps);
  writer.SetUint32(key("rope.dimension_count"), static_cast<uint32_t>(head_dim));
  writer.SetUint32(key("vocab_size"), static_cast<uint32_t>(vocab));

  {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    tokens.reserve(static_cast<size_t>(vocab));
    types.reserve(static_cast<size_t>(vocab));
    for (std::string_view s : shape.specials) {
      tokens.emplace_back(s);
      types.push_back(3);  // control
    }
    for (std::string& s : ByteTokens()) {
      tokens.push_back(std::move(s));
      types.push_back(1);  // normal
    }
    for (int i = 0; static_cast<int>(tokens.size()) < vocab; ++i) {
      tokens.push_back(Cat("<unused_", i, ">"));
      types.push_back(5);  // unused
    }
    writer.SetString("tokenizer.ggml.model", "gpt2");
    writer.SetString("tokenizer.ggml.pre", shape.tokenizer_pre);
    writer.SetStringArray("tokenizer.ggml.tokens", tokens);
    writer.SetInt32Array("tokenizer.ggml.token_type", types);
    writer.SetStringArray("tokenizer.ggml.merges", std::span<const std::string>());
    if (shape.bos >= 0) writer.SetUint32("tokenizer.ggml.bos_token_id", shape.bos);
    if (shape.eos >= 0) writer.SetUint32("tokenizer.ggml.eos_token_id", shape.eos);
    if (shape.eot >= 0) writer.SetUint32("tokenizer.ggml.eot_token_id", shape.eot);
    writer.SetBool("tokenizer.ggml.add_bos_token", shape.add_bos);
    writer.SetBool("tokenizer.ggml.add_eos_token", false);
  }

  SyntheticModelStats stats;
  for (const PlannedTensor& t : plan) {
    RETURN_IF_ERROR(writer.AddTensor(t.name, t.dims, t.type));
    int64_t n = 1;
    for (int64_t x : t.dims) n *= x;
    stats.parameters += n;
  }
  RETURN_IF_ERROR(writer.Open(path));
  auto report = [&] {
    if (options.progress) options.progress(writer.bytes_written(), writer.file_size());
  };

  // Two buffers: while one is written (a background thread: the page-cache copy is a large
  // share of the time), the next chunk is generated into the other.
  std::vector<uint8_t> buffers[2];
  int next_buffer = 0;
  std::future<Status> pending;  // the write in flight, if valid
  auto wait_pending = [&]() -> Status {
    if (!pending.valid()) return absl::OkStatus();
    Status s = pending.get();
    report();
    return s;
  };
  auto submit = [&](std::vector<uint8_t>& chunk) -> Status {
    RETURN_IF_ERROR(wait_pending());
    pending = std::async(std::launch::async, [&writer, &chunk] { return writer.Write(chunk); });
    next_buffer ^= 1;
    return absl::OkStatus();
  };
  // On an early return the write in flight must end before `writer` and the buffers go.
  struct Drain {
    std::future<Status>& f;
    ~Drain() {
      if (f.valid()) f.wait();
    }
  } drain{pending};

  const int threads = options.num_threads > 0 ? options.num_threads : omp_get_max_threads();
  for (size_t ti = 0; ti < plan.size(); ++ti) {
    const PlannedTensor& t = plan[ti];
    const int64_t row_elems = t.dims[0];
    const int64_t rows = t.dims.size() > 1 ? t.dims[1] : 1;
    if (t.fill != Fill::kUniform) {
      const std::vector<float> values =
          t.fill == Fill::kOnes ? std::vector<float>(static_cast<size_t>(row_elems), 1.0f)
                                : Llama3RopeFactors(static_cast<int>(head_dim), shape.rope_theta);
      std::vector<uint8_t>& chunk = buffers[next_buffer];  // not the one in flight
      chunk.resize(static_cast<size_t>(row_elems) * sizeof(float));
      RETURN_IF_ERROR(kernels::QuantizeRow(f32, values, chunk));
      RETURN_IF_ERROR(submit(chunk));
      continue;
    }
    ASSIGN_OR_RETURN(const int64_t row_bytes, kernels::GgmlBytes(t.type, row_elems));
    const int64_t rows_per_chunk = std::max<int64_t>(1, options.chunk_bytes / row_bytes);
    const float a = std::sqrt(3.0f) * t.std;
    for (int64_t first = 0; first < rows; first += rows_per_chunk) {
      const int64_t n_rows = std::min(rows_per_chunk, rows - first);
      std::vector<uint8_t>& chunk = buffers[next_buffer];  // not the one in flight
      chunk.resize(static_cast<size_t>(n_rows * row_bytes));
      std::atomic<bool> failed{false};
      // Small chunks (SmolLM2's matrices) are not worth a parallel region: on a loaded machine
      // its barrier costs more than the work.
      const bool parallel = threads > 1 && n_rows * row_elems >= (int64_t{1} << 22);
#pragma omp parallel num_threads(threads) if (parallel)
      {
        std::vector<float> row(static_cast<size_t>(row_elems));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < n_rows; ++r) {
          FillUniform(options.seed, ti, static_cast<uint64_t>(first + r), a, row.data(), row_elems);
          const std::span<uint8_t> dst(chunk.data() + r * row_bytes,
                                       static_cast<size_t>(row_bytes));
          if (!kernels::QuantizeRow(t.type, row, dst).ok()) failed = true;
        }
      }
      if (failed) {
        return absl::InternalError(Cat("quantizing tensor '", t.name, "' failed"));
      }
      RETURN_IF_ERROR(submit(chunk));
    }
  }
  RETURN_IF_ERROR(wait_pending());
  RETURN_IF_ERROR(writer.Finish());
  report();
  stats.file_bytes = writer.file_size();
  stats.tensors = static_cast<int>(plan.size());
  stats.n_layers = n_layers;
  stats.vocab_size = vocab;
  return stats;
}

}  // namespace ripplekv::bench

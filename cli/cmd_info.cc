// ripplekv info MODEL [--json] [--hash] [--context-len C] [--probe W] [--trials T] [--threads N]:
// architecture, shapes, tensor types, tokenizer, the memory a calibration would need
// (docs/MEMORY.md) and, with --hash, the model hash. Reads headers only (the hash reads the whole
// file, hence opt-in).

#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/model_session.h"
#include "nlohmann/json.hpp"
#include "worker/calibration/memory_estimate.h"
#include "worker/model/gguf_reader.h"
#include "worker/model/model_hash.h"
#include "worker/model/model_loader.h"
#include "worker/tokenizer/tokenizer_gguf.h"

namespace ripplekv::cli {

namespace {
struct InfoArgs {
  std::string model;
  bool json = false;
  bool hash = false;  // --hash: SHA-256 of the whole file (seconds on a multi-GB model)
  // The calibration the memory estimate is for (calibrate's defaults).
  int context_len = 512;
  int probe = 32;
  int trials = 2;
  int threads = DefaultThreads();
};

// "123456789 (117.7 MiB)" for the table.
std::string BytesCell(const nlohmann::ordered_json& value) {
  return absl::StrCat(value.dump(), " (", worker::FormatBytes(value.get<int64_t>()), ")");
}

// A GGUF file's tokenizer facts come from its metadata alone (TokenizerFactsFromGguf: the token
// strings are neither copied nor indexed); a Hugging Face directory's from its whole tokenizer
// (tokenizer.json).
StatusOr<worker::TokenizerFacts> ReadTokenizerFacts(const std::string& path,
                                                    worker::ModelFormat format) {
  if (format == worker::ModelFormat::kGguf) {
    ASSIGN_OR_RETURN(std::unique_ptr<worker::GgufFile> file, worker::GgufFile::Open(path));
    return worker::TokenizerFactsFromGguf(*file);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<worker::Tokenizer> tokenizer, worker::OpenTokenizer(path));
  return worker::TokenizerFacts{.vocab_size = tokenizer->vocab_size(),
                                .bos_id = tokenizer->bos_id(),
                                .eos_id = tokenizer->eos_id(),
                                .add_bos = tokenizer->add_bos()};
}

int RunInfo(const InfoArgs& args) {
  auto summary = worker::DescribeModel(args.model);
  if (!summary.ok()) return ReportError(summary.status());
  const worker::ModelConfig& c = summary->config;
  nlohmann::ordered_json j;
  j["path"] = args.model;
  j["format"] = summary->format == worker::ModelFormat::kGguf ? "gguf" : "safetensors";
  if (summary->format == worker::ModelFormat::kGguf) j["gguf_version"] = summary->gguf_version;
  j["tensor_types"] = summary->tensor_types;
  j["parameters"] = summary->parameters;
  j["name"] = c.name;
  j["architecture"] = c.architecture;
  j["layers"] = c.n_layers;
  j["d_model"] = c.d_model;
  j["heads"] = c.n_heads;
  j["kv_heads"] = c.n_kv_heads;
  j["head_dim"] = c.head_dim;
  j["d_ff"] = c.d_ff;
  j["vocab_size"] = c.vocab_size;
  j["context_length"] = c.context_length;
  j["rope_theta"] = c.rope_theta;
  j["rope_style"] = c.rope_style == worker::RopeStyle::kInterleaved ? "interleaved" : "half-split";
  j["rms_eps"] = c.rms_eps;
  j["tied_embeddings"] = c.tied_embeddings;
  j["qkv_bias"] = c.qkv_bias;
  // KV cache cost per token: K and V, every layer and KV head, at fp16 as most servers keep it.
  j["kv_bytes_per_token_fp16"] = 2LL * c.n_layers * c.n_kv_heads * c.head_dim * 2;
  const StatusOr<worker::TokenizerFacts> tokenizer =
      ReadTokenizerFacts(args.model, summary->format);
  if (!tokenizer.ok()) return ReportError(tokenizer.status());
  j["tokenizer"] = {{"vocab_size", tokenizer->vocab_size},
                    {"bos_id", tokenizer->bos_id},
                    {"eos_id", tokenizer->eos_id},
                    {"add_bos", tokenizer->add_bos}};
  // Memory (docs/MEMORY.md): weights from the tensor table, the rest from the shape.
  j["weight_bytes_stored"] = summary->stored_weight_bytes;
  j["weight_bytes_f32"] = summary->f32_weight_bytes;
  const worker::MemoryOptions memory{.threads = args.threads,
                                     .context_len = args.context_len,
                                     .probe_len = args.probe,
                                     .trials = args.trials};
  const worker::MemoryEstimate stored =
      worker::EstimateCalibrationMemory(c, summary->stored_weight_bytes, memory);
  worker::MemoryOptions f32_memory = memory;
  f32_memory.weights = worker::WeightStorage::kF32;
  f32_memory.f32_load_mapped_bytes = summary->stored_weight_bytes;
  const worker::MemoryEstimate f32 =
      worker::EstimateCalibrationMemory(c, summary->f32_weight_bytes, f32_memory);
  j["memory_params"] = {{"context_len", args.context_len},
                        {"probe_len", args.probe},
                        {"trials", args.trials},
                        {"threads", args.threads}};
  j["scratch_per_thread_bytes"] = stored.scratch_per_thread_bytes;  // 0 with --weights f32
  j["kv_cache_bytes"] = stored.kv_cache_bytes;
  j["calibration_scratch_bytes"] = stored.calibration_bytes;
  j["tokenizer_bytes"] = stored.tokenizer_bytes;
  j["process_bytes"] = stored.process_bytes;
  j["calibration_memory_bytes_stored"] = stored.total_bytes();
  j["calibration_memory_bytes_f32"] = f32.total_bytes();
  if (args.hash) {
    auto hash = worker::ModelHash(args.model);
    if (!hash.ok()) return ReportError(hash.status());
    j["sha256"] = *hash;
  }

  if (args.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  for (const auto& [key, value] : j.items()) {
    const std::string cell = value.is_string() ? value.get<std::string>()
                             : key.ends_with("_bytes") || key.find("_bytes_") != std::string::npos
                                 ? BytesCell(value)
                                 : value.dump();
    std::printf("%-32s %s\n", key.c_str(), cell.c_str());
  }
  return kExitOk;
}
}  // namespace

void AddInfoCommand(CLI::App& app, Action& run) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* cmd = app.add_subcommand(
      "info", "Describe a model from its headers: architecture, shapes, tokenizer, memory");
  cmd->add_option("model", args->model, "GGUF file or Hugging Face model directory")->required();
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->add_flag("--hash", args->hash,
                "Also compute the model hash (SHA-256 of the whole file: reads every byte)");
  cmd->add_option("--context-len", args->context_len, "Memory estimate: context tokens C")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--probe", args->probe, "Memory estimate: probe tokens W")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--trials", args->trials, "Memory estimate: trials T per (sample, layer)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--threads", args->threads, "Memory estimate: CPU threads")
      ->check(CLI::Range(1, 1024));
  cmd->callback([args, &run] { run = [args] { return RunInfo(*args); }; });
}

}  // namespace ripplekv::cli

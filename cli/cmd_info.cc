// ripplekv info MODEL [--json]: architecture, shapes, tensor types, tokenizer and hash.

#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/model_session.h"
#include "nlohmann/json.hpp"
#include "worker/model/model_hash.h"
#include "worker/model/model_loader.h"

namespace ripplekv::cli {

namespace {
struct InfoArgs {
  std::string model;
  bool json = false;
};

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
  auto tokenizer = OpenTokenizer(args.model);
  if (!tokenizer.ok()) return ReportError(tokenizer.status());
  j["tokenizer"] = {{"vocab_size", (*tokenizer)->vocab_size()},
                    {"bos_id", (*tokenizer)->bos_id()},
                    {"eos_id", (*tokenizer)->eos_id()},
                    {"add_bos", (*tokenizer)->add_bos()}};
  auto hash = worker::ModelHash(args.model);
  if (!hash.ok()) return ReportError(hash.status());
  j["sha256"] = *hash;

  if (args.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  for (const auto& [key, value] : j.items()) {
    std::printf("%-24s %s\n", key.c_str(),
                value.is_string() ? value.get<std::string>().c_str() : value.dump().c_str());
  }
  return kExitOk;
}
}  // namespace

void AddInfoCommand(CLI::App& app, Action& run) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* cmd = app.add_subcommand("info", "Describe a model: architecture, shapes, tokenizer, hash");
  cmd->add_option("model", args->model, "GGUF file or Hugging Face model directory")->required();
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->callback([args, &run] { run = [args] { return RunInfo(*args); }; });
}

}  // namespace ripplekv::cli

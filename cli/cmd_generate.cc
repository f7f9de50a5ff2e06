// ripplekv generate --model M --prompt P [--chat] [-n N] [--temp T] [--top-k K] [--top-p P]
//                   [--seed S] [--threads N] [--json]
// Streams the generated text to stdout (or prints one JSON object with --json); timing on stderr.

#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/model_session.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#include "worker/engine/generator.h"
#include "worker/tokenizer/chat_template.h"

namespace ripplekv::cli {

namespace {

struct GenerateArgs {
  std::string model;
  std::string prompt;
  std::string system;
  bool chat = false;
  bool no_system = false;
  int n = 128;
  float temp = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  int threads = DefaultThreads();
  ModelFlags model_flags;  // --weights, --device, --device-weights
  bool json = false;
};

int RunGenerate(const GenerateArgs& args) {
  auto session_or = OpenModel(args.model, args.threads, args.model_flags);
  if (!session_or.ok()) return ReportError(session_or.status());
  worker::Engine& s = **session_or;

  std::string text = args.prompt;
  worker::EncodeOptions encode;
  if (args.chat) {
    // The model's own template decides the default system prompt (SmolLM2-Instruct adds one);
    // --system replaces it, --no-system drops it.
    std::string default_system;
    if (!args.no_system && !s.tokenizer->chat_template().empty()) {
      auto info = worker::DetectChatTemplate(s.tokenizer->chat_template());
      if (!info.ok()) return ReportError(info.status());
      default_system = info->default_system_prompt;
    }
    std::vector<worker::ChatMessage> messages;
    if (!args.system.empty()) messages.push_back({"system", args.system});
    messages.push_back({"user", args.prompt});
    text = worker::ApplyChatML(messages, /*add_generation_prompt=*/true, default_system);
    encode.parse_special = true;
  }
  const std::vector<int32_t> prompt = s.tokenizer->Encode(text, encode);

  worker::GenerateOptions options;
  options.max_new_tokens = args.n;
  options.sampler = {
      .temperature = args.temp, .top_k = args.top_k, .top_p = args.top_p, .seed = args.seed};
  const worker::Tokenizer* tok = s.tokenizer.get();
  options.is_stop = [tok](int32_t id) { return tok->IsEog(id); };

  auto on_token = [&](int32_t id) {
    if (args.json || !s.primary()) return;  // --tp: rank 0 prints
    const std::string piece = tok->TokenToPiece(id);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  };
  auto result = worker::Generate(*s.transformer, prompt, options, on_token);
  if (!result.ok()) return ReportError(result.status());
  if (!s.primary()) return kExitOk;
  const double prefill_tps = prompt.size() / std::max(result->prefill_seconds, 1e-9);
  const double decode_tps =
      result->tokens.size() > 1 ? (result->tokens.size() - 1) / result->decode_seconds : 0.0;
  if (args.json) {
    nlohmann::json j = {{"prompt_tokens", prompt.size()},    {"prompt_token_ids", prompt},
                        {"tokens", result->tokens},          {"text", tok->Decode(result->tokens)},
                        {"stopped_at_eos", result->stopped}, {"prefill_tokens_per_s", prefill_tps},
                        {"decode_tokens_per_s", decode_tps}};
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("\n");
  }
  std::fflush(stdout);
  spdlog::info("prompt {} tokens, prefill {:.1f} tok/s; generated {} tokens, decode {:.1f} tok/s",
               prompt.size(), prefill_tps, result->tokens.size(), decode_tps);
  return kExitOk;
}

}  // namespace

void AddGenerateCommand(CLI::App& app, Action& run) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a prompt (greedy by default)");
  cmd->add_option("-m,--model", args->model, "GGUF file or Hugging Face model directory")
      ->required();
  cmd->add_option("-p,--prompt", args->prompt, "Prompt text")->required();
  cmd->add_flag("--chat", args->chat, "Wrap the prompt as a user turn in the ChatML template");
  cmd->add_option("--system", args->system,
                  "System message for --chat (default: the one the model's chat template adds)");
  cmd->add_flag("--no-system", args->no_system, "With --chat: no system message at all");
  cmd->add_option("-n,--max-tokens", args->n, "Tokens to generate at most")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--temp", args->temp, "Sampling temperature; 0 is greedy")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-k", args->top_k, "Sample among the k most likely tokens; 0 = all")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", args->top_p, "Nucleus sampling mass")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--seed", args->seed, "Sampling seed")->capture_default_str();
  AddModelFlags(cmd, args->model_flags, /*tensor_parallel=*/true);
  cmd->add_option("-t,--threads", args->threads, "CPU threads")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", args->json, "Print one JSON object instead of streaming text");
  cmd->callback([args, &run] { run = [args] { return RunGenerate(*args); }; });
}

}  // namespace ripplekv::cli

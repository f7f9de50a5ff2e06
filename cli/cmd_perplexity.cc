// ripplekv perplexity --model M --file F [--ctx N] [--chunks K] [--threads N] [--json]
// Perplexity chunked as llama.cpp's perplexity tool does (worker/engine/perplexity.h).

#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/model_session.h"
#include "cli/progress.h"
#include "base/file_io.h"
#include "nlohmann/json.hpp"
#include "worker/engine/perplexity.h"

namespace ripplekv::cli {

namespace {

// The largest --file read (whole, then tokenized at once): wikitext-2's test split is 1.3 MiB.
constexpr uint64_t kMaxTextFileBytes = uint64_t{256} << 20;  // bytes (256 MiB)

struct PerplexityArgs {
  std::string model;
  std::string file;
  int ctx = 512;
  int chunks = 0;
  int threads = DefaultThreads();
  ModelFlags model_flags;  // --weights, --device, --device-weights
  bool json = false;
};

int RunPerplexity(const PerplexityArgs& args) {
  StatusOr<std::string> read = ReadFileBounded(args.file, kMaxTextFileBytes);
  if (!read.ok()) {
    return ReportError(
        Status(read.status().code(), absl::StrCat("--file: ", read.status().message())));
  }
  std::string text = *std::move(read);
  // As llama-perplexity -f: exactly one trailing newline is dropped before tokenizing.
  if (!text.empty() && text.back() == '\n') text.pop_back();

  auto session_or = OpenModel(args.model, args.threads, args.model_flags);
  if (!session_or.ok()) return ReportError(session_or.status());
  worker::Engine& s = **session_or;
  // As llama.cpp: tokenize with the vocabulary's special tokens (BOS when it adds one).
  const std::vector<int32_t> tokens = s.tokenizer->Encode(text, {.add_special = true});

  worker::PerplexityOptions options;
  options.n_ctx = args.ctx;
  options.max_chunks = args.chunks;
  options.bos_id = s.tokenizer->add_bos() ? s.tokenizer->bos_id() : -1;
  const int64_t total = args.chunks > 0 ? std::min<int64_t>(args.chunks, tokens.size() / args.ctx)
                                        : static_cast<int64_t>(tokens.size() / args.ctx);
  std::unique_ptr<Progress> progress;
  if (s.primary()) progress = std::make_unique<Progress>("perplexity", total, "chunks");
  auto result = worker::ComputePerplexity(*s.transformer, tokens, options, [&](int done, int) {
    if (progress) progress->Update(done);
  });
  progress.reset();
  if (!result.ok()) return ReportError(result.status());
  if (!s.primary()) return kExitOk;  // --tp: rank 0 reports
  const double ppl_err = result->ppl * result->nll_stderr;
  if (args.json) {
    nlohmann::json j = {{"file", args.file},
                        {"tokens", tokens.size()},
                        {"ctx", result->n_ctx},
                        {"chunks", result->n_chunks},
                        {"tokens_scored", result->tokens_scored},
                        {"mean_nll", result->mean_nll},
                        {"ppl", result->ppl},
                        {"ppl_stderr", ppl_err},
                        {"chunk_nll_sum", result->chunk_nll_sum}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf(
        "perplexity: %.4f +/- %.4f  (%d chunks of %d tokens, %lld tokens scored, %zu in file)\n",
        result->ppl, ppl_err, result->n_chunks, result->n_ctx,
        static_cast<long long>(result->tokens_scored), tokens.size());
  }
  return kExitOk;
}

}  // namespace

void AddPerplexityCommand(CLI::App& app, Action& run) {
  auto args = std::make_shared<PerplexityArgs>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity", "Perplexity of a text file, chunked as llama.cpp's perplexity tool");
  cmd->add_option("-m,--model", args->model, "GGUF file or Hugging Face model directory")
      ->required();
  cmd->add_option("-f,--file", args->file, "UTF-8 text file")->required();
  cmd->add_option("-c,--ctx", args->ctx, "Tokens per chunk; the second half of each is scored")
      ->capture_default_str()
      ->check(CLI::Range(4, 1 << 20));
  cmd->add_option("--chunks", args->chunks, "Evaluate at most this many chunks; 0 = all")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  AddModelFlags(cmd, args->model_flags, /*tensor_parallel=*/true);
  cmd->add_option("-t,--threads", args->threads, "CPU threads")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->callback([args, &run] { run = [args] { return RunPerplexity(*args); }; });
}

}  // namespace ripplekv::cli

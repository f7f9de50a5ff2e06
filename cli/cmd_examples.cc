// ripplekv examples --model M [--tasks LIST] [--samples N] [--context-len C] [--continuation W]
//   [--prompt-len T,...] [--depth D,...] [--corpus NAME|FILE] [--split test|validation]
//   [--seed S] [--chat] [...the other example flags of eval] [-o FILE]
//
// Writes the examples `ripplekv eval` would run with the same flags, as JSONL
// (eval/example_lines.h): the token ids of every prompt and fidelity continuation, with the ids
// eval's records carry. Another engine runs them and writes records in eval's format, which
// `ripplekv compare` pairs with eval's by example (docs/EVAL.md, "The examples file"; the kvpress
// comparison in docs/RESULTS.md). Only the tokenizer is loaded. stdout (or FILE, written
// atomically): the lines; stderr: progress.

#include <memory>
#include <string>
#include <vector>

#include "base/file_io.h"
#include "cli/commands.h"
#include "cli/eval_setup.h"
#include "cli/exit_codes.h"
#include "cli/model_session.h"
#include "eval/example_lines.h"
#include "spdlog/spdlog.h"

namespace ripplekv::cli {
namespace {

struct ExamplesArgs {
  std::string model;
  ExampleFlags examples;
  std::string out;  // empty: stdout
};

int RunExamples(const ExamplesArgs& args) {
  auto tokenizer = worker::OpenTokenizer(args.model);
  if (!tokenizer.ok()) return ReportError(tokenizer.status());
  auto examples = MakeExamples(args.examples, **tokenizer);
  if (!examples.ok()) return ReportError(examples.status());
  std::string lines;
  for (const eval::EvalExample& example : *examples) lines += eval::ExampleLine(example);
  if (args.out.empty()) {
    std::fwrite(lines.data(), 1, lines.size(), stdout);
    std::fflush(stdout);
  } else if (Status st = WriteFileAtomically(args.out, lines); !st.ok()) {
    return ReportError(st);
  }
  spdlog::info("{} examples{}", examples->size(),
               args.out.empty() ? "" : " written to " + args.out);
  return kExitOk;
}

}  // namespace

void AddExamplesCommand(CLI::App& app, Action& run) {
  auto a = std::make_shared<ExamplesArgs>();
  CLI::App* cmd = app.add_subcommand(
      "examples",
      "Write the examples `eval` would run with the same flags as JSONL (prompt and continuation "
      "token ids, example ids as in eval's records), for running them in another engine; only "
      "the tokenizer is loaded");
  cmd->add_option("-m,--model", a->model, "GGUF file or Hugging Face model directory")->required();
  AddExampleFlags(cmd, a->examples);
  cmd->add_option("-o,--out", a->out,
                  "Write the lines to this file (atomically) instead of stdout");
  cmd->callback([a, &run] { run = [a] { return RunExamples(*a); }; });
}

}  // namespace ripplekv::cli

// ripplekv tokenize --model M (--text T | --file F) [--special] [--json]
// Shows what a prompt or a calibration text becomes: token ids and their pieces, as llama.cpp's
// tokenize tool. Only the tokenizer is read (GGUF metadata or tokenizer.json); weights are not
// loaded.
//
// Encoding matches `ripplekv generate` on a plain prompt: the vocabulary's special tokens are added
// (BOS / EOS only where the vocabulary says so; SmolLM2 adds none), and control tokens in the text
// are plain text unless --special is given (then "<|im_start|>" is one token, as with
// `generate --chat` and llama.cpp's --parse-special).
//
// Output (stdout):
//   human: one line per token, "%6d -> 'piece'". Bytes that would break the one-token-one-line
//          layout are escaped: \n \r \t \\ as such, other control bytes (< 0x20, 0x7f) and bytes
//          that are not part of valid UTF-8 (a piece that ends or starts inside a character) as
//          \xNN. Valid UTF-8 and single quotes are printed as is.
//   --json: {"model": M, "n_tokens": N, "tokens": [{"id": ..., "piece": "..."}, ...]}. A piece
//          that is not valid UTF-8 has its invalid bytes replaced by U+FFFD in "piece" and carries
//          its exact bytes as "bytes": [0..255, ...] (only such pieces have "bytes").
// The token count goes to stderr as a log line. Exit codes: cli/exit_codes.h.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/model_session.h"
#include "cli/utf8.h"
#include "base/file_io.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace ripplekv::cli {

namespace {

// Largest --file read into memory, in bytes (64 MiB); larger files are refused (exit 1).
constexpr uint64_t kMaxTokenizeFileBytes = uint64_t{64} << 20;

struct TokenizeArgs {
  std::string model;
  std::string text;
  std::string file;
  bool special = false;
  bool json = false;
};

// The piece for one human-readable line: see the file comment for what is escaped.
std::string EscapePiece(std::string_view s) {
  std::string out;
  while (!s.empty()) {
    const size_t n = ValidUtf8Prefix(s);
    const uint8_t c = static_cast<uint8_t>(s[0]);
    if (n > 1) {
      out.append(s.substr(0, n));
      s.remove_prefix(n);
      continue;
    }
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (n == 0 || c < 0x20 || c == 0x7f) {
          absl::StrAppendFormat(&out, "\\x%02x", c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
    s.remove_prefix(1);
  }
  return out;
}

int RunTokenize(const TokenizeArgs& args) {
  std::string text = args.text;
  if (!args.file.empty()) {
    auto contents = ReadFileBounded(args.file, kMaxTokenizeFileBytes);
    if (!contents.ok()) {
      return ReportError(
          Status(contents.status().code(), absl::StrCat("--file: ", contents.status().message())));
    }
    text = *std::move(contents);  // the whole file, trailing newline included
  }

  auto tokenizer_or = worker::OpenTokenizer(args.model);
  if (!tokenizer_or.ok()) return ReportError(tokenizer_or.status());
  const worker::Tokenizer& tok = **tokenizer_or;
  const std::vector<int32_t> ids =
      tok.Encode(text, {.add_special = true, .parse_special = args.special});

  if (args.json) {
    nlohmann::json tokens = nlohmann::json::array();
    for (const int32_t id : ids) {
      const std::string piece = tok.TokenToPiece(id);
      nlohmann::json t = {{"id", id}, {"piece", piece}};
      if (!IsValidUtf8(piece)) {
        std::vector<int> bytes;
        for (const char c : piece) bytes.push_back(static_cast<uint8_t>(c));
        t["bytes"] = bytes;
      }
      tokens.push_back(std::move(t));
    }
    const nlohmann::json j = {{"model", args.model}, {"n_tokens", ids.size()}, {"tokens", tokens}};
    // replace: invalid UTF-8 in "piece" becomes U+FFFD (the exact bytes are in "bytes").
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    for (const int32_t id : ids) {
      std::printf("%6d -> '%s'\n", id, EscapePiece(tok.TokenToPiece(id)).c_str());
    }
  }
  std::fflush(stdout);
  spdlog::info("{} tokens", ids.size());
  return kExitOk;
}

}  // namespace

void AddTokenizeCommand(CLI::App& app, Action& run) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize",
      "Print the token ids and pieces of a text (only the tokenizer is loaded). Special tokens are "
      "added as for a `generate` prompt: BOS/EOS only where the vocabulary adds them (SmolLM2: "
      "none)");
  cmd->add_option("-m,--model", args->model, "GGUF file or Hugging Face model directory")
      ->required();
  CLI::Option_group* input = cmd->add_option_group("input", "Exactly one of --text / --file");
  input->add_option("-p,--text", args->text, "Text to tokenize");
  input->add_option("-f,--file", args->file,
                    "File whose whole contents (up to 64 MiB, trailing newline included) to "
                    "tokenize");
  input->require_option(1);
  cmd->add_flag("--special", args->special,
                "Parse control tokens in the text (\"<|im_start|>\" becomes one token); without "
                "it they are plain text");
  cmd->add_flag("--json", args->json,
                "Print one JSON object {model, n_tokens, tokens: [{id, piece[, bytes]}]}");
  cmd->callback([args, &run] { run = [args] { return RunTokenize(*args); }; });
}

}  // namespace ripplekv::cli

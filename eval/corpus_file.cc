#include "eval/corpus_file.h"

#include <cstdint>
#include <string>
#include <string_view>

#include "base/file_io.h"
#include "base/strings.h"
#include "method/jsonl.h"
#include "nlohmann/json.hpp"
#include "worker/data/calibration_data.h"
#include "worker/data/corpora.h"

namespace ripplekv::eval {
namespace {

using Json = nlohmann::json;

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view TrimAsciiSpace(std::string_view s) {
  while (!s.empty() && IsAsciiSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsAsciiSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view DropBom(std::string_view text) {
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (text.starts_with(kBom)) text.remove_prefix(kBom.size());
  return text;
}

// Appends `text` to `out` with every CRLF turned into LF.
void AppendUnixNewlines(std::string_view text, std::string* out) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    out->push_back(text[i]);
  }
}

// One document: CRLF to LF, then surrounding whitespace dropped; empty when blank.
std::string NormalizeDocument(std::string_view text) {
  std::string unix_text;
  unix_text.reserve(text.size());
  AppendUnixNewlines(text, &unix_text);
  return std::string(TrimAsciiSpace(unix_text));
}

// The "text" of one JSONL line's object. Errors name `where` ("file:line").
StatusOr<std::string> DocumentFromJsonLine(const Json& j, std::string_view where) {
  const auto text = j.find("text");
  if (text == j.end()) {
    return absl::InvalidArgumentError(Cat(where, ": field \"text\" is missing"));
  }
  if (!text->is_string()) {
    return absl::InvalidArgumentError(
        Cat(where, ": field \"text\" must be a string, got ", text->type_name()));
  }
  return text->get<std::string>();
}

}  // namespace

bool IsBuiltinCorpusName(std::string_view name) {
  return name == worker::kSherlockHolmes.name || name == worker::kTomSawyer.name;
}

std::string CorpusFileName(std::string_view path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string_view::npos || slash + 1 == path.size()) return std::string(path);
  return std::string(path.substr(slash + 1));
}

StatusOr<std::string> CorpusTextFromJsonl(std::string_view bytes, std::string_view source_name) {
  std::string out;
  // Blank: only ASCII whitespace (absl::ascii_isspace); no line limit (the file cap bounds lines).
  RETURN_IF_ERROR(method::ForEachJsonlLine(
      bytes, source_name,
      {.blank_chars = method::kAsciiSpace,
       .object_description = "a JSON object with a string field \"text\""},
      [&](const method::JsonlLine& line) -> StatusOr<method::JsonlNext> {
        ASSIGN_OR_RETURN(const std::string text, DocumentFromJsonLine(line.value, line.where));
        const std::string document = NormalizeDocument(text);
        if (!document.empty()) {
          if (!out.empty()) out += "\n\n";
          out += document;
        }
        return method::JsonlNext::kMore;
      }));
  if (out.empty()) {
    return absl::InvalidArgumentError(
        Cat("corpus ", source_name, ": no text (no JSON line with a non-blank \"text\")"));
  }
  return out;
}

StatusOr<std::string> CorpusTextFromPlain(std::string_view bytes, std::string_view source_name) {
  std::string out = NormalizeDocument(DropBom(bytes));
  if (out.empty()) {
    return absl::InvalidArgumentError(Cat("corpus ", source_name, ": no text (empty or blank)"));
  }
  return out;
}

StatusOr<std::string> ReadCorpusFile(const std::string& path) {
  StatusOr<std::string> bytes = ReadFileBounded(path, worker::kMaxCorpusFileBytes);
  if (!bytes.ok()) {
    const std::string_view hint =
        absl::IsNotFound(bytes.status())
            ? std::string_view(
                  " (not a built-in corpus either: those are \"sherlock-holmes\" "
                  "and \"tom-sawyer\")")
            : std::string_view();
    return Status(bytes.status().code(),
                  Cat("corpus ", std::string(bytes.status().message()), hint));
  }
  return worker::IsJsonlPath(path) ? CorpusTextFromJsonl(*bytes, path)
                                   : CorpusTextFromPlain(*bytes, path);
}

}  // namespace ripplekv::eval

#pragma once
// Evaluation text from a user's file (`ripplekv eval --corpus FILE`), so that a deployment
// measures a budget map on its own traffic instead of the built-in books.
//
// Which value names a file: every value of --corpus that is not the name of a built-in corpus
// ("sherlock-holmes", "tom-sawyer"; IsBuiltinCorpusName) is a path. A file that happens to be
// called like a built-in corpus is reached as "./tom-sawyer".
//
// Formats, chosen by the path (worker::IsJsonlPath of worker/data/calibration_data.h):
//   * JSONL (".jsonl", ".ndjson", ".json", any case): one JSON object per line with a string field
//     "text" (other keys ignored); blank lines are ignored. Each document's surrounding
//     whitespace is dropped, blank documents are skipped, and the documents are joined in file
//     order with a paragraph break "\n\n", so each starts a paragraph (where a haystack may
//     begin). Malformed lines (invalid JSON, not an object, no "text", "text" not a string) are
//     InvalidArgument naming "file:line".
//   * Plain text (anything else): the whole file.
// Both: a leading UTF-8 byte-order mark is dropped, CRLF becomes LF (paragraphs are found at
// "\n\n"), and whitespace at both ends is dropped. Nothing else is changed (no Project Gutenberg
// stripping: the file is the user's text as it is).
//
// Thread-safety: pure functions.

#include <string>
#include <string_view>

#include "base/status.h"

namespace ripplekv::eval {

// Whether `name` is the name of a built-in corpus (worker/data/corpora.h).
bool IsBuiltinCorpusName(std::string_view name);

// The name a corpus file gets in example ids and sources: the path's last component
// ("traffic.jsonl" for "/data/traffic.jsonl"); the whole path when it ends in "/".
std::string CorpusFileName(std::string_view path);

// JSONL bytes as above; `source_name` stands for the file in messages ("name:line"). Errors:
// InvalidArgument for a malformed line or when no document has text.
[[nodiscard]] StatusOr<std::string> CorpusTextFromJsonl(std::string_view bytes,
                                                        std::string_view source_name);

// Plain-text bytes as above. Errors: InvalidArgument (naming `source_name`) when the text is
// blank.
[[nodiscard]] StatusOr<std::string> CorpusTextFromPlain(std::string_view bytes,
                                                        std::string_view source_name);

// Reads the file at `path` whole (at most kMaxCorpusFileBytes, 256 MiB, of worker/data/corpora.h)
// and parses it by its extension. Errors: those of ReadFileBounded with "corpus " before the
// message (NotFound for no such file, with the built-in names listed since the value may be a
// misspelt one; InvalidArgument for a directory; ResourceExhausted over the cap), then those of
// CorpusTextFromJsonl / CorpusTextFromPlain.
[[nodiscard]] StatusOr<std::string> ReadCorpusFile(const std::string& path);

}  // namespace ripplekv::eval

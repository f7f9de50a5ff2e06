#pragma once
// Calibration samples (DESIGN.md §2): token sequences split into a context C (the prefix whose
// cache is perturbed) and a probe P (the W tokens that are teacher-forced and scored).
//
// Sources, chosen by DataOptions::format (kAuto: by the file's extension):
//   * JSONL (".jsonl", ".ndjson", ".json"): one JSON object per line; each line gives at most one
//     sample.
//       {"text": "..."}                        context = its first C tokens, probe = the next W;
//       {"context": "...", "continuation": "..."}
//                                              context = the LAST C tokens of "context", probe =
//                                              the FIRST W tokens of "continuation" (the two are
//                                              tokenized separately; a continuation usually starts
//                                              with a space). Other keys are ignored.
//     A line with too few tokens is skipped and listed in CalibrationSet::skipped (an error with
//     DataOptions::strict). Blank lines are ignored. Lines after the N-th usable sample are not
//     read. Malformed lines (bad JSON, not an object, missing field, wrong type, "text" together
//     with "context"/"continuation") are InvalidArgument naming "file:line".
//   * Plain text (anything else): the whole file (a leading UTF-8 byte-order mark dropped, the
//     bytes otherwise as they are) is tokenized at once, then cut into consecutive,
//     non-overlapping windows of C + W tokens from the start: window k is tokens
//     [k(C+W), (k+1)(C+W)), context its first C, probe its last W. The first N windows are used.
//   * The built-in set (DefaultCalibrationData): plain-text windows over a public-domain book that
//     a Debian package installs (kSherlockHolmes; docs/DATA.md), Project Gutenberg boilerplate
//     stripped.
//
// Every sample has exactly C context and W probe tokens, so samples batch alike. Tokens are the
// tokenizer's Encode without special tokens (no BOS, control-token text read as plain text); a
// caller that wants BOS prepends it. The result is a pure function of the file bytes, the
// tokenizer and the options: the same inputs give the same samples, in file order.
//
// Thread-safety: the functions keep no state and may be called concurrently.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/base/status.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::worker {

struct CalibrationSample {
  int index = 0;                 // 0-based position in CalibrationSet::samples (keys the noise)
  std::vector<int32_t> context;  // exactly DataOptions::context_len token ids
  std::vector<int32_t> probe;    // exactly DataOptions::probe_len token ids
  std::string source;            // "file:line" (JSONL) or "file@token_offset" (plain text)
};

// A JSONL line that gave no sample because it has too few tokens.
struct SkippedSample {
  std::string source;  // "file:line"
  std::string reason;  // e.g. "text has 40 tokens; a sample needs 512 + 32 = 544"
};

enum class DataFormat {
  kAuto,  // JSONL when the path ends in ".jsonl", ".ndjson" or ".json" (any case), else plain text
  kJsonl,
  kText,
};

struct DataOptions {
  int samples = 8;        // N: samples wanted; fewer usable ones is an error. >= 1
  int context_len = 512;  // C: context tokens per sample. >= 1
  int probe_len = 32;     // W: probe tokens per sample. 1 <= W < C
  bool strict = false;    // a JSONL line with too few tokens is an error instead of a skip
  DataFormat format = DataFormat::kAuto;
};

struct CalibrationSet {
  std::vector<CalibrationSample> samples;  // exactly DataOptions::samples, in file order
  std::vector<SkippedSample> skipped;      // JSONL lines passed over, in file order
  // FNV-1a (64-bit) over C, W and every sample's tokens: equal sets have equal fingerprints. A
  // cheap identity for profiles, not a cryptographic hash.
  uint64_t fingerprint = 0;
  // One line for the profile: where the samples came from, their shape and the fingerprint.
  std::string description;
};

// InvalidArgument unless samples >= 1, context_len >= 1, probe_len >= 1 and probe_len <
// context_len (the probe is the short scored tail; W >= C is almost surely a swapped flag).
[[nodiscard]] Status ValidateDataOptions(const DataOptions& options);

// Reads `path` (see the top of this file). Errors: InvalidArgument (bad options; malformed JSONL,
// naming "file:line"; an empty file or one without any JSON line; a JSONL line over 64 MiB; a
// plain-text file over 256 MiB; a too-short line when strict; fewer than N usable samples, stating
// how many were found and needed), NotFound (no such file), FailedPrecondition (not a regular
// file, unreadable).
[[nodiscard]] StatusOr<CalibrationSet> LoadCalibrationData(const std::string& path,
                                                           const Tokenizer& tokenizer,
                                                           const DataOptions& options);

// Plain-text windows over `text` held in memory; `source_name` stands for the file in sample
// sources ("name@offset") and messages. Errors: InvalidArgument (bad options, empty text, fewer
// than N windows).
[[nodiscard]] StatusOr<CalibrationSet> CalibrationDataFromText(std::string_view text,
                                                               std::string_view source_name,
                                                               const Tokenizer& tokenizer,
                                                               const DataOptions& options);

// A public-domain text that a Debian package installs (scripts/deps installs the package).
struct BuiltinCorpus {
  std::string_view name;     // short id: "sherlock-holmes"
  std::string_view title;    // "The Adventures of Sherlock Holmes (Arthur Conan Doyle, 1892)"
  std::string_view package;  // Debian package that installs `path`
  std::string_view path;     // installed path of the plain-text file
};

// Default calibration text: Project Gutenberg #1661, ~147k SmolLM2 tokens after stripping.
inline constexpr BuiltinCorpus kSherlockHolmes{
    .name = "sherlock-holmes",
    .title =
        "The Adventures of Sherlock Holmes (Arthur Conan Doyle, 1892; Project Gutenberg #1661)",
    .package = "golang-github-pierrec-lz4-dev",
    .path = "/usr/share/gocode/src/github.com/pierrec/lz4/testdata/pg1661.txt",
};
// A second, different text from the same package (for evaluation data distinct from the
// calibration data): Project Gutenberg's Tom Sawyer, ~104k SmolLM2 tokens.
inline constexpr BuiltinCorpus kTomSawyer{
    .name = "tom-sawyer",
    .title = "The Adventures of Tom Sawyer (Mark Twain, 1876; Project Gutenberg)",
    .package = "golang-github-pierrec-lz4-dev",
    .path = "/usr/share/gocode/src/github.com/pierrec/lz4/testdata/Mark.Twain-Tom.Sawyer.txt",
};

// The corpus text with Project Gutenberg boilerplate stripped (StripGutenbergBoilerplate).
// Errors: FailedPrecondition naming the Debian package to install when the file is missing or
// unreadable; InvalidArgument when nothing is left after stripping.
[[nodiscard]] StatusOr<std::string> ReadBuiltinCorpus(const BuiltinCorpus& corpus);

// Deterministic clean-up of a Project Gutenberg plain-text book: drops a UTF-8 byte-order mark,
// turns CRLF into LF, drops everything up to and including a line starting "*** START OF" and
// everything from the first line starting "*** END OF", "End of the Project Gutenberg" or "End of
// Project Gutenberg" (case-insensitive), drops a leading "Produced by ..." credit paragraph, and
// trims blank lines at both ends. Text without these markers only gets the BOM, CRLF and trim
// steps.
std::string StripGutenbergBoilerplate(std::string_view text);

// Plain-text windows over kSherlockHolmes (ReadBuiltinCorpus, then CalibrationDataFromText).
// With the SmolLM2 tokenizer the book gives 138 windows of 1024 + 32 tokens. Errors: those
// of ReadBuiltinCorpus and CalibrationDataFromText.
[[nodiscard]] StatusOr<CalibrationSet> DefaultCalibrationData(const Tokenizer& tokenizer,
                                                              const DataOptions& options);

}  // namespace ripplekv::worker

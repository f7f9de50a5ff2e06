#pragma once
// Calibration samples (docs/DESIGN.md §2): token sequences split into a context C (the prefix whose
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
//     a Debian package installs (kSherlockHolmes of worker/data/corpora.h; docs/DATA.md), Project
//     Gutenberg boilerplate stripped.
//
// Files and bytes held in memory are parsed by the same code: LoadCalibrationData reads the file
// once and calls CalibrationDataFromJsonl or CalibrationDataFromText.
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
#include "worker/data/corpora.h"
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

// True when DataFormat::kAuto reads `path` as JSONL: it ends in ".jsonl", ".ndjson" or ".json", in
// any case. The one rule for every reader (LoadCalibrationData, workers, `ripplekv submit`).
bool IsJsonlPath(std::string_view path);

// The largest files LoadCalibrationData reads; a file is read once, whole, before it is parsed.
inline constexpr uint64_t kMaxCalibrationTextBytes = uint64_t{256}
                                                     << 20;  // bytes (256 MiB), plain text
inline constexpr uint64_t kMaxCalibrationJsonlBytes = uint64_t{1} << 30;  // bytes (1 GiB), JSONL

// Reads `path` (see the top of this file) whole, at most kMaxCalibrationJsonlBytes (JSONL) or
// kMaxCalibrationTextBytes (plain text), then parses the bytes as CalibrationDataFromJsonl /
// CalibrationDataFromText do, with `path` as the source name. Errors (docs/ERRORS.md): those of
// ReadFileBounded with "calibration data " before the message (NotFound for no such file,
// InvalidArgument for a directory or other non-regular file, ResourceExhausted over the cap,
// errno-mapped codes for a failed open/stat/read), then those of the in-memory functions.
[[nodiscard]] StatusOr<CalibrationSet> LoadCalibrationData(const std::string& path,
                                                           const Tokenizer& tokenizer,
                                                           const DataOptions& options);

// JSONL held in memory (one JSON object per line, see the top of this file); `source_name` stands
// for the file in sample sources ("name:line") and messages. The same bytes give the same set
// (samples, skips, fingerprint) and the same errors as LoadCalibrationData on a file at path
// `source_name` with DataFormat::kJsonl. Errors: InvalidArgument (bad options; empty text or only
// blank lines; malformed line, naming "name:line"; a line over 64 MiB; a too-short line when
// strict; fewer than N usable samples, stating how many were found and needed).
[[nodiscard]] StatusOr<CalibrationSet> CalibrationDataFromJsonl(std::string_view text,
                                                                std::string_view source_name,
                                                                const Tokenizer& tokenizer,
                                                                const DataOptions& options);

// Plain-text windows over `text` held in memory; `source_name` stands for the file in sample
// sources ("name@offset") and messages. Errors: InvalidArgument (bad options, empty text, fewer
// than N windows).
[[nodiscard]] StatusOr<CalibrationSet> CalibrationDataFromText(std::string_view text,
                                                               std::string_view source_name,
                                                               const Tokenizer& tokenizer,
                                                               const DataOptions& options);

// Plain-text windows over kSherlockHolmes (ReadBuiltinCorpus, then CalibrationDataFromText).
// With the SmolLM2 tokenizer the book gives 138 windows of 1024 + 32 tokens. Errors: those
// of ReadBuiltinCorpus and CalibrationDataFromText.
[[nodiscard]] StatusOr<CalibrationSet> DefaultCalibrationData(const Tokenizer& tokenizer,
                                                              const DataOptions& options);

}  // namespace ripplekv::worker

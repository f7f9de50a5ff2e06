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
//     bytes otherwise as they are) is tokenized at once and cut into its M non-overlapping
//     windows of C + W tokens: window k is tokens [k(C+W), (k+1)(C+W)), context its first C,
//     probe its last W; the tail shorter than a window is not used. The N samples are the first N
//     windows of SpreadWindowOrder(M, ..., DataOptions::data_seed): spread over the whole text,
//     in a nested order (the first N of a longer set are the set of N).
//   * Built-in sets (BuiltinCalibrationData; docs/DATA.md): plain-text windows, spread as above,
//     over the corpora of worker/data/corpora.h: "sherlock-holmes" and "tom-sawyer" (prose),
//     "code" (Python standard library modules), "docs" (CMake manuals), and "mixed", the default
//     (DefaultCalibrationData): prose (sherlock-holmes), code and docs taken in turn. The files
//     of "code" and "docs" are tokenized one by one and their tokens concatenated in list order,
//     so a window may run from one file into the next.
//
// Files and bytes held in memory are parsed by the same code: LoadCalibrationData reads the file
// once and calls CalibrationDataFromJsonl or CalibrationDataFromText.
//
// Every sample has exactly C context and W probe tokens, so samples batch alike. Tokens are the
// tokenizer's Encode without special tokens (no BOS, control-token text read as plain text); a
// caller that wants BOS prepends it. The result is a pure function of the file bytes, the
// tokenizer and the options: the same inputs give the same samples (JSONL: in file order; text:
// in spread order).
//
// Thread-safety: the functions keep no state and may be called concurrently.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "method/calibration_params.h"
#include "worker/data/corpora.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::worker {

struct CalibrationSample {
  int index = 0;                 // 0-based position in CalibrationSet::samples (keys the noise)
  std::vector<int32_t> context;  // exactly DataOptions::context_len token ids
  std::vector<int32_t> probe;    // exactly DataOptions::probe_len token ids
  // "file:line" (JSONL) or "file@token_offset" (plain text; for "code" and "docs" the file the
  // window starts in and the offset in that file's tokens).
  std::string source;
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
  // Seed of the plain-text windows' spread order (SpreadWindowOrder); JSONL ignores it.
  uint64_t data_seed = 0;
};

struct CalibrationSet {
  // Exactly DataOptions::samples: JSONL in file order, plain text in spread order.
  std::vector<CalibrationSample> samples;
  std::vector<SkippedSample> skipped;  // JSONL lines passed over, in file order
  // FNV-1a (64-bit) over C, W and every sample's tokens: equal sets have equal fingerprints. A
  // cheap identity for profiles, not a cryptographic hash.
  uint64_t fingerprint = 0;
  // One line for the profile: where the samples came from (with the domain and, for plain text,
  // the spread seed), their shape and the fingerprint. Examples:
  //   "user data d.jsonl (jsonl): 8 samples x (context 512 + probe 32) tokens, fingerprint ..."
  //   "built-in mixed (prose: ...; code: ...; docs: ...): prose, code, docs in turn, spread seed
  //    0 over 269, 306, 219 windows; 8 samples x (context 512 + probe 32) tokens, fingerprint ..."
  std::string description;
  // kDomainProse, kDomainCode, kDomainDocs or kDomainMixed (built-in sets), kDomainUser (a file
  // or inline data) of worker/data/corpora.h.
  std::string domain;
};

// The first `count` windows, of `windows` (M), in the spread order of `seed`: a golden-ratio
// (Kronecker) sequence. With u = SplitMix64(seed) and g = 0x9E3779B97F4A7C15 = floor(2^64 / phi),
// the k-th candidate is floor(M * x_k / 2^64) for x_k = (u + k g) mod 2^64, computed in integers
// (the same on every machine); a candidate already taken is replaced by the next free window,
// cyclically. Properties: the windows are distinct; the order is nested (the result for `count` is
// the prefix of the result for any larger count); spread: with N = count, every stratum of M/N
// consecutive windows holds at most 3 and no 3 consecutive strata are empty (the golden ratio's
// three-gap property; tested for M up to 10007 and N up to 300). Requires 0 <= count <= windows
// (CHECK).
[[nodiscard]] std::vector<int64_t> SpreadWindowOrder(int64_t windows, int64_t count, uint64_t seed);

// The data options of the method's parameters (samples, context_len, probe_len, data_seed), with
// the data's own strict flag and format: the one conversion.
DataOptions DataOptionsOf(const method::CalibrationParams& params, bool strict = false,
                          DataFormat format = DataFormat::kAuto);

// The method's rules on samples, context_len and probe_len (method::ValidateCalibrationParams,
// with its messages: "params.probe_len: must be < params.context_len (4), got 4"; the probe is the
// short scored tail, W >= C is almost surely a swapped flag). InvalidArgument.
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

// Plain-text windows over `text` held in memory, spread (see the top of this file); `source_name`
// stands for the file in sample sources ("name@offset") and messages. Domain kDomainUser.
// Errors: InvalidArgument (bad options, empty text, fewer than N windows).
[[nodiscard]] StatusOr<CalibrationSet> CalibrationDataFromText(std::string_view text,
                                                               std::string_view source_name,
                                                               const Tokenizer& tokenizer,
                                                               const DataOptions& options);

// The default built-in set: "mixed".
inline constexpr std::string_view kDefaultCalibrationBuiltin = method::kDefaultCalibrationSet;

// The names BuiltinCalibrationData takes: "mixed", "sherlock-holmes", "tom-sawyer", "code",
// "docs".
[[nodiscard]] std::span<const std::string_view> BuiltinCalibrationNames();

// OK when `name` is one of BuiltinCalibrationNames(); else InvalidArgument listing them.
[[nodiscard]] Status CheckBuiltinCalibrationName(std::string_view name);

// The built-in set `name` (see the top of this file and docs/DATA.md): plain-text windows in
// spread order over
//   "sherlock-holmes", "tom-sawyer": the book (ReadBuiltinCorpus), domain prose;
//   "code": kPythonStdlib's files (ReadBuiltinFileSet), domain code;
//   "docs": kCmakeManuals's files, domain docs;
//   "mixed": sample k from prose (sherlock-holmes), code, docs for k mod 3 = 0, 1, 2, being
//     window k / 3 (integer division) of that corpus's spread order with the same seed, so the
//     samples of each domain are the first ones of the single-corpus set, and a larger N keeps
//     the samples of a smaller one; domain mixed.
// Sources are "file@token_offset". tom-sawyer is the default evaluation text and is not part of
// "mixed". Errors: InvalidArgument (bad options, unknown name listing the known ones, a corpus
// with fewer windows than it must give, naming it); those of ReadBuiltinCorpus /
// ReadBuiltinFileSet (FailedPrecondition naming the Debian package when a corpus is not installed).
[[nodiscard]] StatusOr<CalibrationSet> BuiltinCalibrationData(std::string_view name,
                                                              const Tokenizer& tokenizer,
                                                              const DataOptions& options);

// BuiltinCalibrationData(kDefaultCalibrationBuiltin, ...). With the SmolLM2 tokenizer each of its
// three corpora gives more than 100 windows of 1024 + 32 tokens.
[[nodiscard]] StatusOr<CalibrationSet> DefaultCalibrationData(const Tokenizer& tokenizer,
                                                              const DataOptions& options);

}  // namespace ripplekv::worker

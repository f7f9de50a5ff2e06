#include "worker/data/calibration_data.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "base/file_io.h"
#include "method/jsonl.h"
#include "nlohmann/json.hpp"
#include "worker/data/text_scan.h"

namespace ripplekv::worker {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxJsonlLineBytes = size_t{64} << 20;  // bytes (64 MiB) per JSONL line
constexpr int kSkipsInError = 3;  // skipped lines quoted in a "too few samples" message

constexpr EncodeOptions kRawText{.add_special = false, .parse_special = false};

std::string Str(std::string_view s) { return std::string(s); }

// ASCII case-insensitive prefix and suffix tests (Debian's Abseil takes no std::string_view).
bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() &&
         std::equal(prefix.begin(), prefix.end(), s.begin(), [](char a, char b) {
           return absl::ascii_tolower(static_cast<unsigned char>(a)) ==
                  absl::ascii_tolower(static_cast<unsigned char>(b));
         });
}
bool EndsWithNoCase(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && StartsWithNoCase(s.substr(s.size() - suffix.size()), suffix);
}

std::string Shape(const DataOptions& o) {
  return absl::StrCat(o.context_len, " + ", o.probe_len, " = ",
                      int64_t{o.context_len} + o.probe_len);
}

// FNV-1a over little-endian bytes of each value.
class Fnv1a64 {
 public:
  void Add(uint32_t v) {
    for (int b = 0; b < 4; ++b) {
      hash_ ^= (v >> (8 * b)) & 0xFFu;
      hash_ *= 0x100000001B3ull;
    }
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xCBF29CE484222325ull;
};

// Sets the fingerprint and the description "<origin>: [<selection>; ]<shape>, fingerprint F".
void Finish(const DataOptions& options, std::string_view origin, std::string_view selection,
            CalibrationSet* set) {
  Fnv1a64 hash;
  hash.Add(static_cast<uint32_t>(options.context_len));
  hash.Add(static_cast<uint32_t>(options.probe_len));
  for (const CalibrationSample& s : set->samples) {
    for (int32_t t : s.context) hash.Add(static_cast<uint32_t>(t));
    for (int32_t t : s.probe) hash.Add(static_cast<uint32_t>(t));
  }
  set->fingerprint = hash.value();
  set->description = absl::StrCat(Str(origin), ": ");
  if (!selection.empty()) absl::StrAppend(&set->description, Str(selection), "; ");
  absl::StrAppendFormat(&set->description, "%d samples x (context %d + probe %d) tokens, ",
                        set->samples.size(), options.context_len, options.probe_len);
  if (!set->skipped.empty()) {
    absl::StrAppendFormat(&set->description, "%d lines skipped, ", set->skipped.size());
  }
  absl::StrAppendFormat(&set->description, "fingerprint %016x", set->fingerprint);
}

// Plain text as tokens: one or more parts (files) tokenized one by one and concatenated.
struct TokenText {
  std::string name;                     // for messages: the file, or the built-in set
  std::vector<int32_t> ids;             // all parts' tokens
  std::vector<int64_t> part_begins;     // first token of each part, ascending; [0] == 0
  std::vector<std::string> part_names;  // each part's name in sample sources

  int64_t Windows(const DataOptions& o) const {
    return static_cast<int64_t>(ids.size()) / (int64_t{o.context_len} + o.probe_len);
  }
  // "part@offset in the part" for token `offset`.
  std::string SourceOf(int64_t offset) const {
    const size_t part = static_cast<size_t>(
        std::upper_bound(part_begins.begin(), part_begins.end(), offset) - part_begins.begin() - 1);
    return absl::StrCat(part_names[part], "@", offset - part_begins[part]);
  }
};

TokenText TokenizeParts(std::string name, std::span<const CorpusFile> files,
                        const Tokenizer& tokenizer) {
  TokenText text{.name = std::move(name)};
  for (const CorpusFile& file : files) {
    text.part_begins.push_back(static_cast<int64_t>(text.ids.size()));
    text.part_names.push_back(file.path);
    const std::vector<int32_t> ids = tokenizer.Encode(file.text, kRawText);
    text.ids.insert(text.ids.end(), ids.begin(), ids.end());
  }
  return text;
}

// Windows [0, count) of `text`'s spread order as samples (index = position in the order).
// InvalidArgument when `text` has fewer than `count` windows.
StatusOr<std::vector<CalibrationSample>> SpreadSamples(const TokenText& text, int64_t count,
                                                       const DataOptions& options) {
  const int64_t window = int64_t{options.context_len} + options.probe_len;
  const int64_t windows = text.Windows(options);
  if (windows < count) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration data ", text.name, ": ", text.ids.size(), " tokens make ",
                     windows, " windows of ", Shape(options), " tokens, ", count,
                     " requested (needs ", window * count, " tokens)"));
  }
  std::vector<CalibrationSample> samples;
  samples.reserve(static_cast<size_t>(count));
  const std::vector<int64_t> order = SpreadWindowOrder(windows, count, options.data_seed);
  for (size_t k = 0; k < order.size(); ++k) {
    const int64_t offset = order[k] * window;
    CalibrationSample sample;
    sample.index = static_cast<int>(k);
    const auto begin = text.ids.begin() + offset;
    sample.context.assign(begin, begin + options.context_len);
    sample.probe.assign(begin + options.context_len, begin + window);
    sample.source = text.SourceOf(offset);
    samples.push_back(std::move(sample));
  }
  return samples;
}

std::string SpreadSelection(const DataOptions& options, std::string_view windows) {
  return absl::StrCat("spread seed ", options.data_seed, " over ", Str(windows), " windows");
}

// A built-in corpus of one domain, tokenized, with how descriptions name it.
struct BuiltinText {
  TokenText tokens;
  std::string domain;
  std::string what;  // "<title>, Debian package <package>, <path or directory>"
};

StatusOr<BuiltinText> LoadBook(const BuiltinCorpus& corpus, const Tokenizer& tokenizer) {
  ASSIGN_OR_RETURN(std::string text, ReadBuiltinCorpus(corpus));
  const CorpusFile file{.path = std::string(corpus.path), .text = std::move(text)};
  return BuiltinText{
      .tokens = TokenizeParts(std::string(corpus.path), std::span(&file, 1), tokenizer),
      .domain = std::string(corpus.domain),
      .what = absl::StrCat(Str(corpus.title), ", Debian package ", Str(corpus.package), ", ",
                           Str(corpus.path))};
}

StatusOr<BuiltinText> LoadFileSet(const BuiltinFileSet& set, const Tokenizer& tokenizer) {
  ASSIGN_OR_RETURN(const std::string dir, FindBuiltinFileSetDir(set));
  ASSIGN_OR_RETURN(const std::vector<CorpusFile> files, ReadBuiltinFileSet(set));
  return BuiltinText{
      .tokens =
          TokenizeParts(absl::StrCat("built-in ", Str(set.name), " (", dir, ")"), files, tokenizer),
      .domain = std::string(set.domain),
      .what = absl::StrCat(Str(set.title), ", Debian package ", Str(set.package), ", ", dir)};
}

// The built-in sets are method/calibration_sets.h's, the list the scheduler checks jobs against.
constexpr const auto& kBuiltinNames = method::kBuiltinCalibrationSetNames;

StatusOr<BuiltinText> LoadSingleBuiltin(std::string_view name, const Tokenizer& tokenizer) {
  if (name == kSherlockHolmes.name) return LoadBook(kSherlockHolmes, tokenizer);
  if (name == kTomSawyer.name) return LoadBook(kTomSawyer, tokenizer);
  if (name == kPythonStdlib.name) return LoadFileSet(kPythonStdlib, tokenizer);
  if (name == kCmakeManuals.name) return LoadFileSet(kCmakeManuals, tokenizer);
  RETURN_IF_ERROR(CheckBuiltinCalibrationName(name));
  return absl::InternalError(absl::StrCat("built-in set \"", Str(name), "\" has no loader"));
}

using text_scan::DropBom;
using text_scan::IsBlank;

// One JSONL line's sample (`j`: the line's object), or the reason it has none (`*reason` set,
// `sample` untouched). Errors name `where` ("file:line").
Status SampleFromJsonLine(const Json& j, const std::string& where, const Tokenizer& tokenizer,
                          const DataOptions& options, CalibrationSample* sample,
                          std::string* reason) {
  const auto text = j.find("text");
  const auto context = j.find("context");
  const auto continuation = j.find("continuation");
  const bool has_text = text != j.end();
  const bool has_context = context != j.end();
  const bool has_continuation = continuation != j.end();
  if (has_text && (has_context || has_continuation)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": has both \"text\" and \"", has_context ? "context" : "continuation",
                     "\"; a line is either {\"text\"} or {\"context\", \"continuation\"}"));
  }
  auto string_field = [&](const Json& value,
                          std::string_view name) -> StatusOr<const std::string*> {
    if (!value.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": field \"", Str(name), "\" must be a string, got ", value.type_name()));
    }
    return value.get_ptr<const std::string*>();
  };
  const int64_t c = options.context_len;
  const int64_t w = options.probe_len;
  if (has_text) {
    ASSIGN_OR_RETURN(const std::string* s, string_field(*text, "text"));
    std::vector<int32_t> ids = tokenizer.Encode(*s, kRawText);
    if (static_cast<int64_t>(ids.size()) < c + w) {
      *reason = absl::StrCat("text has ", ids.size(), " tokens; a sample needs ", Shape(options));
      return absl::OkStatus();
    }
    sample->context.assign(ids.begin(), ids.begin() + c);
    sample->probe.assign(ids.begin() + c, ids.begin() + c + w);
    return absl::OkStatus();
  }
  if (!has_context && !has_continuation) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": missing field: expected \"text\" or \"context\" and \"continuation\""));
  }
  if (!has_context || !has_continuation) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": missing field \"", has_context ? "continuation" : "context",
                     "\" (\"context\" and \"continuation\" go together)"));
  }
  ASSIGN_OR_RETURN(const std::string* ctx_text, string_field(*context, "context"));
  ASSIGN_OR_RETURN(const std::string* cont_text, string_field(*continuation, "continuation"));
  std::vector<int32_t> ctx = tokenizer.Encode(*ctx_text, kRawText);
  std::vector<int32_t> cont = tokenizer.Encode(*cont_text, kRawText);
  if (static_cast<int64_t>(ctx.size()) < c) {
    *reason = absl::StrCat("context has ", ctx.size(), " tokens; a sample needs ", c);
    return absl::OkStatus();
  }
  if (static_cast<int64_t>(cont.size()) < w) {
    *reason = absl::StrCat("continuation has ", cont.size(), " tokens; the probe needs ", w);
    return absl::OkStatus();
  }
  sample->context.assign(ctx.end() - c, ctx.end());
  sample->probe.assign(cont.begin(), cont.begin() + w);
  return absl::OkStatus();
}

}  // namespace

bool IsJsonlPath(std::string_view path) {
  // ".json" too: such a file is far more often JSONL than prose, and a JSON document read as
  // JSONL fails loudly where read as text it would silently calibrate on JSON syntax.
  return EndsWithNoCase(path, ".jsonl") || EndsWithNoCase(path, ".ndjson") ||
         EndsWithNoCase(path, ".json");
}

DataOptions DataOptionsOf(const method::CalibrationParams& params, bool strict, DataFormat format) {
  return {.samples = static_cast<int>(params.samples),
          .context_len = static_cast<int>(params.context_len),
          .probe_len = static_cast<int>(params.probe_len),
          .strict = strict,
          .format = format,
          .data_seed = params.data_seed};
}

Status ValidateDataOptions(const DataOptions& options) {
  method::CalibrationParams params;
  params.samples = options.samples;
  params.context_len = options.context_len;
  params.probe_len = options.probe_len;
  return method::ValidateCalibrationParams(params, /*n_layers=*/0);
}

std::vector<int64_t> SpreadWindowOrder(int64_t windows, int64_t count, uint64_t seed) {
  RIPPLEKV_CHECK(count >= 0 && count <= windows);
  constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // floor(2^64 / phi)
  // SplitMix64's first output for state `seed`.
  uint64_t u = seed + kGolden;
  u = (u ^ (u >> 30)) * 0xBF58476D1CE4E5B9ull;
  u = (u ^ (u >> 27)) * 0x94D049BB133111EBull;
  u ^= u >> 31;
  // Taken window -> a window to try next (path-compressed), so that resolving a collision costs
  // amortized O(1) and memory O(count) whatever `windows` is.
  std::unordered_map<int64_t, int64_t> next;
  auto free_from = [&](int64_t w) {
    std::vector<int64_t> path;
    for (auto it = next.find(w); it != next.end(); it = next.find(w)) {
      path.push_back(w);
      w = it->second;
    }
    for (int64_t p : path) next[p] = w;
    return w;
  };
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(count));
  const auto m = static_cast<unsigned __int128>(windows);
  for (int64_t k = 0; k < count; ++k) {
    const uint64_t x = u + static_cast<uint64_t>(k) * kGolden;  // mod 2^64
    const auto candidate = static_cast<int64_t>((m * x) >> 64);
    const int64_t w = free_from(candidate);
    next[w] = w + 1 == windows ? 0 : w + 1;
    order.push_back(w);
  }
  return order;
}

StatusOr<CalibrationSet> CalibrationDataFromText(std::string_view text,
                                                 std::string_view source_name,
                                                 const Tokenizer& tokenizer,
                                                 const DataOptions& options) {
  RETURN_IF_ERROR(ValidateDataOptions(options));
  text = DropBom(text);
  if (IsBlank(text)) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration data ", Str(source_name), ": no text (empty or blank)"));
  }
  TokenText tokens{.name = Str(source_name),
                   .ids = tokenizer.Encode(text, kRawText),
                   .part_begins = {0},
                   .part_names = {Str(source_name)}};
  CalibrationSet set;
  ASSIGN_OR_RETURN(set.samples, SpreadSamples(tokens, options.samples, options));
  set.domain = Str(kDomainUser);
  Finish(options, absl::StrCat("user data ", Str(source_name), " (text windows)"),
         SpreadSelection(options, absl::StrCat(tokens.Windows(options))), &set);
  return set;
}

StatusOr<CalibrationSet> CalibrationDataFromJsonl(std::string_view text,
                                                  std::string_view source_name,
                                                  const Tokenizer& tokenizer,
                                                  const DataOptions& options) {
  RETURN_IF_ERROR(ValidateDataOptions(options));
  const std::string name = Str(source_name);
  if (text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("calibration data ", name, ": empty file"));
  }
  CalibrationSet set;
  int json_lines = 0;
  // Lines are read one at a time, so lines after the N-th usable sample are never looked at.
  // Blank: only ASCII whitespace (absl::ascii_isspace).
  RETURN_IF_ERROR(method::ForEachJsonlLine(
      text, name, {.max_line_bytes = kMaxJsonlLineBytes, .blank_chars = method::kAsciiSpace},
      [&](const method::JsonlLine& line) -> StatusOr<method::JsonlNext> {
        ++json_lines;
        CalibrationSample sample;
        std::string reason;
        RETURN_IF_ERROR(
            SampleFromJsonLine(line.value, line.where, tokenizer, options, &sample, &reason));
        if (!reason.empty()) {
          if (options.strict) {
            return absl::InvalidArgumentError(
                absl::StrCat(line.where, ": ", reason, " (--strict)"));
          }
          set.skipped.push_back({.source = line.where, .reason = std::move(reason)});
          return method::JsonlNext::kMore;
        }
        sample.index = static_cast<int>(set.samples.size());
        sample.source = line.where;
        set.samples.push_back(std::move(sample));
        return static_cast<int>(set.samples.size()) < options.samples ? method::JsonlNext::kMore
                                                                      : method::JsonlNext::kStop;
      }));
  if (json_lines == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration data ", name, ": no JSON lines (only blank lines)"));
  }
  if (static_cast<int>(set.samples.size()) < options.samples) {
    std::string message =
        absl::StrCat(name, ": ", set.samples.size(), " usable samples of ", Shape(options),
                     " tokens in ", json_lines, " JSON lines, ", options.samples, " requested; ",
                     set.skipped.size(), " lines skipped");
    for (size_t i = 0; i < set.skipped.size() && i < kSkipsInError; ++i) {
      absl::StrAppend(&message, i == 0 ? ": " : "; ", set.skipped[i].source, " (",
                      set.skipped[i].reason, ")");
    }
    if (set.skipped.size() > kSkipsInError) {
      absl::StrAppend(&message, "; and ", set.skipped.size() - kSkipsInError, " more");
    }
    return absl::InvalidArgumentError(message);
  }
  set.domain = Str(kDomainUser);
  Finish(options, absl::StrCat("user data ", name, " (jsonl)"), "", &set);
  return set;
}

StatusOr<CalibrationSet> LoadCalibrationData(const std::string& path, const Tokenizer& tokenizer,
                                             const DataOptions& options) {
  RETURN_IF_ERROR(ValidateDataOptions(options));
  const bool jsonl = options.format == DataFormat::kJsonl ||
                     (options.format == DataFormat::kAuto && IsJsonlPath(path));
  // The file is read once, whole; the in-memory functions do the rest.
  StatusOr<std::string> bytes =
      ReadFileBounded(path, jsonl ? kMaxCalibrationJsonlBytes : kMaxCalibrationTextBytes);
  if (!bytes.ok()) {
    return Status(bytes.status().code(),
                  absl::StrCat("calibration data ", bytes.status().message()));
  }
  if (jsonl) return CalibrationDataFromJsonl(*bytes, path, tokenizer, options);
  return CalibrationDataFromText(*bytes, path, tokenizer, options);
}

std::span<const std::string_view> BuiltinCalibrationNames() { return kBuiltinNames; }

Status CheckBuiltinCalibrationName(std::string_view name) {
  if (std::find(kBuiltinNames.begin(), kBuiltinNames.end(), name) != kBuiltinNames.end()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown built-in calibration set \"", Str(name),
      "\"; known: ", absl::StrJoin(kBuiltinNames, ", ", [](std::string* out, std::string_view n) {
        absl::StrAppend(out, Str(n));
      })));
}

StatusOr<CalibrationSet> BuiltinCalibrationData(std::string_view name, const Tokenizer& tokenizer,
                                                const DataOptions& options) {
  RETURN_IF_ERROR(ValidateDataOptions(options));
  RETURN_IF_ERROR(CheckBuiltinCalibrationName(name));
  CalibrationSet set;
  if (name != kDefaultCalibrationBuiltin) {
    ASSIGN_OR_RETURN(const BuiltinText text, LoadSingleBuiltin(name, tokenizer));
    ASSIGN_OR_RETURN(set.samples, SpreadSamples(text.tokens, options.samples, options));
    set.domain = text.domain;
    Finish(options, absl::StrCat("built-in ", Str(name), " (", text.domain, ": ", text.what, ")"),
           SpreadSelection(options, absl::StrCat(text.tokens.Windows(options))), &set);
    return set;
  }
  // "mixed": the domains in turn, each in its own spread order.
  constexpr std::array<std::string_view, 3> kParts = {kSherlockHolmes.name, kPythonStdlib.name,
                                                      kCmakeManuals.name};
  constexpr int64_t kTurn = kParts.size();
  std::vector<BuiltinText> texts;
  std::vector<std::vector<CalibrationSample>> parts;
  for (int64_t d = 0; d < kTurn; ++d) {
    ASSIGN_OR_RETURN(BuiltinText text, LoadSingleBuiltin(kParts[d], tokenizer));
    // Samples k = d, d + 3, ... of the set come from this corpus.
    const int64_t count = (options.samples - d + kTurn - 1) / kTurn;
    ASSIGN_OR_RETURN(std::vector<CalibrationSample> samples,
                     SpreadSamples(text.tokens, count, options));
    texts.push_back(std::move(text));
    parts.push_back(std::move(samples));
  }
  for (int k = 0; k < options.samples; ++k) {
    CalibrationSample sample = std::move(parts[k % kTurn][k / kTurn]);
    sample.index = k;
    set.samples.push_back(std::move(sample));
  }
  set.domain = Str(kDomainMixed);
  std::vector<std::string> whats, domains, windows;
  for (const BuiltinText& text : texts) {
    whats.push_back(absl::StrCat(text.domain, ": ", text.what));
    domains.push_back(text.domain);
    windows.push_back(absl::StrCat(text.tokens.Windows(options)));
  }
  Finish(options, absl::StrCat("built-in mixed (", absl::StrJoin(whats, "; "), ")"),
         absl::StrCat(absl::StrJoin(domains, ", "), " in turn, ",
                      SpreadSelection(options, absl::StrJoin(windows, ", "))),
         &set);
  return set;
}

StatusOr<CalibrationSet> DefaultCalibrationData(const Tokenizer& tokenizer,
                                                const DataOptions& options) {
  return BuiltinCalibrationData(kDefaultCalibrationBuiltin, tokenizer, options);
}

}  // namespace ripplekv::worker

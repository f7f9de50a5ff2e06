#include "worker/data/calibration_data.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/base/file_io.h"
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

void Finish(const DataOptions& options, std::string_view origin, CalibrationSet* set) {
  Fnv1a64 hash;
  hash.Add(static_cast<uint32_t>(options.context_len));
  hash.Add(static_cast<uint32_t>(options.probe_len));
  for (const CalibrationSample& s : set->samples) {
    for (int32_t t : s.context) hash.Add(static_cast<uint32_t>(t));
    for (int32_t t : s.probe) hash.Add(static_cast<uint32_t>(t));
  }
  set->fingerprint = hash.value();
  set->description =
      absl::StrFormat("%s: %d samples x (context %d + probe %d) tokens, ", Str(origin),
                      set->samples.size(), options.context_len, options.probe_len);
  if (!set->skipped.empty()) {
    absl::StrAppendFormat(&set->description, "%d lines skipped, ", set->skipped.size());
  }
  absl::StrAppendFormat(&set->description, "fingerprint %016x", set->fingerprint);
}

using text_scan::DropBom;
using text_scan::IsBlank;

// One JSONL line's sample, or the reason it has none (`*reason` set, `sample` untouched).
// Errors name `where` ("file:line").
Status SampleFromJsonLine(std::string_view line, const std::string& where,
                          const Tokenizer& tokenizer, const DataOptions& options,
                          CalibrationSample* sample, std::string* reason) {
  Json j;
  try {  // nlohmann throws on malformed input; converted here at the edge
    j = Json::parse(line);
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": invalid JSON at byte ", e.byte, ": ", e.what()));
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": invalid JSON: ", e.what()));
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": expected a JSON object, got ", j.type_name()));
  }
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

Status ValidateDataOptions(const DataOptions& options) {
  if (options.samples < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration samples must be >= 1, got ", options.samples));
  }
  if (options.context_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("context length must be >= 1 token, got ", options.context_len));
  }
  if (options.probe_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe length must be >= 1 token, got ", options.probe_len));
  }
  if (options.probe_len >= options.context_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "probe length (", options.probe_len, ") must be shorter than the context length (",
        options.context_len, "): the probe is the short scored tail after the context"));
  }
  return absl::OkStatus();
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
  const std::vector<int32_t> ids = tokenizer.Encode(text, kRawText);
  const int64_t window = int64_t{options.context_len} + options.probe_len;
  const int64_t windows = static_cast<int64_t>(ids.size()) / window;
  if (windows < options.samples) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration data ", Str(source_name), ": ", ids.size(), " tokens make ",
                     windows, " windows of ", Shape(options), " tokens, ", options.samples,
                     " requested (needs ", window * options.samples, " tokens)"));
  }
  CalibrationSet set;
  set.samples.reserve(static_cast<size_t>(options.samples));
  for (int k = 0; k < options.samples; ++k) {
    const int64_t offset = k * window;
    CalibrationSample sample;
    sample.index = k;
    const auto begin = ids.begin() + offset;
    sample.context.assign(begin, begin + options.context_len);
    sample.probe.assign(begin + options.context_len, begin + window);
    sample.source = absl::StrCat(Str(source_name), "@", offset);
    set.samples.push_back(std::move(sample));
  }
  Finish(options, absl::StrCat(Str(source_name), " (text windows)"), &set);
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
  int line_number = 0;
  size_t pos = 0;
  // Lines are cut one at a time, so lines after the N-th usable sample are never looked at.
  while (static_cast<int>(set.samples.size()) < options.samples && pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    const size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view view = text.substr(pos, end - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_number;
    if (view.size() > kMaxJsonlLineBytes) {
      return absl::InvalidArgumentError(absl::StrCat(name, ":", line_number, ": line longer than ",
                                                     kMaxJsonlLineBytes, " bytes"));
    }
    if (!view.empty() && view.back() == '\r') view.remove_suffix(1);
    if (line_number == 1) view = DropBom(view);
    if (IsBlank(view)) continue;
    ++json_lines;
    const std::string where = absl::StrCat(name, ":", line_number);
    CalibrationSample sample;
    std::string reason;
    RETURN_IF_ERROR(SampleFromJsonLine(view, where, tokenizer, options, &sample, &reason));
    if (!reason.empty()) {
      if (options.strict) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": ", reason, " (--strict)"));
      }
      set.skipped.push_back({.source = where, .reason = std::move(reason)});
      continue;
    }
    sample.index = static_cast<int>(set.samples.size());
    sample.source = where;
    set.samples.push_back(std::move(sample));
  }
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
  Finish(options, absl::StrCat(name, " (jsonl)"), &set);
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

StatusOr<CalibrationSet> DefaultCalibrationData(const Tokenizer& tokenizer,
                                                const DataOptions& options) {
  RETURN_IF_ERROR(ValidateDataOptions(options));
  ASSIGN_OR_RETURN(std::string text, ReadBuiltinCorpus(kSherlockHolmes));
  ASSIGN_OR_RETURN(CalibrationSet set,
                   CalibrationDataFromText(text, kSherlockHolmes.path, tokenizer, options));
  set.description = absl::StrCat("built-in: ", Str(kSherlockHolmes.title), ", Debian package ",
                                 Str(kSherlockHolmes.package), "; ", set.description);
  return set;
}

}  // namespace ripplekv::worker

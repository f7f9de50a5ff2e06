#include "worker/calibration/calibration_data.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace ripplekv::worker {
namespace {

using Json = nlohmann::json;

constexpr int64_t kMaxTextFileBytes = int64_t{256} << 20;  // plain text is read whole
constexpr size_t kMaxJsonlLineBytes = size_t{64} << 20;
constexpr size_t kReadChunkBytes = size_t{1} << 16;
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

bool IsBlank(std::string_view line) {
  return std::all_of(line.begin(), line.end(),
                     [](char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); });
}

std::string_view DropBom(std::string_view text) {
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (text.starts_with(kBom)) text.remove_prefix(kBom.size());
  return text;
}

// Reads a file line by line without ever holding more than one line (bounded by
// kMaxJsonlLineBytes) in memory. Lines lose their "\n" and a "\r" before it.
class LineReader {
 public:
  explicit LineReader(std::ifstream* in) : in_(in) {}

  // Sets *line to the next line; false at the end of the file or on an error (too_long(),
  // read_error()).
  bool Next(std::string* line) {
    line->clear();
    while (true) {
      if (pos_ == end_) {
        if (!eof_) {
          Fill();
          continue;
        }
        if (line->empty()) return false;  // no unterminated last line
        return Emit(line);
      }
      const char* begin = buffer_.data() + pos_;
      const char* stop = static_cast<const char*>(std::memchr(begin, '\n', end_ - pos_));
      const size_t take = stop ? static_cast<size_t>(stop - begin) : end_ - pos_;
      if (line->size() + take > kMaxJsonlLineBytes) {
        too_long_ = true;
        return false;
      }
      line->append(begin, take);
      pos_ += take;
      if (stop) {
        ++pos_;
        return Emit(line);
      }
    }
  }

  int line_number() const { return line_number_; }
  bool too_long() const { return too_long_; }
  bool read_error() const { return read_error_; }

 private:
  bool Emit(std::string* line) {
    if (!line->empty() && line->back() == '\r') line->pop_back();
    ++line_number_;
    return true;
  }

  void Fill() {
    buffer_.resize(kReadChunkBytes);
    in_->read(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    pos_ = 0;
    end_ = static_cast<size_t>(in_->gcount());
    if (in_->bad() || (in_->fail() && !in_->eof())) {
      read_error_ = true;
      end_ = 0;
    }
    eof_ = end_ == 0 || in_->eof();
  }

  std::ifstream* in_;
  std::string buffer_;
  size_t pos_ = 0;
  size_t end_ = 0;
  bool eof_ = false;
  bool too_long_ = false;
  bool read_error_ = false;
  int line_number_ = 0;
};

Status OpenRegularFile(const std::string& path, std::ifstream* in, int64_t* size) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (st.type() == std::filesystem::file_type::not_found) {  // ec holds ENOENT then
    return absl::NotFoundError(absl::StrCat("calibration data ", path, ": no such file"));
  }
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("calibration data ", path, ": cannot access: ", ec.message()));
  }
  if (!std::filesystem::is_regular_file(st)) {
    return absl::FailedPreconditionError(
        absl::StrCat("calibration data ", path, ": not a regular file"));
  }
  const uintmax_t bytes = std::filesystem::file_size(path, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("calibration data ", path, ": cannot read its size: ", ec.message()));
  }
  in->open(path, std::ios::binary);
  if (!in->is_open()) {
    return absl::FailedPreconditionError(
        absl::StrCat("calibration data ", path, ": cannot open for reading"));
  }
  *size = static_cast<int64_t>(bytes);
  return absl::OkStatus();
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in;
  int64_t size = 0;
  RETURN_IF_ERROR(OpenRegularFile(path, &in, &size));
  if (size > kMaxTextFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "calibration data ", path, ": ", size, " bytes; plain-text data is read whole ",
        "and may be at most ", kMaxTextFileBytes, " bytes"));
  }
  std::string bytes(static_cast<size_t>(size), '\0');
  in.read(bytes.data(), size);
  if (in.gcount() != size) {
    return absl::FailedPreconditionError(
        absl::StrCat("calibration data ", path, ": read ", in.gcount(), " of ", size, " bytes"));
  }
  return bytes;
}

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

StatusOr<CalibrationSet> LoadJsonl(const std::string& path, const Tokenizer& tokenizer,
                                   const DataOptions& options) {
  std::ifstream in;
  int64_t size = 0;
  RETURN_IF_ERROR(OpenRegularFile(path, &in, &size));
  if (size == 0) {
    return absl::InvalidArgumentError(absl::StrCat("calibration data ", path, ": empty file"));
  }
  CalibrationSet set;
  LineReader reader(&in);
  std::string line;
  int json_lines = 0;
  while (static_cast<int>(set.samples.size()) < options.samples && reader.Next(&line)) {
    std::string_view view = line;
    if (reader.line_number() == 1) view = DropBom(view);
    if (IsBlank(view)) continue;
    ++json_lines;
    const std::string where = absl::StrCat(path, ":", reader.line_number());
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
  if (reader.too_long()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ":", reader.line_number() + 1, ": line longer than ", kMaxJsonlLineBytes, " bytes"));
  }
  if (reader.read_error()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": read error after line ", reader.line_number()));
  }
  if (json_lines == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration data ", path, ": no JSON lines (only blank lines)"));
  }
  if (static_cast<int>(set.samples.size()) < options.samples) {
    std::string message =
        absl::StrCat(path, ": ", set.samples.size(), " usable samples of ", Shape(options),
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
  Finish(options, absl::StrCat(path, " (jsonl)"), &set);
  return set;
}

bool IsJsonlPath(std::string_view path) {
  // ".json" too: such a file is far more often JSONL than prose, and a JSON document read as
  // JSONL fails loudly where read as text it would silently calibrate on JSON syntax.
  return EndsWithNoCase(path, ".jsonl") || EndsWithNoCase(path, ".ndjson") ||
         EndsWithNoCase(path, ".json");
}

// Lines of `text` as views without their "\n".
std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) {
      if (start < text.size()) lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

bool StartsWithAny(std::string_view line, std::initializer_list<std::string_view> prefixes) {
  for (std::string_view p : prefixes) {
    if (StartsWithNoCase(line, p)) return true;
  }
  return false;
}

}  // namespace

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

StatusOr<CalibrationSet> LoadCalibrationData(const std::string& path, const Tokenizer& tokenizer,
                                             const DataOptions& options) {
  RETURN_IF_ERROR(ValidateDataOptions(options));
  const bool jsonl = options.format == DataFormat::kJsonl ||
                     (options.format == DataFormat::kAuto && IsJsonlPath(path));
  if (jsonl) return LoadJsonl(path, tokenizer, options);
  ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  return CalibrationDataFromText(text, path, tokenizer, options);
}

std::string StripGutenbergBoilerplate(std::string_view text) {
  text = DropBom(text);
  std::string unix_text;
  unix_text.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    unix_text.push_back(text[i]);
  }
  std::vector<std::string_view> lines = SplitLines(unix_text);
  size_t first = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (StartsWithAny(lines[i], {"*** START OF"})) {
      first = i + 1;
      break;
    }
  }
  size_t last = lines.size();  // one past the body
  for (size_t i = first; i < lines.size(); ++i) {
    if (StartsWithAny(lines[i],
                      {"*** END OF", "End of the Project Gutenberg", "End of Project Gutenberg"})) {
      last = i;
      break;
    }
  }
  while (first < last && IsBlank(lines[first])) ++first;
  if (first < last && StartsWithAny(lines[first], {"Produced by"})) {
    while (first < last && !IsBlank(lines[first])) ++first;
  }
  while (first < last && IsBlank(lines[first])) ++first;
  while (last > first && IsBlank(lines[last - 1])) --last;
  std::string body;
  for (size_t i = first; i < last; ++i) {
    absl::StrAppend(&body, std::string(lines[i]), i + 1 < last ? "\n" : "");
  }
  return body;
}

StatusOr<std::string> ReadBuiltinCorpus(const BuiltinCorpus& corpus) {
  const std::string path(corpus.path);
  StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("built-in calibration text \"", Str(corpus.name), "\" is not available (",
                     bytes.status().message(), "); install the Debian package ",
                     Str(corpus.package), " (scripts/deps does), or pass --data FILE"));
  }
  std::string body = StripGutenbergBoilerplate(*bytes);
  if (IsBlank(body)) {
    return absl::InvalidArgumentError(
        absl::StrCat("built-in calibration text ", path, ": no text after stripping"));
  }
  return body;
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

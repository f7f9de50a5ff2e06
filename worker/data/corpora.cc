#include "worker/data/corpora.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/strings.h"
#include "worker/data/text_scan.h"

namespace ripplekv::worker {
namespace {

// ASCII case-insensitive prefix test (Debian's Abseil takes no std::string_view).
bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() &&
         std::equal(prefix.begin(), prefix.end(), s.begin(), [](char a, char b) {
           return absl::ascii_tolower(static_cast<unsigned char>(a)) ==
                  absl::ascii_tolower(static_cast<unsigned char>(b));
         });
}

bool StartsWithAny(std::string_view line, std::initializer_list<std::string_view> prefixes) {
  for (std::string_view p : prefixes) {
    if (StartsWithNoCase(line, p)) return true;
  }
  return false;
}

using text_scan::DropBom;
using text_scan::IsBlank;

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

// The numbers of a version "3.11" ({3, 11}); empty unless `text` is one or more dot-separated runs
// of decimal digits.
std::vector<int> ParseVersion(std::string_view text) {
  std::vector<int> parts;
  while (true) {
    const size_t dot = text.find('.');
    const std::string_view part = text.substr(0, dot);
    int value = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size() ||
        !std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return {};
    }
    parts.push_back(value);
    if (dot == std::string_view::npos) return parts;
    text.remove_prefix(dot + 1);
  }
}

std::string NotAvailable(std::string_view name, std::string_view why, std::string_view package) {
  return absl::StrCat("built-in text \"", Sv(name), "\" is not available (", Sv(why),
                      "); install the Debian package ", Sv(package),
                      " (scripts/deps does), or pass --data FILE");
}

}  // namespace

StatusOr<std::string> ReadBuiltinCorpus(const BuiltinCorpus& corpus) {
  const std::string path(corpus.path);
  StatusOr<std::string> bytes = ReadFileBounded(path, kMaxCorpusFileBytes);
  if (!bytes.ok()) {
    return absl::FailedPreconditionError(
        NotAvailable(corpus.name, std::string(bytes.status().message()), corpus.package));
  }
  std::string body = StripGutenbergBoilerplate(*bytes);
  if (IsBlank(body)) {
    return absl::InvalidArgumentError(
        absl::StrCat("built-in text ", path, ": no text after stripping"));
  }
  return body;
}

StatusOr<std::string> FindBuiltinFileSetDir(const BuiltinFileSet& files) {
  namespace fs = std::filesystem;
  const std::string prefix(files.dir_prefix);
  const size_t slash = prefix.rfind('/');
  const fs::path parent =
      slash == std::string::npos ? fs::path(".") : fs::path(prefix.substr(0, slash + 1));
  const std::string stem = slash == std::string::npos ? prefix : prefix.substr(slash + 1);
  std::vector<std::pair<std::vector<int>, std::string>> candidates;  // (version, directory)
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string entry = it->path().filename().string();
    if (!entry.starts_with(stem)) continue;
    std::vector<int> version = ParseVersion(std::string_view(entry).substr(stem.size()));
    if (version.empty()) continue;
    candidates.emplace_back(std::move(version), (parent / entry).string());
  }
  // Highest version first; equal versions ("3.11" and "3.011") by name, so the order is total.
  std::sort(candidates.begin(), candidates.end(),
            [](const auto& a, const auto& b) { return a > b; });
  std::string first_missing;
  for (const auto& [version, dir] : candidates) {
    bool complete = true;
    for (std::string_view file : files.files) {
      const std::string path = JoinPath(dir, file);
      std::error_code file_ec;
      if (!fs::is_regular_file(path, file_ec)) {
        if (first_missing.empty()) first_missing = path;
        complete = false;
        break;
      }
    }
    if (complete) return dir;
  }
  const std::string why =
      first_missing.empty()
          ? absl::StrCat("no directory ", prefix, "<version>")
          : absl::StrCat("no directory ", prefix, "<version> holds all ", files.files.size(),
                         " files; ", first_missing, " is missing");
  return absl::FailedPreconditionError(NotAvailable(files.name, why, files.package));
}

StatusOr<std::vector<CorpusFile>> ReadBuiltinFileSet(const BuiltinFileSet& files) {
  ASSIGN_OR_RETURN(const std::string dir, FindBuiltinFileSetDir(files));
  std::vector<CorpusFile> out;
  out.reserve(files.files.size());
  for (std::string_view file : files.files) {
    CorpusFile read{.path = JoinPath(dir, file)};
    StatusOr<std::string> bytes = ReadFileBounded(read.path, kMaxCorpusFileBytes);
    if (!bytes.ok()) {
      return absl::FailedPreconditionError(
          NotAvailable(files.name, std::string(bytes.status().message()), files.package));
    }
    read.text = std::string(DropBom(*bytes));
    if (IsBlank(read.text)) {
      return absl::InvalidArgumentError(
          absl::StrCat("built-in text ", read.path, ": empty or blank"));
    }
    out.push_back(std::move(read));
  }
  return out;
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

}  // namespace ripplekv::worker

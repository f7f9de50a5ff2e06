#include "worker/data/corpora.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "kernels/base/file_io.h"
#include "kernels/base/strings.h"
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

}  // namespace

StatusOr<std::string> ReadBuiltinCorpus(const BuiltinCorpus& corpus) {
  const std::string path(corpus.path);
  StatusOr<std::string> bytes = ReadFileBounded(path, kMaxCorpusFileBytes);
  if (!bytes.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("built-in text \"", Sv(corpus.name), "\" is not available (",
                     bytes.status().message(), "); install the Debian package ", Sv(corpus.package),
                     " (scripts/deps does), or pass --data FILE"));
  }
  std::string body = StripGutenbergBoilerplate(*bytes);
  if (IsBlank(body)) {
    return absl::InvalidArgumentError(
        absl::StrCat("built-in text ", path, ": no text after stripping"));
  }
  return body;
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

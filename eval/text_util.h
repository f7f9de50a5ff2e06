#pragma once
// Python-compatible text primitives for the answer metrics (metrics.h), which port Python
// reference code (LongBench, RULER, the `rouge` and `fuzzywuzzy` packages). Python works on code
// points of valid Unicode strings, so text is first made valid UTF-8 (SanitizeUtf8), then:
//   * PyLower: str.lower() with simple case mapping (towlower in the C.UTF-8 locale; ASCII only
//     when that locale is missing). Python's special cases (final sigma, U+0130) are not applied.
//   * PySplit / IsPySpace: str.split() with no argument (Unicode whitespace, as str.isspace()).
//   * Regex: PCRE2 in UTF + UCP mode, so \d is Unicode Nd and \b/\w follow Unicode letters and
//     numbers, as Python 3's re does for str patterns.
// All functions are pure and thread-safe.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ripplekv::eval::internal {

// Code points of `text`; every byte that does not start a well-formed UTF-8 sequence (RFC 3629:
// no overlongs, no surrogates, nothing above U+10FFFF) becomes one U+FFFD.
std::u32string DecodeUtf8(std::string_view text);
std::string EncodeUtf8(std::u32string_view cps);
// EncodeUtf8(DecodeUtf8(text)): valid UTF-8, identical to `text` when it already was.
std::string SanitizeUtf8(std::string_view text);

char32_t PyLower(char32_t cp);
// Lower-cases valid UTF-8 text code point by code point.
std::string PyLower(std::string_view utf8);
bool IsPySpace(char32_t cp);
// str.split(): the maximal runs of non-whitespace code points of valid UTF-8 text.
std::vector<std::string> PySplit(std::string_view utf8);
// " ".join(s.split()).
std::string PyCollapseSpaces(std::string_view utf8);

// A PCRE2 pattern compiled once with UTF | UCP. Matching takes valid UTF-8 (callers sanitize).
// Safe to share between threads (each call uses its own match data).
class Regex {
 public:
  // Aborts when `pattern` does not compile: patterns are compile-time constants of this library.
  explicit Regex(std::string_view pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // re.findall: for each non-overlapping match, group 1 when the pattern has a group, else the
  // whole match. Empty matches are not produced by our patterns and are skipped.
  std::vector<std::string> FindAll(std::string_view text) const;
  // re.sub(pattern, replacement, text) with a literal replacement.
  std::string ReplaceAll(std::string_view text, std::string_view replacement) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ripplekv::eval::internal

#include "eval/text_util.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <locale.h>
#include <pcre2.h>
#include <wctype.h>

#include <cstdlib>

namespace ripplekv::eval::internal {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

bool IsContinuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// The C.UTF-8 locale for towlower_l, created once; null when the system lacks it.
locale_t Utf8Locale() {
  static const locale_t locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
  return locale;
}

}  // namespace

std::u32string DecodeUtf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto b0 = static_cast<uint8_t>(text[i]);
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    int len = 0;
    char32_t cp = 0;
    char32_t min = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2, cp = b0 & 0x1F, min = 0x80;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3, cp = b0 & 0x0F, min = 0x800;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4, cp = b0 & 0x07, min = 0x10000;
    }
    bool ok = len > 0 && i + len <= text.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto b = static_cast<uint8_t>(text[i + k]);
      ok = IsContinuation(b);
      cp = (cp << 6) | (b & 0x3F);
    }
    ok = ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (ok) {
      out.push_back(cp);
      i += len;
    } else {
      out.push_back(kReplacement);
      ++i;
    }
  }
  return out;
}

std::string EncodeUtf8(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) {
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacement;
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

std::string SanitizeUtf8(std::string_view text) { return EncodeUtf8(DecodeUtf8(text)); }

char32_t PyLower(char32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + ('a' - 'A') : cp;
  const locale_t locale = Utf8Locale();
  if (locale == static_cast<locale_t>(0)) return cp;
  const wint_t lower = towlower_l(static_cast<wint_t>(cp), locale);
  return lower > 0x10FFFF ? cp : static_cast<char32_t>(lower);
}

std::string PyLower(std::string_view utf8) {
  std::u32string cps = DecodeUtf8(utf8);
  for (char32_t& cp : cps) cp = PyLower(cp);
  return EncodeUtf8(cps);
}

bool IsPySpace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::vector<std::string> PySplit(std::string_view utf8) {
  std::vector<std::string> words;
  std::u32string current;
  for (char32_t cp : DecodeUtf8(utf8)) {
    if (IsPySpace(cp)) {
      if (!current.empty()) words.push_back(EncodeUtf8(current));
      current.clear();
    } else {
      current.push_back(cp);
    }
  }
  if (!current.empty()) words.push_back(EncodeUtf8(current));
  return words;
}

std::string PyCollapseSpaces(std::string_view utf8) {
  std::string out;
  for (const std::string& word : PySplit(utf8)) {
    if (!out.empty()) out.push_back(' ');
    out += word;
  }
  return out;
}

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool has_group = false;
};

Regex::Regex(std::string_view pattern) : impl_(std::make_unique<Impl>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (impl_->code == nullptr) std::abort();  // a constant pattern of this library is broken
  uint32_t groups = 0;
  pcre2_pattern_info(impl_->code, PCRE2_INFO_CAPTURECOUNT, &groups);
  impl_->has_group = groups > 0;
}

Regex::~Regex() { pcre2_code_free(impl_->code); }

namespace {

// Calls `on_match(begin, end, group_begin, group_end)` for every non-empty, non-overlapping match.
template <typename F>
void ForEachMatch(const pcre2_code* code, std::string_view text, F on_match) {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  if (md == nullptr) std::abort();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  PCRE2_SIZE start = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), start,
                               start == 0 ? 0 : PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc < 0) break;  // PCRE2_ERROR_NOMATCH, or an error on invalid input: no more matches
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    if (ov[1] <= ov[0]) {  // empty match: step over one code point
      size_t next = ov[0] + 1;
      while (next < text.size() && IsContinuation(static_cast<uint8_t>(text[next]))) ++next;
      start = next;
      continue;
    }
    const bool group = rc >= 2 && ov[2] != PCRE2_UNSET;
    on_match(ov[0], ov[1], group ? ov[2] : ov[0], group ? ov[3] : ov[0]);
    start = ov[1];
  }
  pcre2_match_data_free(md);
}

}  // namespace

std::vector<std::string> Regex::FindAll(std::string_view text) const {
  std::vector<std::string> out;
  ForEachMatch(impl_->code, text, [&](size_t b, size_t e, size_t gb, size_t ge) {
    if (impl_->has_group) {
      out.emplace_back(text.substr(gb, ge - gb));
    } else {
      out.emplace_back(text.substr(b, e - b));
    }
  });
  return out;
}

std::string Regex::ReplaceAll(std::string_view text, std::string_view replacement) const {
  std::string out;
  size_t copied = 0;
  ForEachMatch(impl_->code, text, [&](size_t b, size_t e, size_t, size_t) {
    out.append(text.substr(copied, b - copied));
    out.append(replacement);
    copied = e;
  });
  out.append(text.substr(copied));
  return out;
}

}  // namespace ripplekv::eval::internal

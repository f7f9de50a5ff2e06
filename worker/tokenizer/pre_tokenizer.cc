#include "worker/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "fmt/format.h"
#include "spdlog/spdlog.h"
#include "worker/tokenizer/strings.h"
#include "worker/tokenizer/utf8.h"

namespace ripplekv::worker {

using tokenizer_internal::Append;
using tokenizer_internal::Cat;

namespace {

// Regexes as llama.cpp spells them (llama-vocab.cpp).
constexpr std::string_view kGpt2Regex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr std::string_view kLlama3Regex =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kQwen2Regex =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Unicode White_Space, the set llama.cpp's unicode_set_whitespace holds; PCRE2's own \s differs
// (it adds U+180E in some versions), so we spell it out.
constexpr std::string_view kWhiteSpaceClassBody =
    "\\x{09}-\\x{0D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

struct PreTypeEntry {
  std::vector<std::string_view> names;
  std::vector<std::string_view> regexes;
  bool ignore_merges;
  bool add_bos;
};

const std::vector<PreTypeEntry>& PreTypeTable() {
  static const auto* const table = new std::vector<PreTypeEntry>{
      {{"default", ""},
       {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2Regex, "\\p{N}+", "[0-9][0-9][0-9]"},
       false,
       false},
      {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b",
        "mellum2"},
       {"\\p{N}", kGpt2Regex},
       false,
       false},
      {{"gpt-2",           "gpt2",       "phi-2",      "jina-es",      "jina-de",
        "gigachat",        "jina-v2-es", "jina-v2-de", "a.x-4.0",      "mellum",
        "modern-bert",     "mpt",        "olmo",       "jais",         "trillion",
        "granite-docling", "exaone4",    "jina-v1-en", "jina-v2-code", "roberta-bpe"},
       {kGpt2Regex},
       false,
       false},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
        "jina-v5-nano"},
       {kLlama3Regex},
       true,
       true},
      {{"dbrx", "smaug-bpe"}, {kLlama3Regex}, false, false},
      {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan"},
       {kQwen2Regex},
       false,
       false},
  };
  return *table;
}

size_t NextCharBoundary(std::string_view s, size_t pos) {
  ++pos;
  while (pos < s.size() && (static_cast<uint8_t>(s[pos]) & 0xC0) == 0x80) ++pos;
  return pos;
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* md) const { pcre2_match_data_free(md); }
};

}  // namespace

struct RegexSplitter::Code {
  pcre2_code* code = nullptr;
  std::string source;  // the regex as given, for messages
  ~Code() { pcre2_code_free(code); }
};

StatusOr<PreTokenizerType> LookupPreTokenizer(std::string_view name) {
  std::vector<std::string> known;
  for (const PreTypeEntry& entry : PreTypeTable()) {
    for (std::string_view n : entry.names) {
      if (n == name) {
        PreTokenizerType type;
        for (std::string_view r : entry.regexes) type.regexes.emplace_back(r);
        type.ignore_merges = entry.ignore_merges;
        type.add_bos = entry.add_bos;
        return type;
      }
      if (!n.empty()) known.emplace_back(n);
    }
  }
  return absl::InvalidArgumentError(Cat("unknown pre-tokenizer type '", name, "' (supported: ",
                                        fmt::format("{}", fmt::join(known, ", ")), ")"));
}

StatusOr<std::string> ToPcre2Pattern(std::string_view regex) {
  std::string out;
  out.reserve(regex.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < regex.size(); ++i) {
    const char c = regex[i];
    if (c == '\\' && i + 1 < regex.size()) {
      const char e = regex[++i];
      if (e == 's') {
        if (in_class) {
          Append(&out, kWhiteSpaceClassBody);
        } else {
          Append(&out, "[", kWhiteSpaceClassBody, "]");
        }
      } else if (e == 'S') {
        if (in_class) {
          return absl::InvalidArgumentError(Cat("regex '", regex,
                                                "': \\S inside a character class at offset ", i - 1,
                                                " is not supported"));
        }
        Append(&out, "[^", kWhiteSpaceClassBody, "]");
      } else {
        out.push_back('\\');
        out.push_back(e);
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      // A ']' right after '[' or '[^' is a literal, not the end of the class.
      if (i + 1 < regex.size() && regex[i + 1] == '^') out.push_back(regex[++i]);
      if (i + 1 < regex.size() && regex[i + 1] == ']') out.push_back(regex[++i]);
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out.push_back(c);
  }
  return out;
}

StatusOr<RegexSplitter> RegexSplitter::Create(std::span<const std::string> regexes) {
  std::vector<std::shared_ptr<const Code>> codes;
  for (const std::string& regex : regexes) {
    ASSIGN_OR_RETURN(const std::string pattern, ToPcre2Pattern(regex));
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error_code,
                                     &error_offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error_code, message, sizeof(message));
      return absl::InvalidArgumentError(
          Cat("pre-tokenizer regex '", regex,
              "' does not compile: ", reinterpret_cast<const char*>(message), " (at offset ",
              error_offset, " of the PCRE2 pattern '", pattern, "')"));
    }
    auto compiled = std::make_shared<Code>();
    compiled->code = code;
    compiled->source = regex;
    // JIT is an optimisation only; pcre2_match falls back to the interpreter without it.
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    codes.push_back(std::move(compiled));
  }
  return RegexSplitter(std::move(codes));
}

PreTokenized RegexSplitter::Split(std::string_view text) const {
  PreTokenized result;
  const std::vector<uint32_t> cpts = DecodeUtf8Lenient(text);
  result.text.reserve(text.size());
  // PCRE2 needs valid UTF-8, so surrogates (which llama.cpp keeps) are matched as U+E000, another
  // "other" code point of the same encoded length; byte offsets are the same in both strings.
  std::string shadow;
  bool has_surrogate = false;
  for (uint32_t cpt : cpts) has_surrogate |= (cpt >= 0xD800 && cpt <= 0xDFFF);
  for (uint32_t cpt : cpts) {
    AppendUtf8(cpt, &result.text);
    if (has_surrogate) AppendUtf8(cpt >= 0xD800 && cpt <= 0xDFFF ? 0xE000 : cpt, &shadow);
  }
  const std::string_view subject_all = has_surrogate ? shadow : result.text;

  std::vector<std::pair<size_t, size_t>> pieces;
  if (!result.text.empty()) pieces.emplace_back(0, result.text.size());
  std::vector<std::pair<size_t, size_t>> next;
  for (const auto& code : codes_) {
    std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
        pcre2_match_data_create_from_pattern(code->code, nullptr));
    next.clear();
    for (const auto& range : pieces) {
      const size_t begin = range.first;  // a plain variable: lambdas below capture it
      const std::string_view piece = subject_all.substr(begin, range.second - begin);
      auto emit = [&](size_t b, size_t e) {
        if (e > b) next.emplace_back(begin + b, begin + e);
      };
      size_t gap = 0;  // start of the text not yet emitted
      size_t pos = 0;  // where the next search starts
      uint32_t options = 0;
      while (pos <= piece.size()) {
        const int rc =
            pcre2_match(code->code, reinterpret_cast<PCRE2_SPTR>(piece.data()), piece.size(), pos,
                        options | PCRE2_NO_UTF_CHECK, md.get(), nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) {
          if ((options & PCRE2_ANCHORED) == 0) break;
          // No non-empty match where the empty one was: move on by one character.
          options = 0;
          pos = NextCharBoundary(piece, pos);
          if (pos >= piece.size()) break;
          continue;
        }
        if (rc < 0) {
          PCRE2_UCHAR message[256];
          pcre2_get_error_message(rc, message, sizeof(message));
          spdlog::warn(
              "pre-tokenizer regex '{}' failed on a {}-byte piece ({}); keeping the rest "
              "of the piece whole",
              code->source, piece.size(), reinterpret_cast<const char*>(message));
          break;
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        const size_t mb = ov[0];
        const size_t me = std::max<size_t>(ov[0], ov[1]);
        emit(gap, mb);
        if (me > mb) {
          emit(mb, me);
          gap = pos = me;
          options = 0;
        } else {
          // An empty match splits the gap there; then look for a non-empty match at the same
          // place before moving on (Perl's global-match rule).
          gap = mb;
          if (mb >= piece.size()) break;
          pos = mb;
          options = PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED;
        }
      }
      emit(gap, piece.size());
    }
    pieces.swap(next);
  }
  result.pieces = std::move(pieces);
  return result;
}

}  // namespace ripplekv::worker

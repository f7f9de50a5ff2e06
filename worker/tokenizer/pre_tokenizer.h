#pragma once
// Pre-tokenization for byte-level BPE: cutting text into pieces ("words") before merges, with the
// semantics of llama.cpp's unicode_regex_split():
//   * the text is decoded leniently (utf8.h: invalid bytes become U+FFFD) and re-encoded;
//   * the regexes run in sequence; each one cuts every piece produced so far, and both its
//     matches and the gaps between them become pieces (nothing is dropped);
//   * a regex sees only the piece it cuts: look-arounds and anchors stop at the piece's edges;
//   * \s / \S mean Unicode White_Space (the 25 code points llama.cpp's tables list), and \p{L},
//     \p{N}, ... are PCRE2's Unicode properties (PCRE2_UTF | PCRE2_UCP).
// llama.cpp implements the GPT-2 and Llama 3 regexes with hand-written matchers; PCRE2 running the
// regex itself gives the same pieces. Remaining difference: PCRE2's Unicode tables may be of a
// different Unicode version than llama.cpp's for recently assigned code points.

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace ripplekv::worker {

// What llama.cpp derives from a GGUF's tokenizer.ggml.pre.
struct PreTokenizerType {
  std::vector<std::string> regexes;  // applied in order (llama.cpp regex syntax)
  bool ignore_merges = false;        // a piece that is itself a vocab entry is emitted whole
  bool add_bos = false;              // default of tokenizer.ggml.add_bos_token for this type
};

// The regexes llama.cpp (llama-vocab.cpp, llm_tokenizer_bpe) uses for pre-tokenizer `name`.
// Supported: "smollm" (and starcoder, refact, command-r, codeshell, exaone, minerva-7b, mellum2:
// digits split one by one, then the GPT-2 regex), "gpt-2" (alias "gpt2"; also phi-2, mpt, olmo,
// jais, ...), "llama3" / "llama-v3" / "llama-bpe" (and falcon3, pixtral, ...; dbrx, smaug-bpe),
// "qwen2" (and deepseek-r1-qwen, stablelm2, megrez, hunyuan, ...), and "default" or "" (llama.cpp's
// fallback list). Error: InvalidArgument naming any other type; we do not guess.
[[nodiscard]] StatusOr<PreTokenizerType> LookupPreTokenizer(std::string_view name);

// Rewrites a llama.cpp regex for PCRE2: \s and \S become explicit White_Space classes.
// Error: InvalidArgument for \S inside a character class (not expressible without nesting).
[[nodiscard]] StatusOr<std::string> ToPcre2Pattern(std::string_view regex);

// Result of RegexSplitter::Split.
struct PreTokenized {
  std::string text;  // the input re-encoded as llama.cpp does (invalid UTF-8 bytes -> U+FFFD)
  std::vector<std::pair<size_t, size_t>> pieces;  // byte ranges [begin, end) of `text`, in order
};

// A compiled regex sequence. Immutable; safe to use from several threads at once.
class RegexSplitter {
 public:
  // Compiles `regexes` (llama.cpp syntax, see ToPcre2Pattern). Errors: InvalidArgument naming the
  // regex, PCRE2's message and the offset in the pattern.
  [[nodiscard]] static StatusOr<RegexSplitter> Create(std::span<const std::string> regexes);

  // Cuts `text` into pieces. Never fails: if PCRE2 gives up on a piece (match or heap limit), the
  // rest of that piece stays whole and a warning is logged.
  PreTokenized Split(std::string_view text) const;

 private:
  struct Code;
  explicit RegexSplitter(std::vector<std::shared_ptr<const Code>> codes)
      : codes_(std::move(codes)) {}
  std::vector<std::shared_ptr<const Code>> codes_;
};

}  // namespace ripplekv::worker

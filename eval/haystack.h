#pragma once
// Tokenized prose for haystacks (synthetic_tasks.h) and fidelity windows (fidelity_task.h), and
// the token-level assembly of a haystack with needles inserted at sentence boundaries.
//
// The built-in corpora are the two public-domain books of worker/data/corpora.h:
// "sherlock-holmes" (part of the default, mixed calibration set) and "tom-sawyer". Evaluation
// defaults to tom-sawyer, which no calibration set contains, so that results are measured on text
// the profile was not calibrated on. Any other
// corpus name is a file (corpus_file.h). Haystacks are drawn from one split's region of the
// corpus (split.h).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "eval/eval_example.h"
#include "base/rng.h"
#include "worker/data/corpora.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::eval {

inline constexpr std::string_view kDefaultEvalCorpus = "tom-sawyer";

// A tokenized text with the positions where a haystack may start and where a needle may go.
// Immutable once built; safe to share between threads.
class HaystackCorpus {
 public:
  // Tokenizes `text` without special tokens (control-token text is read as plain text), as one
  // piece. `name` goes into example ids; `origin` is where the text came from (a file path;
  // empty for a built-in book), for messages. Errors: InvalidArgument when the text gives no
  // token.
  [[nodiscard]] static StatusOr<HaystackCorpus> FromText(std::string name, std::string_view text,
                                                         const worker::Tokenizer& tokenizer,
                                                         std::string origin = {});

  const std::string& name() const { return name_; }
  const std::string& origin() const { return origin_; }
  // How messages name the corpus: "corpus file <origin>" when the origin is not empty (the name
  // is its last component), else "corpus <name>".
  std::string Describe() const;
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  std::span<const int32_t> tokens() const { return tokens_; }
  // Bytes of tokens [begin, end): their pieces (Tokenizer::TokenToPiece) concatenated.
  // 0 <= begin <= end <= size().
  std::string_view Text(int64_t begin, int64_t end) const;

  // Token i starts a paragraph: i == 0, or the text before it ends with "\n\n" and token i does
  // not start with whitespace. Ascending.
  const std::vector<int64_t>& paragraph_starts() const { return paragraph_starts_; }
  // A sentence ends right before token i (0 < i < size()): token i starts with whitespace and the
  // text before it, ignoring trailing whitespace and closing quotes/brackets/underscores, ends
  // with ".", "!" or "?", and not with one of the abbreviations Mr. Mrs. Dr. St. Messrs. Jr.
  bool SentenceBoundary(int64_t i) const { return sentence_boundary_[i] != 0; }

 private:
  HaystackCorpus() = default;

  std::string name_;
  std::string origin_;
  std::vector<int32_t> tokens_;
  std::string text_;              // concatenated pieces
  std::vector<int64_t> offsets_;  // size() + 1 byte offsets into text_
  std::vector<int64_t> paragraph_starts_;
  std::vector<uint8_t> sentence_boundary_;
};

// The built-in corpus named "sherlock-holmes" or "tom-sawyer". InvalidArgument for other names.
[[nodiscard]] StatusOr<worker::BuiltinCorpus> FindBuiltinCorpus(std::string_view name);

// A built-in corpus by name (ReadBuiltinCorpus, Gutenberg boilerplate stripped), or any other
// value as a file path (ReadCorpusFile of corpus_file.h: plain text, or JSONL by extension; the
// corpus is then named by CorpusFileName and its origin is the path); then FromText. Errors:
// FailedPrecondition naming the Debian package when a book is not installed; those of
// ReadCorpusFile (NotFound for a name that is neither a book nor a file); FromText's.
[[nodiscard]] StatusOr<HaystackCorpus> LoadHaystackCorpus(std::string_view name_or_path,
                                                          const worker::Tokenizer& tokenizer);

// A haystack of exactly `haystack_len` corpus tokens with needles inserted.
struct Haystack {
  std::vector<int32_t> tokens;          // haystack_len + the needles' tokens
  int64_t corpus_begin = 0;             // corpus token where the prose starts
  TokenRange region;                    // the split's region the prose was taken from
  std::vector<int64_t> needle_offsets;  // per needle (input order): its first token in `tokens`
  std::vector<double> needle_depths;    // per needle: prose tokens before it / haystack_len
};

// Which part of the split's region a haystack's prose comes from, so that the haystacks of one
// set of `count` examples never overlap: the region is cut into `count` equal strata of
// floor(region.size() / count) tokens (as fidelity windows are, fidelity_task.h), and haystack
// `index` stays inside stratum `index` when a stratum holds haystack_len tokens. When it does
// not, the prose is drawn from the whole region as with count == 1, and haystacks may overlap.
struct HaystackStratum {
  int64_t index = 0;  // in [0, count)
  int64_t count = 1;  // >= 1; 1: the whole region
};

// Takes `haystack_len` consecutive corpus tokens inside the region of `split`
// (SplitRegion(corpus.size(), split) of split.h), within `stratum` when it holds them, starting
// at a paragraph start chosen uniformly with `rng` among those that leave room there (at any
// token there when none does, e.g. in a file without blank lines), and inserts needle k at the
// sentence boundary (or either end of the prose) nearest to depths[k] * haystack_len; needles at
// the same place keep their input order. Errors: InvalidArgument when haystack_len < 1,
// depths.size() != needles.size(), a depth is outside [0, 1], the stratum's count is < 1 or its
// index outside [0, count), or the region is shorter than haystack_len (naming the corpus, its
// size, the region and the corpus size needed).
[[nodiscard]] StatusOr<Haystack> BuildHaystack(const HaystackCorpus& corpus, EvalSplit split,
                                               int64_t haystack_len,
                                               std::span<const std::vector<int32_t>> needles,
                                               std::span<const double> depths,
                                               base::SplitMix64& rng,
                                               HaystackStratum stratum = {});

}  // namespace ripplekv::eval

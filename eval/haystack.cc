#include "eval/haystack.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <utility>

#include "base/strings.h"
#include "eval/corpus_file.h"
#include "eval/split.h"

namespace ripplekv::eval {
namespace {

bool IsSpaceByte(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// Drops trailing closing quotes, brackets and underscores (ASCII and the UTF-8 right quotes).
std::string_view TrimClosers(std::string_view s) {
  while (!s.empty()) {
    const char c = s.back();
    if (c == '"' || c == '\'' || c == ')' || c == ']' || c == '_') {
      s.remove_suffix(1);
    } else if (s.ends_with("\xE2\x80\x9D") || s.ends_with("\xE2\x80\x99")) {  // ” ’
      s.remove_suffix(3);
    } else {
      break;
    }
  }
  return s;
}

bool IsAsciiLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// `before` (text preceding a candidate boundary) ends a sentence.
bool EndsSentence(std::string_view before) {
  while (!before.empty() && IsSpaceByte(before.back())) before.remove_suffix(1);
  before = TrimClosers(before);
  if (before.empty()) return false;
  const char last = before.back();
  if (last == '!' || last == '?') return true;
  if (last != '.') return false;
  before.remove_suffix(1);
  size_t begin = before.size();
  while (begin > 0 && IsAsciiLetter(before[begin - 1])) --begin;
  const std::string_view word = before.substr(begin);
  constexpr std::array<std::string_view, 6> kAbbreviations = {"Mr", "Mrs",    "Dr",
                                                              "St", "Messrs", "Jr"};
  if (std::find(kAbbreviations.begin(), kAbbreviations.end(), word) != kAbbreviations.end()) {
    return false;
  }
  const bool initial = word.size() == 1 && word[0] >= 'A' && word[0] <= 'Z';
  return !initial;
}

}  // namespace

StatusOr<HaystackCorpus> HaystackCorpus::FromText(std::string name, std::string_view text,
                                                  const worker::Tokenizer& tokenizer,
                                                  std::string origin) {
  HaystackCorpus corpus;
  corpus.name_ = std::move(name);
  corpus.origin_ = std::move(origin);
  corpus.tokens_ = tokenizer.Encode(text, {.add_special = false, .parse_special = false});
  if (corpus.tokens_.empty()) {
    return absl::InvalidArgumentError(Cat(corpus.Describe(), ": the text gives no token"));
  }
  const size_t n = corpus.tokens_.size();
  corpus.offsets_.resize(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    corpus.text_ += tokenizer.TokenToPiece(corpus.tokens_[i]);
    corpus.offsets_[i + 1] = static_cast<int64_t>(corpus.text_.size());
  }
  corpus.sentence_boundary_.assign(n, 0);
  corpus.paragraph_starts_.push_back(0);
  const std::string_view all = corpus.text_;
  for (size_t i = 1; i < n; ++i) {
    const std::string_view before = all.substr(0, static_cast<size_t>(corpus.offsets_[i]));
    const std::string_view piece =
        corpus.Text(static_cast<int64_t>(i), static_cast<int64_t>(i) + 1);
    if (piece.empty()) continue;
    const bool starts_with_space = IsSpaceByte(piece.front());
    if (!starts_with_space && before.ends_with("\n\n")) {
      corpus.paragraph_starts_.push_back(static_cast<int64_t>(i));
    }
    if (starts_with_space &&
        EndsSentence(before.substr(before.size() - std::min<size_t>(before.size(), 64)))) {
      corpus.sentence_boundary_[i] = 1;
    }
  }
  return corpus;
}

std::string HaystackCorpus::Describe() const {
  return origin_.empty() ? Cat("corpus ", name_) : Cat("corpus file ", origin_);
}

std::string_view HaystackCorpus::Text(int64_t begin, int64_t end) const {
  return std::string_view(text_).substr(static_cast<size_t>(offsets_[begin]),
                                        static_cast<size_t>(offsets_[end] - offsets_[begin]));
}

StatusOr<worker::BuiltinCorpus> FindBuiltinCorpus(std::string_view name) {
  if (name == worker::kSherlockHolmes.name) return worker::kSherlockHolmes;
  if (name == worker::kTomSawyer.name) return worker::kTomSawyer;
  return absl::InvalidArgumentError(Cat("unknown corpus \"", name, "\"; expected \"",
                                        worker::kSherlockHolmes.name, "\" or \"",
                                        worker::kTomSawyer.name, "\""));
}

StatusOr<HaystackCorpus> LoadHaystackCorpus(std::string_view name_or_path,
                                            const worker::Tokenizer& tokenizer) {
  if (IsBuiltinCorpusName(name_or_path)) {
    ASSIGN_OR_RETURN(const worker::BuiltinCorpus corpus, FindBuiltinCorpus(name_or_path));
    ASSIGN_OR_RETURN(const std::string text, worker::ReadBuiltinCorpus(corpus));
    return HaystackCorpus::FromText(std::string(corpus.name), text, tokenizer);
  }
  const std::string path(name_or_path);
  ASSIGN_OR_RETURN(const std::string text, ReadCorpusFile(path));
  return HaystackCorpus::FromText(CorpusFileName(path), text, tokenizer, path);
}

StatusOr<Haystack> BuildHaystack(const HaystackCorpus& corpus, EvalSplit split,
                                 int64_t haystack_len,
                                 std::span<const std::vector<int32_t>> needles,
                                 std::span<const double> depths, base::SplitMix64& rng,
                                 HaystackStratum stratum) {
  if (haystack_len < 1) {
    return absl::InvalidArgumentError(
        Cat("the haystack would have ", haystack_len, " tokens; the prompt length is too small"));
  }
  if (depths.size() != needles.size()) {
    return absl::InvalidArgumentError(
        Cat(needles.size(), " needles but ", depths.size(), " depths"));
  }
  for (double d : depths) {
    if (!(d >= 0.0 && d <= 1.0)) {
      return absl::InvalidArgumentError(Cat("needle depth ", d, " is outside [0, 1]"));
    }
  }
  if (stratum.count < 1 || stratum.index < 0 || stratum.index >= stratum.count) {
    return absl::InvalidArgumentError(
        Cat("haystack stratum ", stratum.index, " of ", stratum.count, ": must be in [0, count)"));
  }
  const TokenRange region = SplitRegion(corpus.size(), split);
  if (haystack_len > region.size()) {
    return absl::InvalidArgumentError(
        Cat(corpus.Describe(), " has ", corpus.size(), " tokens; a haystack of ", haystack_len,
            " tokens does not fit in its ", EvalSplitName(split), " region [", region.begin, ", ",
            region.end, ") of ", region.size(), " tokens (needs a corpus of at least ",
            CorpusTokensForRegion(haystack_len), " tokens)"));
  }
  // The tokens the prose is drawn from: the stratum when it holds the prose, else the region.
  const int64_t stratum_size = region.size() / stratum.count;
  const bool in_stratum = stratum_size >= haystack_len;
  const int64_t lo = in_stratum ? region.begin + stratum.index * stratum_size : region.begin;
  const int64_t hi = in_stratum ? lo + stratum_size : region.end;
  // Starts that keep the prose inside [lo, hi): [lo, last].
  const int64_t last = hi - haystack_len;
  const std::vector<int64_t>& starts = corpus.paragraph_starts();
  const auto first_fit = std::lower_bound(starts.begin(), starts.end(), lo);
  const auto end_fit = std::upper_bound(first_fit, starts.end(), last);
  Haystack out;
  out.region = region;
  out.corpus_begin = first_fit < end_fit
                         ? *(first_fit + static_cast<int64_t>(
                                             rng.Below(static_cast<uint64_t>(end_fit - first_fit))))
                         : rng.Between(lo, last);
  const int64_t s = out.corpus_begin;

  std::vector<int64_t> boundaries = {0};  // prose positions in [0, haystack_len]
  for (int64_t p = 1; p < haystack_len; ++p) {
    if (corpus.SentenceBoundary(s + p)) boundaries.push_back(p);
  }
  boundaries.push_back(haystack_len);
  std::vector<int64_t> position(needles.size());
  for (size_t k = 0; k < needles.size(); ++k) {
    const double target = depths[k] * static_cast<double>(haystack_len);
    auto it = std::lower_bound(boundaries.begin(), boundaries.end(), target,
                               [](int64_t b, double t) { return static_cast<double>(b) < t; });
    int64_t best = it == boundaries.end() ? boundaries.back() : *it;
    if (it != boundaries.begin()) {
      const int64_t below = *(it - 1);
      if (it == boundaries.end() ||
          target - static_cast<double>(below) <= static_cast<double>(best) - target) {
        best = below;
      }
    }
    position[k] = best;
  }
  std::vector<size_t> order(needles.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return position[a] < position[b]; });

  const std::span<const int32_t> prose = corpus.tokens().subspan(s, haystack_len);
  out.needle_offsets.assign(needles.size(), 0);
  out.needle_depths.assign(needles.size(), 0.0);
  int64_t copied = 0;
  for (size_t k : order) {
    out.tokens.insert(out.tokens.end(), prose.begin() + copied, prose.begin() + position[k]);
    copied = position[k];
    out.needle_offsets[k] = static_cast<int64_t>(out.tokens.size());
    out.needle_depths[k] = static_cast<double>(position[k]) / static_cast<double>(haystack_len);
    out.tokens.insert(out.tokens.end(), needles[k].begin(), needles[k].end());
  }
  out.tokens.insert(out.tokens.end(), prose.begin() + copied, prose.end());
  return out;
}

}  // namespace ripplekv::eval

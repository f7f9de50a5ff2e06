#include "eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/check.h"
#include "eval/text_util.h"

namespace ripplekv::eval {

using internal::DecodeUtf8;
using internal::EncodeUtf8;
using internal::IsPySpace;
using internal::PyCollapseSpaces;
using internal::PyLower;
using internal::PySplit;
using internal::Regex;
using internal::SanitizeUtf8;

namespace {

// Python's string.punctuation.
constexpr std::u32string_view kAsciiPunctuation = U"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
// LongBench normalize_zh_answer's cn_punctuation, verbatim (it has "》" but not "《").
constexpr std::u32string_view kCnPunctuation =
    U"！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔"
    U"〕〖〗〘〙"
    U"〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏.";

// A ROUGE-L sentence longer than this many words is cut (keeps the LCS table within 64 MiB).
constexpr size_t kMaxRougeSentenceWords = 4096;

const Regex& ArticlesRegex() {
  static const Regex* const re = new Regex(R"(\b(a|an|the)\b)");
  return *re;
}
const Regex& NumberRegex() {
  static const Regex* const re = new Regex(R"(\d+)");
  return *re;
}
const Regex& ParagraphRegex() {
  static const Regex* const re = new Regex(R"(Paragraph (\d+))");
  return *re;
}
const Regex& ParagraphZhRegex() {
  static const Regex* const re = new Regex("\xE6\xAE\xB5\xE8\x90\xBD(\\d+)");  // 段落(\d+)
  return *re;
}

std::string RemoveCodePoints(std::string_view utf8, std::u32string_view drop) {
  std::u32string cps = DecodeUtf8(utf8);
  std::erase_if(cps, [&](char32_t cp) { return drop.find(cp) != std::u32string_view::npos; });
  return EncodeUtf8(cps);
}

// Python str.strip() (Unicode whitespace) on valid UTF-8.
std::string PyStrip(std::string_view utf8) {
  std::u32string cps = DecodeUtf8(utf8);
  size_t b = 0;
  size_t e = cps.size();
  while (b < e && IsPySpace(cps[b])) ++b;
  while (e > b && IsPySpace(cps[e - 1])) --e;
  return EncodeUtf8(std::u32string_view(cps).substr(b, e - b));
}

// LongBench f1_score over token lists (Counter intersection).
double TokenF1(const std::vector<std::string>& prediction,
               const std::vector<std::string>& ground_truth) {
  std::unordered_map<std::string, int64_t> counts;
  for (const std::string& t : ground_truth) ++counts[t];
  int64_t same = 0;
  for (const std::string& t : prediction) {
    auto it = counts.find(t);
    if (it != counts.end() && it->second > 0) {
      --it->second;
      ++same;
    }
  }
  if (same == 0) return 0.0;
  const double precision = static_cast<double>(same) / static_cast<double>(prediction.size());
  const double recall = static_cast<double>(same) / static_cast<double>(ground_truth.size());
  return (2 * precision * recall) / (precision + recall);
}

std::vector<std::string> ZhTokens(std::string_view text) {
  std::vector<std::string> out;
  for (const std::string& segment : SegmentZh(text)) {
    std::string normalized = NormalizeZhAnswer(segment);
    if (!normalized.empty()) out.push_back(std::move(normalized));
  }
  return out;
}

// The `rouge` package's sentence split: text.split(".") without empty parts, each part
// whitespace-collapsed (a whitespace-only part becomes ""), then each split at " " into words.
// Words are interned as integer ids in `ids`.
std::vector<std::vector<int>> RougeSentences(std::string_view text,
                                             std::unordered_map<std::string, int>* ids) {
  std::vector<std::vector<int>> sentences;
  size_t start = 0;
  while (start <= text.size()) {
    size_t dot = text.find('.', start);
    if (dot == std::string_view::npos) dot = text.size();
    const std::string_view part = text.substr(start, dot - start);
    if (!part.empty()) {
      const std::string collapsed = PyCollapseSpaces(part);
      std::vector<int> words;
      size_t w = 0;
      while (true) {  // str.split(" "): "" gives [""]
        size_t space = collapsed.find(' ', w);
        if (space == std::string::npos) space = collapsed.size();
        const std::string word = collapsed.substr(w, space - w);
        const auto [it, inserted] = ids->try_emplace(word, static_cast<int>(ids->size()));
        if (words.size() < kMaxRougeSentenceWords) words.push_back(it->second);
        if (space == collapsed.size()) break;
        w = space + 1;
      }
      sentences.push_back(std::move(words));
    }
    start = dot + 1;
  }
  return sentences;
}

// Words of one longest common subsequence of x (reference) and y (hypothesis), reconstructed
// from the end as rouge's _recon_lcs does (on a tie, step along y).
void ReconLcsWords(const std::vector<int>& x, const std::vector<int>& y,
                   std::unordered_set<int>* out) {
  const size_t n = x.size();
  const size_t m = y.size();
  std::vector<int32_t> table((n + 1) * (m + 1), 0);
  auto at = [&](size_t i, size_t j) -> int32_t& { return table[i * (m + 1) + j]; };
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      at(i, j) = x[i - 1] == y[j - 1] ? at(i - 1, j - 1) + 1 : std::max(at(i - 1, j), at(i, j - 1));
    }
  }
  size_t i = n;
  size_t j = m;
  while (i > 0 && j > 0) {
    if (x[i - 1] == y[j - 1]) {
      out->insert(x[i - 1]);
      --i;
      --j;
    } else if (at(i - 1, j) > at(i, j - 1)) {
      --i;
    } else {
      --j;
    }
  }
}

size_t DistinctWords(const std::vector<std::vector<int>>& sentences) {
  std::unordered_set<int> words;
  for (const auto& s : sentences) words.insert(s.begin(), s.end());
  return words.size();
}

// Python's round() of a non-negative double: half to even (x - floor(x) is exact here).
int RoundHalfEven(double x) {
  const double lower = std::floor(x);
  const double fraction = x - lower;
  if (fraction > 0.5) return static_cast<int>(lower) + 1;
  if (fraction < 0.5) return static_cast<int>(lower);
  return static_cast<int>(lower) + (static_cast<int64_t>(lower) % 2 == 0 ? 0 : 1);
}

// Length of the longest common subsequence of two code point strings (two rows).
size_t LcsLength(std::u32string_view a, std::u32string_view b) {
  if (a.size() < b.size()) std::swap(a, b);
  std::vector<size_t> prev(b.size() + 1, 0);
  std::vector<size_t> cur(b.size() + 1, 0);
  for (char32_t ca : a) {
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = ca == b[j - 1] ? prev[j - 1] + 1 : std::max(prev[j], cur[j - 1]);
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

double NumberMatchFraction(std::string_view prediction, std::string_view expected) {
  const std::vector<std::string> numbers = NumberRegex().FindAll(prediction);
  if (numbers.empty()) return 0.0;
  const auto right = std::count(numbers.begin(), numbers.end(), expected);
  return static_cast<double>(right) / static_cast<double>(numbers.size());
}

double RetrievalWith(const Regex& paragraph, std::string_view prediction,
                     std::string_view ground_truth) {
  const std::string truth = SanitizeUtf8(ground_truth);
  const std::vector<std::string> ids = paragraph.FindAll(truth);
  if (ids.empty()) return 0.0;
  return NumberMatchFraction(SanitizeUtf8(prediction), ids.front());
}

}  // namespace

std::string NormalizeAnswer(std::string_view text) {
  std::string s = PyLower(SanitizeUtf8(text));
  s = RemoveCodePoints(s, kAsciiPunctuation);
  s = ArticlesRegex().ReplaceAll(s, " ");
  return PyCollapseSpaces(s);
}

std::string NormalizeZhAnswer(std::string_view text) {
  std::u32string cps = DecodeUtf8(PyLower(SanitizeUtf8(text)));
  std::erase_if(cps, [](char32_t cp) {
    return IsPySpace(cp) || kAsciiPunctuation.find(cp) != std::u32string_view::npos ||
           kCnPunctuation.find(cp) != std::u32string_view::npos;
  });
  return EncodeUtf8(cps);
}

std::string RulerPostprocess(std::string_view prediction) {
  std::string s = PyStrip(SanitizeUtf8(prediction));
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20) c = '\n';
  }
  return PyStrip(s);
}

std::string FirstLine(std::string_view prediction) {
  const size_t begin = prediction.find_first_not_of('\n');
  if (begin == std::string_view::npos) return {};
  const std::string_view rest = prediction.substr(begin);
  return std::string(rest.substr(0, rest.find('\n')));
}

double StringMatchAll(std::string_view prediction, std::span<const std::string> references) {
  if (references.empty()) return 0.0;
  const std::string pred = PyLower(SanitizeUtf8(prediction));
  int found = 0;
  for (const std::string& r : references) {
    if (pred.find(PyLower(SanitizeUtf8(r))) != std::string::npos) ++found;
  }
  return static_cast<double>(found) / static_cast<double>(references.size());
}

double StringMatchPart(std::string_view prediction, std::span<const std::string> references) {
  const std::string pred = PyLower(SanitizeUtf8(prediction));
  for (const std::string& r : references) {
    if (pred.find(PyLower(SanitizeUtf8(r))) != std::string::npos) return 1.0;
  }
  return 0.0;
}

double QaF1Score(std::string_view prediction, std::string_view ground_truth) {
  return TokenF1(PySplit(NormalizeAnswer(prediction)), PySplit(NormalizeAnswer(ground_truth)));
}

double QaF1ZhScore(std::string_view prediction, std::string_view ground_truth) {
  return TokenF1(ZhTokens(prediction), ZhTokens(ground_truth));
}

double RougeLScore(std::string_view prediction, std::string_view ground_truth) {
  std::unordered_map<std::string, int> ids;
  const std::string hyp_text = SanitizeUtf8(prediction);
  const std::string ref_text = SanitizeUtf8(ground_truth);
  const auto hyp = RougeSentences(hyp_text, &ids);
  const auto ref = RougeSentences(ref_text, &ids);
  if (hyp.empty() || ref.empty()) return 0.0;
  std::unordered_set<int> lcs_union;
  for (const auto& r : ref) {
    for (const auto& h : hyp) ReconLcsWords(r, h, &lcs_union);
  }
  const double llcs = static_cast<double>(lcs_union.size());
  const double recall = llcs / static_cast<double>(DistinctWords(ref));
  const double precision = llcs / static_cast<double>(DistinctWords(hyp));
  return 2.0 * ((precision * recall) / (precision + recall + 1e-8));
}

double RougeLZhScore(std::string_view prediction, std::string_view ground_truth) {
  auto joined = [](std::string_view text) {
    std::string out;
    for (const std::string& s : SegmentZh(text)) {
      if (!out.empty()) out.push_back(' ');
      out += s;
    }
    return out;
  };
  return RougeLScore(joined(prediction), joined(ground_truth));
}

double ClassificationScore(std::string_view prediction, std::string_view ground_truth,
                           std::span<const std::string> all_classes) {
  const std::string pred = SanitizeUtf8(prediction);
  const std::string truth = SanitizeUtf8(ground_truth);
  std::vector<std::string> matches;
  for (const std::string& c : all_classes) {
    std::string name = SanitizeUtf8(c);
    if (pred.find(name) != std::string::npos) matches.push_back(std::move(name));
  }
  // Python's `for term in list: ... list.remove(term)`: iteration by index over a shrinking list.
  for (size_t i = 0; i < matches.size(); ++i) {
    const std::string term = matches[i];
    if (truth.find(term) != std::string::npos && term != truth) {
      matches.erase(std::find(matches.begin(), matches.end(), term));  // first occurrence
    }
  }
  if (std::find(matches.begin(), matches.end(), truth) == matches.end()) return 0.0;
  return 1.0 / static_cast<double>(matches.size());
}

double RetrievalScore(std::string_view prediction, std::string_view ground_truth) {
  return RetrievalWith(ParagraphRegex(), prediction, ground_truth);
}

double RetrievalZhScore(std::string_view prediction, std::string_view ground_truth) {
  return RetrievalWith(ParagraphZhRegex(), prediction, ground_truth);
}

double CountScore(std::string_view prediction, std::string_view ground_truth) {
  return NumberMatchFraction(SanitizeUtf8(prediction), SanitizeUtf8(ground_truth));
}

double CodeSimScore(std::string_view prediction, std::string_view ground_truth) {
  const std::string pred = SanitizeUtf8(prediction);
  std::string_view rest = pred;
  rest.remove_prefix(std::min(rest.size(), rest.find_first_not_of('\n')));
  std::string_view chosen;
  while (true) {
    const size_t nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    if (line.find('`') == std::string_view::npos && line.find('#') == std::string_view::npos &&
        line.find("//") == std::string_view::npos) {
      chosen = line;
      break;
    }
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  return FuzzRatio(chosen, ground_truth) / 100.0;
}

int FuzzRatio(std::string_view a, std::string_view b) {
  const std::u32string x = DecodeUtf8(a);
  const std::u32string y = DecodeUtf8(b);
  if (x == y) return 100;
  if (x.empty() || y.empty()) return 0;
  const size_t lensum = x.size() + y.size();
  const size_t distance = lensum - 2 * LcsLength(x, y);  // insertions + deletions
  const double similarity = 1.0 - static_cast<double>(distance) / static_cast<double>(lensum);
  return RoundHalfEven(100.0 * similarity);
}

std::vector<std::string> SegmentZh(std::string_view text) {
  std::vector<std::string> out;
  std::u32string run;
  auto flush = [&] {
    if (!run.empty()) out.push_back(EncodeUtf8(run));
    run.clear();
  };
  for (char32_t cp : DecodeUtf8(text)) {
    const bool ascii_alnum =
        (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
    if (ascii_alnum) {
      run.push_back(cp);
      continue;
    }
    flush();
    if (!IsPySpace(cp)) out.push_back(EncodeUtf8(std::u32string(1, cp)));
  }
  flush();
  return out;
}

double ScoreAnswer(const EvalExample& example, std::string_view prediction) {
  RIPPLEKV_CHECK(example.metric != MetricKind::kFidelity);
  switch (example.metric) {
    case MetricKind::kStringMatchAll:
      return StringMatchAll(RulerPostprocess(prediction), example.answers);
    case MetricKind::kStringMatchPart:
      return StringMatchPart(RulerPostprocess(prediction), example.answers);
    default:
      break;
  }
  const std::string pred =
      example.first_line_only ? FirstLine(prediction) : std::string(prediction);
  double best = 0.0;
  for (const std::string& truth : example.answers) {
    double score = 0.0;
    switch (example.metric) {
      case MetricKind::kQaF1:
        score = QaF1Score(pred, truth);
        break;
      case MetricKind::kQaF1Zh:
        score = QaF1ZhScore(pred, truth);
        break;
      case MetricKind::kRougeL:
        score = RougeLScore(pred, truth);
        break;
      case MetricKind::kRougeLZh:
        score = RougeLZhScore(pred, truth);
        break;
      case MetricKind::kClassification:
        score = ClassificationScore(pred, truth, example.all_classes);
        break;
      case MetricKind::kRetrieval:
        score = RetrievalScore(pred, truth);
        break;
      case MetricKind::kRetrievalZh:
        score = RetrievalZhScore(pred, truth);
        break;
      case MetricKind::kCount:
        score = CountScore(pred, truth);
        break;
      case MetricKind::kCodeSim:
        score = CodeSimScore(pred, truth);
        break;
      case MetricKind::kStringMatchAll:
      case MetricKind::kStringMatchPart:
      case MetricKind::kFidelity:
        break;
    }
    best = std::max(best, score);
  }
  return best;
}

}  // namespace ripplekv::eval

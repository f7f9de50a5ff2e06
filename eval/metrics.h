#pragma once
// Answer metrics: ports of the reference implementations the scores are compared with.
//   * RULER (NVIDIA/RULER scripts/eval/synthetic/constants.py and evaluate.py):
//     string_match_all / string_match_part after postprocess_pred.
//   * LongBench (THUDM/LongBench metrics.py, eval.py): qa_f1, rouge, classification, retrieval,
//     count, code_sim and their _zh variants, max over the answers, first-line postprocessing
//     for trec/triviaqa/samsum/lsht.
//   * `rouge` 1.0.1 (pltrdy/rouge; LongBench's rouge_score calls Rouge().get_scores): ROUGE-L F.
//   * `fuzzywuzzy` fuzz.ratio with python-Levenshtein (LongBench's code_sim_score).
// docs/EVAL.md lists every deviation; in short: Chinese text is segmented per character instead
// of by jieba, lower-casing uses simple case mapping, ROUGE-L sentences are capped at 4096 words.
//
// Every score is in [0, 1]. Inputs may be any bytes: invalid UTF-8 is read as U+FFFD first (as
// Python would after decoding with errors="replace"). Functions are pure and thread-safe. Costs:
// ROUGE-L is O(words^2) per sentence pair, code_sim O(chars^2) of the compared line; both are
// meant for model answers of at most a few hundred tokens.

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "eval/eval_example.h"

namespace ripplekv::eval {

// LongBench/SQuAD normalize_answer: lower-case, drop ASCII punctuation (Python's
// string.punctuation), replace the words a/an/the by a space, collapse whitespace.
std::string NormalizeAnswer(std::string_view text);
// LongBench normalize_zh_answer: lower-case, drop ASCII and CJK punctuation, drop all whitespace.
std::string NormalizeZhAnswer(std::string_view text);

// RULER postprocess_pred: strip, replace every control character U+0000..U+001F by "\n", strip.
std::string RulerPostprocess(std::string_view prediction);
// LongBench's first-line rule: prediction.lstrip("\n").split("\n")[0].
std::string FirstLine(std::string_view prediction);

// RULER: references found in the prediction (case-insensitive substring), as a fraction of the
// references (All) or 1/0 for any (Part). No references: 0.
double StringMatchAll(std::string_view prediction, std::span<const std::string> references);
double StringMatchPart(std::string_view prediction, std::span<const std::string> references);

// Token F1 of the normalized answers (0 when they share no token).
double QaF1Score(std::string_view prediction, std::string_view ground_truth);
// Token F1 over character-level segments (SegmentZh) normalized by NormalizeZhAnswer.
double QaF1ZhScore(std::string_view prediction, std::string_view ground_truth);

// ROUGE-L F of the `rouge` package (summary level, union LCS, "exclusive" word sets): both
// texts are cut into sentences at ".", each sentence whitespace-collapsed and split at " ".
// 0 when either text has no sentence (rouge raises; LongBench returns 0).
double RougeLScore(std::string_view prediction, std::string_view ground_truth);
// RougeLScore over " "-joined SegmentZh segments.
double RougeLZhScore(std::string_view prediction, std::string_view ground_truth);

// LongBench classification_score, including its quirks: classes found in the prediction
// (substring), minus those that are a substring of (and not equal to) the ground truth, removed
// while iterating as Python does (an element right after a removed one is not examined); then
// 1/len(matches) when the ground truth is among the matches, else 0.
double ClassificationScore(std::string_view prediction, std::string_view ground_truth,
                           std::span<const std::string> all_classes);
// Numbers (\d+) in the prediction equal to N of the ground truth's first "Paragraph N", as a
// fraction of all numbers in the prediction. 0 when the ground truth has no "Paragraph N" (where
// LongBench raises).
double RetrievalScore(std::string_view prediction, std::string_view ground_truth);
double RetrievalZhScore(std::string_view prediction, std::string_view ground_truth);  // "段落N"
// Numbers in the prediction equal to the ground truth, as a fraction of all its numbers.
double CountScore(std::string_view prediction, std::string_view ground_truth);
// FuzzRatio(first code line of the prediction, ground truth) / 100. The first code line is the
// first line (after leading newlines) without "`", "#" or "//"; empty when none.
double CodeSimScore(std::string_view prediction, std::string_view ground_truth);

// fuzzywuzzy fuzz.ratio backed by python-Levenshtein: 100 when equal, 0 when either is empty,
// else round-half-even(100 * (1 - indel_distance / (len_a + len_b))) over code points. (Without
// python-Levenshtein, fuzzywuzzy falls back to difflib, which can differ by a few points.)
int FuzzRatio(std::string_view a, std::string_view b);

// Character-level stand-in for jieba: every run of ASCII letters and digits is one segment,
// every other non-whitespace code point is a segment of its own; whitespace separates.
std::vector<std::string> SegmentZh(std::string_view text);

// The example's score for a prediction (the generated text, special tokens not rendered):
// RulerPostprocess for the string-match kinds, FirstLine when example.first_line_only, then the
// metric, maxed over example.answers for the LongBench kinds. A precondition (CHECK): the metric
// is not kFidelity, which is scored from logits (fidelity_task.h).
double ScoreAnswer(const EvalExample& example, std::string_view prediction);

}  // namespace ripplekv::eval

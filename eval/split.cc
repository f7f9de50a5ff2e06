#include "eval/split.h"

#include <cstdint>

#include "base/strings.h"

namespace ripplekv::eval {
namespace {

constexpr uint64_t kValidationStreamBit = uint64_t{1} << 32;

std::string RangeText(const TokenRange& r) { return Cat("[", r.begin, ", ", r.end, ")"); }

}  // namespace

std::string_view EvalSplitName(EvalSplit split) {
  switch (split) {
    case EvalSplit::kTest:
      return "test";
    case EvalSplit::kValidation:
      return "validation";
  }
  return "unknown";
}

std::optional<EvalSplit> ParseEvalSplit(std::string_view name) {
  for (EvalSplit s : {EvalSplit::kTest, EvalSplit::kValidation}) {
    if (EvalSplitName(s) == name) return s;
  }
  return std::nullopt;
}

TokenRange SplitRegion(int64_t corpus_tokens, EvalSplit split) {
  const int64_t n = corpus_tokens > 0 ? corpus_tokens : 0;
  const int64_t half = n / 2;
  return split == EvalSplit::kTest ? TokenRange{0, half} : TokenRange{half, n};
}

int64_t CorpusTokensForRegion(int64_t region_tokens) {
  return region_tokens > INT64_MAX / 2 ? INT64_MAX : 2 * region_tokens;
}

uint64_t SplitStream(uint64_t stream, EvalSplit split) {
  return split == EvalSplit::kTest ? stream : stream | kValidationStreamBit;
}

Status CheckSplitConfinement(std::span<const EvalExample> examples, int64_t corpus_tokens) {
  const TokenRange test = SplitRegion(corpus_tokens, EvalSplit::kTest);
  const TokenRange validation = SplitRegion(corpus_tokens, EvalSplit::kValidation);
  if (test.Intersects(validation)) {  // cannot happen with SplitRegion as written; checked anyway
    return absl::InternalError(Cat("split check failed: the test region ", RangeText(test),
                                   " and the validation region ", RangeText(validation),
                                   " intersect"));
  }
  for (const EvalExample& ex : examples) {
    if (!ex.split) continue;
    const bool is_test = *ex.split == EvalSplit::kTest;
    const TokenRange& own = is_test ? test : validation;
    const TokenRange& other = is_test ? validation : test;
    const std::string_view name = EvalSplitName(*ex.split);
    const std::string_view other_name =
        EvalSplitName(is_test ? EvalSplit::kValidation : EvalSplit::kTest);
    const std::string where = Cat("split check failed: example ", ex.id, " (", name, ") ");
    if (ex.split_region != own) {
      return absl::InternalError(Cat(where, "records the region ", RangeText(ex.split_region),
                                     "; the ", name, " region of a corpus of ", corpus_tokens,
                                     " tokens is ", RangeText(own)));
    }
    if (ex.corpus_tokens.Intersects(other)) {
      return absl::InternalError(Cat(where, "takes corpus tokens ", RangeText(ex.corpus_tokens),
                                     ", which intersect the ", other_name, " region ",
                                     RangeText(other)));
    }
    if (!own.Contains(ex.corpus_tokens)) {
      return absl::InternalError(Cat(where, "takes corpus tokens ", RangeText(ex.corpus_tokens),
                                     ", outside its region ", RangeText(own)));
    }
  }
  return absl::OkStatus();
}

}  // namespace ripplekv::eval

#include "eval/synthetic_tasks.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <unordered_set>
#include <utility>

#include "base/strings.h"
#include "eval/prompt_format.h"
#include "base/rng.h"
#include "fmt/format.h"

namespace ripplekv::eval {
namespace {

using base::SplitMix64;
using base::StreamSeed;

constexpr worker::EncodeOptions kRaw{.add_special = false, .parse_special = false};
// Draws of values that collide with the prose (or keys that contain each other) before giving up.
constexpr int kMaxAttempts = 64;
// Longer prompts than any model we run; bounds the work of a mistyped length.
constexpr int64_t kMaxPromptLen = int64_t{1} << 22;

// Multi-needle keys are "<adjective>-<noun>" (RULER draws adjective-noun words as well).
constexpr std::array<std::string_view, 32> kAdjectives = {
    "quiet",  "amber",  "brisk",  "calm",  "crimson", "dusty", "eager",  "faint",
    "gentle", "golden", "hollow", "icy",   "jolly",   "kind",  "lively", "misty",
    "narrow", "olive",  "pale",   "proud", "rapid",   "rusty", "silent", "silver",
    "steep",  "tidy",   "velvet", "vivid", "wary",    "wild",  "young",  "zesty"};
constexpr std::array<std::string_view, 32> kNouns = {
    "harbor",  "anchor", "beacon",  "candle", "canyon", "comet",   "falcon",  "garden",
    "glacier", "island", "lantern", "meadow", "mirror", "orchard", "pebble",  "piano",
    "quarry",  "river",  "saddle",  "spruce", "summit", "thimble", "tunnel",  "valley",
    "violin",  "walnut", "willow",  "window", "badger", "compass", "feather", "kettle"};

std::string RandomDigits(SplitMix64& rng, int digits) {
  std::string s(1, static_cast<char>('1' + rng.Below(9)));
  for (int i = 1; i < digits; ++i) s += static_cast<char>('0' + rng.Below(10));
  return s;
}

std::string RandomHex(SplitMix64& rng, int n) {
  constexpr std::string_view kHex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < n; ++i) s += kHex[rng.Below(16)];
  return s;
}

// Version-4 UUID layout: xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx. One statement per draw:
// the operands of + are unsequenced, so a single expression would draw in a compiler-chosen order.
std::string RandomUuid(SplitMix64& rng) {
  constexpr std::string_view kVariant = "89ab";
  std::string s = RandomHex(rng, 8);
  s += '-';
  s += RandomHex(rng, 4);
  s += "-4";
  s += RandomHex(rng, 3);
  s += '-';
  s += kVariant[rng.Below(4)];
  s += RandomHex(rng, 3);
  s += '-';
  s += RandomHex(rng, 12);
  return s;
}

std::string RandomKvString(SplitMix64& rng, KvFormat format) {
  return format == KvFormat::kUuid ? RandomUuid(rng) : RandomHex(rng, 8);
}

bool ProseContainsAny(std::string_view prose, const std::vector<std::string>& needles) {
  return std::any_of(needles.begin(), needles.end(),
                     [&](const std::string& s) { return prose.find(s) != std::string_view::npos; });
}

// "a", "a and b", "a, b and c".
std::string JoinKeys(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i > 0) out += i + 1 == keys.size() ? " and " : ", ";
    out += keys[i];
  }
  return out;
}

std::string ExampleId(SyntheticTask task, const HaystackCorpus& corpus, const SyntheticOptions& o,
                      int index) {
  std::string shape;
  switch (task) {
    case SyntheticTask::kMultiNeedle:
      shape = fmt::format("n{}q{}", o.num_needles, o.num_queries);
      break;
    case SyntheticTask::kKvRetrieval:
      shape = fmt::format("d{:.2f}/p{}{}", o.depth, o.kv_pairs,
                          o.kv_format == KvFormat::kUuid ? "u" : "s");
      break;
    case SyntheticTask::kPasskey:
      shape = fmt::format("d{:.2f}", o.depth);
      break;
  }
  return fmt::format("{}/{}/{}/L{}/{}/s{}/{}", SyntheticTaskName(task), corpus.name(),
                     EvalSplitName(o.split), o.prompt_len, shape, o.seed, index);
}

int DefaultMaxNewTokens(SyntheticTask task, const SyntheticOptions& o) {
  if (o.max_new_tokens > 0) return o.max_new_tokens;
  switch (task) {
    case SyntheticTask::kPasskey:
      return 16;
    case SyntheticTask::kKvRetrieval:
      return o.kv_format == KvFormat::kUuid ? 48 : 16;
    case SyntheticTask::kMultiNeedle:
      return 24 * o.num_queries;
  }
  return 32;
}

// Fills the parts common to every task; prompt, answers and needle positions are the caller's.
EvalExample NewExample(SyntheticTask task, const HaystackCorpus& corpus, const SyntheticOptions& o,
                       int index) {
  EvalExample ex;
  ex.id = ExampleId(task, corpus, o, index);
  ex.task = std::string(SyntheticTaskName(task));
  ex.metric = MetricKind::kStringMatchAll;
  ex.max_new_tokens = DefaultMaxNewTokens(task, o);
  ex.split = o.split;
  ex.split_region = SplitRegion(corpus.size(), o.split);
  return ex;
}

// Example `index` of the set takes its prose from stratum `index` of the region.
HaystackStratum Stratum(const SyntheticOptions& o, int index) {
  return {.index = index, .count = o.num_examples};
}

std::string_view AnswerPrefix(const SyntheticOptions& o, std::string_view prefix) {
  return o.answer_prefix ? prefix : std::string_view();
}

// `haystack_len`: the prose tokens of `hay` (without the needles).
void PlaceInPrompt(const PromptFrame& frame, const Haystack& hay, int64_t haystack_len,
                   const HaystackCorpus& corpus, EvalExample* ex) {
  ex->prompt = frame.Wrap(hay.tokens);
  ex->source = Cat(corpus.name(), "@", hay.corpus_begin);
  ex->split_region = hay.region;
  ex->corpus_tokens = {hay.corpus_begin, hay.corpus_begin + haystack_len};
  for (int64_t offset : hay.needle_offsets) {
    ex->needle_offsets.push_back(static_cast<int64_t>(frame.head.size()) + offset);
  }
  ex->needle_depths = hay.needle_depths;
}

Status ValuesCollide(const HaystackCorpus& corpus) {
  return absl::InvalidArgumentError(Cat("corpus ", corpus.name(), ": could not draw needle values ",
                                        "absent from the prose in ", kMaxAttempts, " attempts"));
}

StatusOr<EvalExample> MakePasskey(const HaystackCorpus& corpus, const worker::Tokenizer& tokenizer,
                                  const SyntheticOptions& o, const PromptFrame& frame,
                                  SplitMix64& rng, int index) {
  EvalExample ex = NewExample(SyntheticTask::kPasskey, corpus, o, index);
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    const std::string key = RandomDigits(rng, o.passkey_digits);
    const std::vector<std::vector<int32_t>> needles = {tokenizer.Encode(
        fmt::format(" The pass key is {0}. Remember it. {0} is the pass key.", key), kRaw)};
    const int64_t haystack_len =
        o.prompt_len - frame.size() - static_cast<int64_t>(needles[0].size());
    const double depth = o.depth;
    ASSIGN_OR_RETURN(Haystack hay,
                     BuildHaystack(corpus, o.split, haystack_len, needles,
                                   std::span<const double>(&depth, 1), rng, Stratum(o, index)));
    if (ProseContainsAny(corpus.Text(hay.corpus_begin, hay.corpus_begin + haystack_len), {key})) {
      continue;
    }
    PlaceInPrompt(frame, hay, haystack_len, corpus, &ex);
    ex.answers = {key};
    return ex;
  }
  return ValuesCollide(corpus);
}

StatusOr<EvalExample> MakeMultiNeedle(const HaystackCorpus& corpus,
                                      const worker::Tokenizer& tokenizer, const SyntheticOptions& o,
                                      SplitMix64& rng, int index) {
  EvalExample ex = NewExample(SyntheticTask::kMultiNeedle, corpus, o, index);
  const int n = o.num_needles;
  std::vector<double> depths = o.needle_depths;
  if (depths.empty()) {
    for (int k = 0; k < n; ++k) depths.push_back((k + 0.5) / n);
  }
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    std::vector<std::string> keys;
    std::vector<std::string> values;
    while (static_cast<int>(keys.size()) < n) {
      const std::string_view adjective = kAdjectives[rng.Below(kAdjectives.size())];
      const std::string_view noun = kNouns[rng.Below(kNouns.size())];
      std::string key = fmt::format("{}-{}", adjective, noun);
      const bool clash = std::any_of(keys.begin(), keys.end(), [&](const std::string& k) {
        return k.find(key) != std::string::npos || key.find(k) != std::string::npos;
      });
      if (clash) continue;
      std::string value = RandomDigits(rng, 7);
      if (std::find(values.begin(), values.end(), value) != values.end()) continue;
      keys.push_back(std::move(key));
      values.push_back(std::move(value));
    }
    // The first num_queries of a random permutation of the needles are asked.
    std::vector<int> order(n);
    for (int k = 0; k < n; ++k) order[k] = k;
    for (int k = 0; k < o.num_queries; ++k) {
      std::swap(order[k], order[k + static_cast<int>(rng.Below(n - k))]);
    }
    std::vector<std::string> asked;
    std::vector<std::string> answers;
    for (int k = 0; k < o.num_queries; ++k) {
      asked.push_back(keys[order[k]]);
      answers.push_back(values[order[k]]);
    }
    const bool one = asked.size() == 1;
    const std::string joined = JoinKeys(asked);
    const std::string question =
        one ? fmt::format("\n\nWhat is the special magic number for {} mentioned in the text?",
                          joined)
            : fmt::format("\n\nWhat are the special magic numbers for {} mentioned in the text?",
                          joined);
    const std::string prefix =
        one ? fmt::format("The special magic number for {} mentioned in the text is", joined)
            : fmt::format("The special magic numbers for {} mentioned in the text are", joined);
    ASSIGN_OR_RETURN(
        const PromptFrame frame,
        BuildPromptFrame(tokenizer, o.chat,
                         {.instruction = "Special magic numbers are hidden in the following "
                                         "text. Memorize them; you will be asked about them at "
                                         "the end.\n\n",
                          .question = question,
                          .answer_prefix = AnswerPrefix(o, prefix)}));
    std::vector<std::vector<int32_t>> needles;
    int64_t needle_tokens = 0;
    for (int k = 0; k < n; ++k) {
      needles.push_back(tokenizer.Encode(
          fmt::format(" The special magic number for {} is: {}.", keys[k], values[k]), kRaw));
      needle_tokens += static_cast<int64_t>(needles.back().size());
    }
    const int64_t haystack_len = o.prompt_len - frame.size() - needle_tokens;
    ASSIGN_OR_RETURN(Haystack hay, BuildHaystack(corpus, o.split, haystack_len, needles, depths,
                                                 rng, Stratum(o, index)));
    const std::string_view prose = corpus.Text(hay.corpus_begin, hay.corpus_begin + haystack_len);
    if (ProseContainsAny(prose, values) || ProseContainsAny(prose, keys)) continue;
    PlaceInPrompt(frame, hay, haystack_len, corpus, &ex);
    ex.answers = std::move(answers);
    return ex;
  }
  return ValuesCollide(corpus);
}

std::string KvLine(const std::string& key, const std::string& value, bool comma) {
  return fmt::format("\n  \"{}\": \"{}\"{}", key, value, comma ? "," : "");
}

std::string KvQuestion(const std::string& key, bool in_prose) {
  return in_prose ? fmt::format("\n\nWhat is the value of the key \"{}\" in the JSON object?", key)
                  : fmt::format("\n}}\n\nWhat is the value of the key \"{}\"?", key);
}

StatusOr<PromptFrame> KvFrame(const worker::Tokenizer& tokenizer, const SyntheticOptions& o,
                              const std::string& key, bool in_prose) {
  const std::string question = KvQuestion(key, in_prose);
  const std::string prefix = fmt::format("The value of the key \"{}\" is", key);
  return BuildPromptFrame(
      tokenizer, o.chat,
      {.instruction = in_prose ? "A JSON object that maps keys to values is hidden in the "
                                 "following text. Find the value of the key asked for at the "
                                 "end.\n\n"
                               : "The JSON object below maps keys to values. Find the value of "
                                 "the key asked for at the end.\n\nJSON data:\n{",
       .question = question,
       .answer_prefix = AnswerPrefix(o, prefix)});
}

int QueriedIndex(double depth, int64_t pairs) {
  return static_cast<int>(std::lround(depth * static_cast<double>(pairs - 1)));
}

// kv_pairs == 0: the body is pairs only, as many as fit.
StatusOr<EvalExample> MakeKvFill(const HaystackCorpus& corpus, const worker::Tokenizer& tokenizer,
                                 const SyntheticOptions& o, SplitMix64& rng, int index) {
  EvalExample ex = NewExample(SyntheticTask::kKvRetrieval, corpus, o, index);
  struct Pair {
    std::string key, value;
    std::vector<int32_t> line;  // with the trailing comma
    int64_t tail = 0;           // tail tokens when this pair is asked
  };
  std::vector<Pair> pairs;
  std::unordered_set<std::string> used_keys;
  int64_t head = 0;
  int64_t lines = 0;
  int64_t max_tail = 0;
  while (true) {
    Pair p;
    p.key = RandomKvString(rng, o.kv_format);
    p.value = RandomKvString(rng, o.kv_format);
    if (!used_keys.insert(p.key).second) continue;
    ASSIGN_OR_RETURN(const PromptFrame frame, KvFrame(tokenizer, o, p.key, /*in_prose=*/false));
    head = static_cast<int64_t>(frame.head.size());
    p.tail = static_cast<int64_t>(frame.tail.size());
    p.line = tokenizer.Encode(KvLine(p.key, p.value, true), kRaw);
    const int64_t next_lines = lines + static_cast<int64_t>(p.line.size());
    if (head + next_lines + std::max(max_tail, p.tail) > o.prompt_len) break;
    lines = next_lines;
    max_tail = std::max(max_tail, p.tail);
    pairs.push_back(std::move(p));
  }
  while (pairs.size() >= 2) {
    const int q = QueriedIndex(o.depth, static_cast<int64_t>(pairs.size()));
    ASSIGN_OR_RETURN(const PromptFrame frame,
                     KvFrame(tokenizer, o, pairs[q].key, /*in_prose=*/false));
    std::vector<int32_t> body;
    int64_t offset = 0;
    int64_t queried_len = 0;
    for (size_t i = 0; i < pairs.size(); ++i) {
      const bool last = i + 1 == pairs.size();
      const std::vector<int32_t> line =
          last ? tokenizer.Encode(KvLine(pairs[i].key, pairs[i].value, false), kRaw)
               : pairs[i].line;
      if (static_cast<int>(i) == q) {
        offset = static_cast<int64_t>(body.size());
        queried_len = static_cast<int64_t>(line.size());
      }
      body.insert(body.end(), line.begin(), line.end());
    }
    if (frame.size() + static_cast<int64_t>(body.size()) > o.prompt_len) {
      pairs.pop_back();
      continue;
    }
    ex.prompt = frame.Wrap(body);
    ex.source = Cat("generated:", pairs.size(), "-pairs");
    ex.needle_offsets = {static_cast<int64_t>(frame.head.size()) + offset};
    const int64_t others = static_cast<int64_t>(body.size()) - queried_len;
    ex.needle_depths = {others > 0 ? static_cast<double>(offset) / static_cast<double>(others)
                                   : 0.0};
    ex.answers = {pairs[q].value};
    return ex;
  }
  return absl::InvalidArgumentError(
      Cat("kv-retrieval: prompt_len ", o.prompt_len, " leaves room for fewer than two pairs"));
}

// kv_pairs > 0: one JSON block of kv_pairs pairs in the prose.
StatusOr<EvalExample> MakeKvBlock(const HaystackCorpus& corpus, const worker::Tokenizer& tokenizer,
                                  const SyntheticOptions& o, SplitMix64& rng, int index) {
  EvalExample ex = NewExample(SyntheticTask::kKvRetrieval, corpus, o, index);
  const int k = o.kv_pairs;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    std::vector<std::string> keys;
    std::vector<std::string> values;
    std::unordered_set<std::string> used_keys;
    while (static_cast<int>(keys.size()) < k) {
      std::string key = RandomKvString(rng, o.kv_format);
      if (!used_keys.insert(key).second) continue;
      keys.push_back(std::move(key));
      values.push_back(RandomKvString(rng, o.kv_format));
    }
    const int q = QueriedIndex(o.depth, k);
    std::vector<int32_t> block = tokenizer.Encode(" JSON data: {", kRaw);
    int64_t queried_offset = 0;
    for (int i = 0; i < k; ++i) {
      if (i == q) queried_offset = static_cast<int64_t>(block.size());
      const std::vector<int32_t> line =
          tokenizer.Encode(KvLine(keys[i], values[i], i + 1 < k), kRaw);
      block.insert(block.end(), line.begin(), line.end());
    }
    const std::vector<int32_t> close = tokenizer.Encode("\n}", kRaw);
    block.insert(block.end(), close.begin(), close.end());
    ASSIGN_OR_RETURN(const PromptFrame frame, KvFrame(tokenizer, o, keys[q], /*in_prose=*/true));
    const int64_t haystack_len = o.prompt_len - frame.size() - static_cast<int64_t>(block.size());
    const double depth = o.depth;
    const std::vector<std::vector<int32_t>> needles = {std::move(block)};
    ASSIGN_OR_RETURN(Haystack hay,
                     BuildHaystack(corpus, o.split, haystack_len, needles,
                                   std::span<const double>(&depth, 1), rng, Stratum(o, index)));
    const std::string_view prose = corpus.Text(hay.corpus_begin, hay.corpus_begin + haystack_len);
    if (ProseContainsAny(prose, keys) || ProseContainsAny(prose, values)) continue;
    PlaceInPrompt(frame, hay, haystack_len, corpus, &ex);
    ex.needle_offsets[0] += queried_offset;
    ex.answers = {values[q]};
    return ex;
  }
  return ValuesCollide(corpus);
}

}  // namespace

std::string_view SyntheticTaskName(SyntheticTask task) {
  switch (task) {
    case SyntheticTask::kPasskey:
      return "passkey";
    case SyntheticTask::kKvRetrieval:
      return "kv-retrieval";
    case SyntheticTask::kMultiNeedle:
      return "multi-needle";
  }
  return "unknown";
}

std::optional<SyntheticTask> ParseSyntheticTask(std::string_view name) {
  for (SyntheticTask t :
       {SyntheticTask::kPasskey, SyntheticTask::kKvRetrieval, SyntheticTask::kMultiNeedle}) {
    if (SyntheticTaskName(t) == name) return t;
  }
  return std::nullopt;
}

Status ValidateSyntheticOptions(SyntheticTask task, const SyntheticOptions& o) {
  auto bad = [](std::string_view field, const auto& value, std::string_view rule) {
    return absl::InvalidArgumentError(
        Cat("synthetic task option ", field, " = ", value, ": must be ", rule));
  };
  if (o.prompt_len < 1 || o.prompt_len > kMaxPromptLen) {
    return bad("prompt_len", o.prompt_len, Cat("in 1..", kMaxPromptLen));
  }
  if (o.num_examples < 1) return bad("num_examples", o.num_examples, ">= 1");
  if (o.max_new_tokens < 0) return bad("max_new_tokens", o.max_new_tokens, ">= 0");
  if (!(o.depth >= 0.0 && o.depth <= 1.0)) return bad("depth", o.depth, "in [0, 1]");
  switch (task) {
    case SyntheticTask::kPasskey:
      if (o.passkey_digits < 1 || o.passkey_digits > 18) {
        return bad("passkey_digits", o.passkey_digits, "in 1..18");
      }
      break;
    case SyntheticTask::kMultiNeedle:
      if (o.num_needles < 1 || o.num_needles > 64) {
        return bad("num_needles", o.num_needles, "in 1..64");
      }
      if (o.num_queries < 1 || o.num_queries > o.num_needles) {
        return bad("num_queries", o.num_queries, "in 1..num_needles");
      }
      if (!o.needle_depths.empty() && static_cast<int>(o.needle_depths.size()) != o.num_needles) {
        return bad("needle_depths", Cat(o.needle_depths.size(), " values"),
                   "empty or one per needle");
      }
      for (double d : o.needle_depths) {
        if (!(d >= 0.0 && d <= 1.0)) return bad("needle_depths", d, "in [0, 1]");
      }
      break;
    case SyntheticTask::kKvRetrieval:
      if (o.kv_pairs < 0 || o.kv_pairs > 100000) return bad("kv_pairs", o.kv_pairs, "in 0..100000");
      break;
  }
  return absl::OkStatus();
}

StatusOr<std::vector<EvalExample>> GenerateSynthetic(SyntheticTask task,
                                                     const HaystackCorpus& corpus,
                                                     const worker::Tokenizer& tokenizer,
                                                     const SyntheticOptions& options) {
  RETURN_IF_ERROR(ValidateSyntheticOptions(task, options));
  std::optional<PromptFrame> passkey_frame;
  if (task == SyntheticTask::kPasskey) {
    ASSIGN_OR_RETURN(passkey_frame,
                     BuildPromptFrame(tokenizer, options.chat,
                                      {.instruction = "A pass key is hidden somewhere in the "
                                                      "following text. Find it and remember it; "
                                                      "you will be asked for it at the end.\n\n",
                                       .question = "\n\nWhat is the pass key?",
                                       .answer_prefix = AnswerPrefix(options, "The pass key is")}));
  }
  std::vector<EvalExample> out;
  for (int i = 0; i < options.num_examples; ++i) {
    SplitMix64 rng(StreamSeed(options.seed,
                              SplitStream(static_cast<uint64_t>(task) + 1, options.split),
                              static_cast<uint64_t>(i)));
    StatusOr<EvalExample> ex;
    switch (task) {
      case SyntheticTask::kPasskey:
        ex = MakePasskey(corpus, tokenizer, options, *passkey_frame, rng, i);
        break;
      case SyntheticTask::kMultiNeedle:
        ex = MakeMultiNeedle(corpus, tokenizer, options, rng, i);
        break;
      case SyntheticTask::kKvRetrieval:
        ex = options.kv_pairs == 0 ? MakeKvFill(corpus, tokenizer, options, rng, i)
                                   : MakeKvBlock(corpus, tokenizer, options, rng, i);
        break;
    }
    if (!ex.ok()) return ex.status();
    out.push_back(*std::move(ex));
  }
  return out;
}

}  // namespace ripplekv::eval

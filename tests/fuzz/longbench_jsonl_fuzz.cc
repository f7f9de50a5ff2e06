// libFuzzer target for LongBench data (eval/longbench.h) and the answer metrics
// (eval/metrics.h). Any bytes must give a Status or records with their invariants; the
// same bytes must give the same records again; examples built from them must respect the prompt
// limit and the vocabulary; every metric must score the bytes as a prediction within [0, 1]. A
// broken property traps.
//
// Input: byte 0 chooses the path (bit 0: parse the rest as a template file instead; bit 1: read
// the JSONL through a file rather than from memory; bit 2: chat prompts), the rest is the data.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "eval/longbench.h"
#include "eval/metrics.h"
#include "tests/fuzz/scratch_file.h"
#include "tests/worker/tokenizer/test_vocab.h"
#include "worker/tokenizer/tokenizer.h"

namespace {

using ripplekv::eval::EvalExample;
using ripplekv::eval::LongBenchRecord;
using ripplekv::eval::MetricKind;
using ripplekv::worker::Tokenizer;

void Require(bool property) {
  if (!property) __builtin_trap();
}

// 256 byte tokens, a few merges, ChatML control tokens and a ChatML template.
const Tokenizer& TinyTokenizer() {
  static const Tokenizer* const tokenizer = [] {
    ripplekv::worker::TokenizerSpec spec = ripplekv::worker::testing::ByteLevelSpec(
        {{"t", "h"}, {"th", "e"}, {" ", "the"}, {"a", "b"}, {"\n", "\n"}});
    using ripplekv::worker::TokenType;
    ripplekv::worker::testing::AddToken(&spec, "<|im_start|>", TokenType::kControl);
    ripplekv::worker::testing::AddToken(&spec, "<|im_end|>", TokenType::kControl);
    spec.chat_template = "{{'<|im_start|>' + message['content'] + '<|im_end|>'}}";
    auto created = ripplekv::worker::CreateTokenizer(std::move(spec));
    if (!created.ok()) std::abort();
    return created->release();
  }();
  return *tokenizer;
}

void CheckRecords(const std::vector<LongBenchRecord>& records) {
  Require(!records.empty());
  for (const LongBenchRecord& r : records) {
    Require(!r.answers.empty());
    Require(!r.source.empty());
    Require(r.length >= -1);
  }
}

void CheckScore(double score) { Require(std::isfinite(score) && score >= 0.0 && score <= 1.0); }

// Every text metric on the record's strings and on the raw body as a prediction.
void CheckMetrics(const LongBenchRecord& r, std::string_view body) {
  const std::string_view prediction = body.substr(0, 2048);  // the metrics are quadratic
  const std::string& truth = r.answers[0];
  if (truth.size() > 2048) return;
  CheckScore(ripplekv::eval::QaF1Score(prediction, truth));
  CheckScore(ripplekv::eval::QaF1ZhScore(prediction, truth));
  CheckScore(ripplekv::eval::RougeLScore(prediction, truth));
  CheckScore(ripplekv::eval::RougeLZhScore(prediction, truth));
  CheckScore(ripplekv::eval::ClassificationScore(prediction, truth, r.all_classes));
  CheckScore(ripplekv::eval::RetrievalScore(prediction, truth));
  CheckScore(ripplekv::eval::RetrievalZhScore(prediction, truth));
  CheckScore(ripplekv::eval::CountScore(prediction, truth));
  CheckScore(ripplekv::eval::CodeSimScore(prediction, truth));
  CheckScore(ripplekv::eval::StringMatchAll(prediction, r.answers));
  CheckScore(ripplekv::eval::StringMatchPart(prediction, r.answers));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);

  if (mode & 1) {
    auto templates = ripplekv::eval::ParseLongBenchTemplates(body, "fuzz.json");
    if (!templates.ok()) return 0;
    LongBenchRecord r;
    r.context = "c";
    r.input = "i";
    for (const auto& [dataset, t] : *templates) {
      Require(ripplekv::eval::ExpandLongBenchTemplate(t.text, r).ok());
      Require(!t.max_new_tokens.has_value() || *t.max_new_tokens >= 1);
      Require(!t.metric.has_value() || *t.metric != MetricKind::kFidelity);
    }
    return 0;
  }

  static ripplekv::fuzz::ScratchFile* const file = new ripplekv::fuzz::ScratchFile();
  auto load = [&]() -> ripplekv::StatusOr<std::vector<LongBenchRecord>> {
    if (mode & 2) return ripplekv::eval::ReadLongBenchJsonl(file->path());
    return ripplekv::eval::ParseLongBenchJsonl(body, "fuzz.jsonl");
  };
  if (mode & 2) file->Write(body);
  auto records = load();
  if (!records.ok()) return 0;
  CheckRecords(*records);
  auto again = load();
  Require(again.ok() && again->size() == records->size());
  for (size_t i = 0; i < records->size(); ++i) {
    Require((*again)[i].answers == (*records)[i].answers);
    Require((*again)[i].context == (*records)[i].context);
  }

  const Tokenizer& tokenizer = TinyTokenizer();
  ripplekv::eval::LongBenchTemplates templates;
  templates["*"] = {.text = "{context}|{input}", .metric = MetricKind::kQaF1};
  const ripplekv::eval::LongBenchOptions options{.max_prompt_tokens = 64, .chat = (mode & 4) != 0};
  auto examples = ripplekv::eval::MakeLongBenchExamples(*records, templates, tokenizer, options);
  if (examples.ok()) {
    Require(examples->size() == records->size());
    for (const EvalExample& ex : *examples) {
      // At most 64 content tokens plus the chat markup (19 tokens with this vocabulary).
      Require(ex.prompt.size() <= 64 + 32);
      for (int32_t id : ex.prompt) Require(id >= 0 && id < tokenizer.vocab_size());
      CheckScore(ripplekv::eval::ScoreAnswer(ex, body.substr(0, 2048)));
    }
  }
  for (const LongBenchRecord& r : *records) CheckMetrics(r, body);
  return 0;
}

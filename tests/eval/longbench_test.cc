// LongBench JSONL reading (fields, errors naming file:line and field), templates, truncation
// to head and tail halves, per-dataset metric and generation length, chat per dataset.

#include "eval/longbench.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "eval/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/eval/eval_test_util.h"

namespace ripplekv::eval {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::vector<int32_t> Bytes(std::string_view s) {
  std::vector<int32_t> ids;
  for (char c : s) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

constexpr std::string_view kQaLine =
    R"({"input": "Who?", "context": "Ann met Bob.", "answers": ["Ann", "Bob"], "length": 3, )"
    R"("dataset": "hotpotqa", "language": "en", "all_classes": null, "_id": "abc123"})";
constexpr std::string_view kTrecLine =
    R"({"input": "What is X?", "context": "Examples...", "answers": ["Entity"], )"
    R"("all_classes": ["Entity", "Location"], "dataset": "trec", "length": 10})";

std::string ErrorOf(std::string_view jsonl) {
  auto r = ParseLongBenchJsonl(jsonl, "lb.jsonl");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

TEST(LongBenchReaderTest, ReadsTheFields) {
  const std::string jsonl =
      "\xEF\xBB\xBF" + std::string(kQaLine) + "\r\n\n  \n" + std::string(kTrecLine) + "\n";
  auto records = ParseLongBenchJsonl(jsonl, "lb.jsonl");
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 2u);
  const LongBenchRecord& qa = (*records)[0];
  EXPECT_EQ(qa.id, "abc123");
  EXPECT_EQ(qa.dataset, "hotpotqa");
  EXPECT_EQ(qa.input, "Who?");
  EXPECT_EQ(qa.context, "Ann met Bob.");
  EXPECT_THAT(qa.answers, ElementsAre("Ann", "Bob"));
  EXPECT_TRUE(qa.all_classes.empty());
  EXPECT_EQ(qa.length, 3);
  EXPECT_EQ(qa.source, "lb.jsonl:1");
  const LongBenchRecord& trec = (*records)[1];
  EXPECT_EQ(trec.source, "lb.jsonl:4");
  EXPECT_THAT(trec.all_classes, ElementsAre("Entity", "Location"));
  EXPECT_EQ(trec.id, "");
}

TEST(LongBenchReaderTest, StopsAtMaxRecords) {
  const std::string jsonl = std::string(kQaLine) + "\n" + std::string(kQaLine) + "\n{bad";
  auto records = ParseLongBenchJsonl(jsonl, "lb.jsonl", {.max_records = 2});
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(records->size(), 2u);
}

TEST(LongBenchReaderTest, ErrorsNameFileLineAndField) {
  const std::string good = std::string(kQaLine) + "\n";
  EXPECT_THAT(ErrorOf(good + "{\"input\": \"x\",}\n"),
              StartsWith("lb.jsonl:2: invalid JSON at byte"));
  EXPECT_THAT(ErrorOf("[1, 2]"), HasSubstr("lb.jsonl:1: expected a JSON object, got array"));
  EXPECT_THAT(ErrorOf(R"({"context": "c", "answers": ["a"], "dataset": "qasper"})"),
              HasSubstr("lb.jsonl:1: field \"input\" is missing"));
  EXPECT_THAT(ErrorOf(R"({"input": 5, "context": "c", "answers": ["a"], "dataset": "qasper"})"),
              HasSubstr("lb.jsonl:1: field \"input\" must be a string, got number"));
  EXPECT_THAT(ErrorOf(R"({"input": "", "context": "c", "answers": "a", "dataset": "qasper"})"),
              HasSubstr("field \"answers\" must be an array of strings, got string"));
  EXPECT_THAT(ErrorOf(R"({"input": "", "context": "c", "answers": ["a", 7], "dataset": "qasper"})"),
              HasSubstr("field \"answers\" element 1 must be a string, got number"));
  EXPECT_THAT(ErrorOf(R"({"input": "", "context": "c", "answers": [], "dataset": "qasper"})"),
              HasSubstr("field \"answers\" is empty"));
  EXPECT_THAT(ErrorOf(R"({"input": "", "context": "c", "answers": ["a"]})"),
              HasSubstr("field \"dataset\" is missing"));
  EXPECT_THAT(ErrorOf(R"({"input": "", "context": "c", "answers": ["a"], "dataset": "trec"})"),
              HasSubstr("field \"all_classes\" must list the classes"));
  EXPECT_THAT(ErrorOf(R"({"input": "", "context": "c", "answers": ["a"], "dataset": "x", )"
                      R"("all_classes": [1]})"),
              HasSubstr("field \"all_classes\" element 0 must be a string"));
  EXPECT_THAT(ErrorOf(R"({"input": "", "context": "c", "answers": ["a"], "dataset": "x", )"
                      R"("length": -4})"),
              HasSubstr("field \"length\" is negative"));
  EXPECT_THAT(ErrorOf(R"({"input": "", "context": "c", "answers": ["a"], "dataset": "x", )"
                      R"("length": 2.5})"),
              HasSubstr("field \"length\" must be an integer"));
  EXPECT_THAT(ErrorOf(R"({"input": "", "context": "c", "answers": ["a"], "dataset": "x", )"
                      R"("_id": 12})"),
              HasSubstr("field \"_id\" must be a string"));
  EXPECT_THAT(ErrorOf("\n \n"), HasSubstr("no records"));
  // Strings must be valid UTF-8.
  EXPECT_THAT(ErrorOf("{\"input\": \"\xff\", \"context\": \"c\", \"answers\": [\"a\"], "
                      "\"dataset\": \"x\"}"),
              HasSubstr("lb.jsonl:1: invalid JSON at byte"));
}

TEST(LongBenchReaderTest, FileErrors) {
  EXPECT_EQ(ReadLongBenchJsonl("/nonexistent/lb.jsonl").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadLongBenchJsonl(::testing::TempDir()).status().code(),
            absl::StatusCode::kInvalidArgument);  // not a regular file (docs/ERRORS.md)
  const std::string path = ::testing::TempDir() + "/longbench_reader_test.jsonl";
  {
    std::ofstream out(path, std::ios::binary);
    out << kQaLine << "\n";
  }
  auto records = ReadLongBenchJsonl(path);
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ((*records)[0].source, path + ":1");
  std::filesystem::remove(path);
}

TEST(LongBenchDatasetTest, KnowsLongBenchsMetricsAndLengths) {
  const LongBenchDataset* d = FindLongBenchDataset("narrativeqa");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->metric, MetricKind::kQaF1);
  EXPECT_EQ(d->max_new_tokens, 128);
  EXPECT_EQ(FindLongBenchDataset("gov_report")->metric, MetricKind::kRougeL);
  EXPECT_EQ(FindLongBenchDataset("gov_report_e")->max_new_tokens, 512);
  EXPECT_EQ(FindLongBenchDataset("passage_count")->metric, MetricKind::kCount);
  EXPECT_EQ(FindLongBenchDataset("passage_retrieval_zh")->metric, MetricKind::kRetrievalZh);
  EXPECT_EQ(FindLongBenchDataset("repobench-p")->metric, MetricKind::kCodeSim);
  EXPECT_TRUE(FindLongBenchDataset("samsum")->first_line_only);
  EXPECT_FALSE(FindLongBenchDataset("lcc")->chat);
  EXPECT_EQ(FindLongBenchDataset("mmlu"), nullptr);
}

TEST(LongBenchTemplatesTest, AcceptsLongBenchsFormatAndObjects) {
  auto t = ParseLongBenchTemplates(
      R"({"hotpotqa": "Q: {input}\n{context}\nA:",
          "custom": {"template": "{{{context}}}", "max_new_tokens": 7, "metric": "rouge_l",
                     "chat": false, "first_line": true}})",
      "t.json");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->at("hotpotqa").text, "Q: {input}\n{context}\nA:");
  EXPECT_FALSE(t->at("hotpotqa").metric.has_value());
  const LongBenchTemplate& c = t->at("custom");
  EXPECT_EQ(c.max_new_tokens, 7);
  EXPECT_EQ(c.metric, MetricKind::kRougeL);
  EXPECT_EQ(c.chat, false);
  EXPECT_EQ(c.first_line, true);
  LongBenchRecord r;
  r.context = "C";
  r.input = "I";
  auto expanded = ExpandLongBenchTemplate(c.text, r);
  ASSERT_TRUE(expanded.ok());
  EXPECT_EQ(*expanded, "{C}");
}

TEST(LongBenchTemplatesTest, ErrorsNameTheDatasetAndField) {
  auto error = [](std::string_view json) {
    auto t = ParseLongBenchTemplates(json, "t.json");
    EXPECT_FALSE(t.ok());
    return std::string(t.status().message());
  };
  EXPECT_THAT(
      error(R"({"a": "{question}"})"),
      HasSubstr("t.json: dataset \"a\": template: unknown placeholder {question} at byte 0"));
  EXPECT_THAT(error(R"({"a": "x {context"})"), HasSubstr("unclosed '{' at byte 2"));
  EXPECT_THAT(error(R"({"a": "x } y"})"), HasSubstr("single '}' at byte 2"));
  EXPECT_THAT(error(R"({"a": {"template": "x", "max_new_tokens": 0}})"),
              HasSubstr("dataset \"a\": field \"max_new_tokens\" must be an integer in 1..65536"));
  EXPECT_THAT(error(R"({"a": {"template": "x", "metric": "bleu"}})"),
              HasSubstr("field \"metric\" names no text metric"));
  EXPECT_THAT(error(R"({"a": {"template": "x", "temperature": 0}})"),
              HasSubstr("field \"temperature\" is not a template setting"));
  EXPECT_THAT(error(R"({"a": {"max_new_tokens": 3}})"), HasSubstr("field \"template\" is missing"));
  EXPECT_THAT(error(R"({"a": 3})"), HasSubstr("must be a template string or an object"));
  EXPECT_THAT(error(R"(["a"])"), HasSubstr("expected a JSON object"));
  EXPECT_THAT(error("{"), HasSubstr("t.json: invalid JSON"));
}

class LongBenchExamplesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = testing::ByteTokenizer();
    ASSERT_NE(tokenizer_, nullptr);
  }
  static LongBenchRecord Record(std::string dataset, std::string context, std::string input) {
    LongBenchRecord r;
    r.dataset = std::move(dataset);
    r.context = std::move(context);
    r.input = std::move(input);
    r.answers = {"ans"};
    r.source = "lb.jsonl:1";
    return r;
  }
  std::unique_ptr<worker::Tokenizer> tokenizer_;
};

TEST_F(LongBenchExamplesTest, DefaultTemplateMetricAndLength) {
  std::vector<LongBenchRecord> records = {Record("hotpotqa", "CTX", "Q?")};
  records[0].id = "id-7";
  auto ex = MakeLongBenchExamples(records, {}, *tokenizer_, {});
  ASSERT_TRUE(ex.ok()) << ex.status();
  ASSERT_EQ(ex->size(), 1u);
  const EvalExample& e = (*ex)[0];
  EXPECT_EQ(e.id, "id-7");
  EXPECT_EQ(e.task, "hotpotqa");
  EXPECT_EQ(e.metric, MetricKind::kQaF1);
  EXPECT_EQ(e.max_new_tokens, 32);
  EXPECT_FALSE(e.first_line_only);
  EXPECT_EQ(tokenizer_->Decode(e.prompt),
            "Read the following text and answer the question.\n\nCTX\n\nQuestion: Q?\nAnswer:");
  EXPECT_DOUBLE_EQ(ScoreAnswer(e, "ans"), 1.0);
}

TEST_F(LongBenchExamplesTest, TruncationKeepsTheHeadAndTailHalves) {
  const std::vector<LongBenchRecord> records = {
      Record("qasper", "0123456789abcdefghijklmnopqrstuvwxyz", "")};
  LongBenchTemplates templates;
  templates["qasper"] = {.text = "<{context}>"};
  auto ex = MakeLongBenchExamples(records, templates, *tokenizer_, {.max_prompt_tokens = 11});
  ASSERT_TRUE(ex.ok()) << ex.status();
  // 38 bytes, limit 11: the first 5 and last 5 (half = 11 / 2).
  EXPECT_EQ((*ex)[0].prompt, Bytes("<0123wxyz>"));
  auto whole = MakeLongBenchExamples(records, templates, *tokenizer_, {.max_prompt_tokens = 0});
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ((*whole)[0].prompt.size(), 38u);
}

TEST_F(LongBenchExamplesTest, ChatOnlyForDatasetsLongBenchRunsAsChat) {
  testing::ChatVocab v = testing::ChatByteTokenizer(/*bos=*/false);
  std::vector<LongBenchRecord> records = {Record("narrativeqa", "c", "q"),
                                          Record("trec", "c", "q")};
  records[1].all_classes = {"Entity"};
  LongBenchTemplates templates;
  templates["*"] = {.text = "{context}|{input}"};
  auto ex = MakeLongBenchExamples(records, templates, *v.tokenizer, {.chat = true});
  ASSERT_TRUE(ex.ok()) << ex.status();
  EXPECT_EQ(v.tokenizer->Decode((*ex)[0].prompt),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nc|q<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(v.tokenizer->Decode((*ex)[1].prompt), "c|q");
  EXPECT_TRUE((*ex)[1].first_line_only);
  EXPECT_EQ((*ex)[1].metric, MetricKind::kClassification);
  EXPECT_THAT((*ex)[1].all_classes, ElementsAre("Entity"));
}

TEST_F(LongBenchExamplesTest, TemplateSettingsOverrideTheDataset) {
  LongBenchTemplates templates;
  templates["hotpotqa"] = {
      .text = "{input}", .max_new_tokens = 5, .metric = MetricKind::kRougeL, .first_line = true};
  auto ex = MakeLongBenchExamples(std::vector<LongBenchRecord>{Record("hotpotqa", "c", "q")},
                                  templates, *tokenizer_, {});
  ASSERT_TRUE(ex.ok());
  EXPECT_EQ((*ex)[0].max_new_tokens, 5);
  EXPECT_EQ((*ex)[0].metric, MetricKind::kRougeL);
  EXPECT_TRUE((*ex)[0].first_line_only);
  EXPECT_EQ((*ex)[0].id, "lb.jsonl:1");  // no _id: the source
}

TEST_F(LongBenchExamplesTest, UnknownDatasetsNeedAMetric) {
  const std::vector<LongBenchRecord> records = {Record("my_qa", "c", "q")};
  auto missing = MakeLongBenchExamples(records, {}, *tokenizer_, {});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("lb.jsonl:1: dataset \"my_qa\" is not a LongBench dataset"));
  LongBenchTemplates templates;
  templates["my_qa"] = {.text = "{context}", .metric = MetricKind::kQaF1};
  auto ok = MakeLongBenchExamples(records, templates, *tokenizer_, {});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)[0].max_new_tokens, 64);
  templates["my_qa"].metric = MetricKind::kClassification;  // without all_classes
  EXPECT_FALSE(MakeLongBenchExamples(records, templates, *tokenizer_, {}).ok());
}

TEST_F(LongBenchExamplesTest, TakesTheFirstRecordsOfEachDataset) {
  std::vector<LongBenchRecord> records;
  for (int i = 0; i < 3; ++i) records.push_back(Record("hotpotqa", "c", std::to_string(i)));
  for (int i = 0; i < 3; ++i) records.push_back(Record("qasper", "c", std::to_string(i)));
  auto ex = MakeLongBenchExamples(records, {}, *tokenizer_, {.max_per_dataset = 2});
  ASSERT_TRUE(ex.ok());
  ASSERT_EQ(ex->size(), 4u);
  EXPECT_EQ((*ex)[2].task, "qasper");
  EXPECT_FALSE(MakeLongBenchExamples(records, {}, *tokenizer_, {.max_prompt_tokens = -1}).ok());
}

}  // namespace
}  // namespace ripplekv::eval

// `ripplekv eval` end to end on SmolLM2 (needs RIPPLEKV_SMOLLM2_GGUF; the books come from the
// Debian package): the JSON table has a row per method x budget x task, the per-example records
// agree with it, --by-depth gives a row per length and depth, a profile gives ripple+snapkv, a
// corpus file feeds the tasks from the region of the split asked for, and bad input is one error
// line with exit code 2.

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/cli/process_harness.h"

namespace ripplekv::testing {
namespace {

class EvalCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = TestModelPath();
    if (model_.empty()) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF is not set";
    ASSERT_FALSE(tmp_.path().empty());
  }
  // `ripplekv eval` on small examples; --prompt-len 200 unless `extra` gives lengths (a list
  // option accumulates over repeats).
  CliResult Eval(const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = {"eval", "--model",       model_, "--samples",
                                     "2",    "--context-len", "160",  "--continuation",
                                     "8",    "--threads",     "1"};
    if (std::find(extra.begin(), extra.end(), "--prompt-len") == extra.end()) {
      args.insert(args.end(), {"--prompt-len", "200"});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCli(tmp_.path(), name, args, std::chrono::seconds(300));
  }
  std::string model_;
  TempDir tmp_;
};

TEST_F(EvalCliTest, JsonTableAndRecordsCoverEveryMethodBudgetAndTask) {
  const fs::path records = tmp_.path() / "records.jsonl";
  const CliResult r =
      Eval("eval", {"--methods", "full,snapkv,streaming", "--budgets", "40,80", "--tasks",
                    "passkey,fidelity", "--json", "--records-out", records.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("examples/min"), std::string::npos) << r.err;
  const nlohmann::json table = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(table.is_discarded()) << r.out;
  // full once (budget 0) + 2 methods x 2 budgets, each with passkey and 3 fidelity rows.
  EXPECT_EQ(table["results"].size(), 5u * 4u);
  std::map<std::tuple<std::string, int, std::string>, std::pair<int, double>> sums;
  std::istringstream lines(ReadFile(records));
  std::string line;
  size_t count = 0;
  while (std::getline(lines, line)) {
    const nlohmann::json rec = nlohmann::json::parse(line);
    auto& [n, sum] = sums[{rec["method"], rec["budget"].get<int>(), rec["task"]}];
    ++n;
    sum += rec["score"].get<double>();
    if (rec["task"] == "passkey") {
      EXPECT_TRUE(rec.contains("prediction")) << line;
    }
    ++count;
  }
  EXPECT_EQ(count, 5u * 4u * 2u);  // two examples per task
  for (const auto& row : table["results"]) {
    const auto it = sums.find({row["method"], row["budget"].get<int>(), row["task"]});
    ASSERT_NE(it, sums.end()) << row.dump();
    EXPECT_EQ(row["n"], it->second.first);
    EXPECT_NEAR(row["mean"].get<double>(), it->second.second / it->second.first, 1e-12);
  }
}

// `ripplekv examples` writes the examples eval runs with the same flags: the same ids (so records
// written by another engine pair with eval's), prompts of the asked length and the continuation.
TEST_F(EvalCliTest, ExamplesFileHoldsTheExamplesEvalScores) {
  const fs::path records = tmp_.path() / "records.jsonl";
  const CliResult r = Eval("eval-full", {"--methods", "full", "--tasks", "passkey,fidelity",
                                         "--records-out", records.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> scored;
  std::istringstream record_lines(ReadFile(records));
  for (std::string line; std::getline(record_lines, line);) {
    scored.insert(nlohmann::json::parse(line)["example"].get<std::string>());
  }
  const fs::path out = tmp_.path() / "examples.jsonl";
  const CliResult e = RunCli(
      tmp_.path(), "examples",
      {"examples", "--model", model_, "--samples", "2", "--context-len", "160", "--continuation",
       "8", "--prompt-len", "200", "--tasks", "passkey,fidelity", "-o", out.string()},
      std::chrono::seconds(120));
  ASSERT_EQ(e.exit_code, 0) << e.err;
  std::set<std::string> written;
  std::istringstream example_lines(ReadFile(out));
  for (std::string line; std::getline(example_lines, line);) {
    const nlohmann::json ex = nlohmann::json::parse(line);
    const std::string id = ex["id"].get<std::string>();
    written.insert(id);
    if (ex["task"] == "fidelity") {
      EXPECT_EQ(ex["prompt"].size(), 160u) << id;  // SmolLM2 adds no BOS
      EXPECT_EQ(ex["continuation"].size(), 8u) << id;
      EXPECT_EQ(ex["split"], "test") << id;
      const auto range = ex["corpus_tokens"];
      EXPECT_EQ(range[1].get<int64_t>() - range[0].get<int64_t>(), 168) << id;
    } else {
      EXPECT_EQ(ex["task"], "passkey") << id;
      EXPECT_FALSE(ex["answers"].empty()) << id;
      EXPECT_GT(ex["max_new_tokens"].get<int>(), 0) << id;
    }
  }
  EXPECT_EQ(written.size(), 4u);
  EXPECT_EQ(written, scored);
}

TEST_F(EvalCliTest, SeveralLengthsGiveAColumnEachAndDepthsArePooled) {
  const CliResult r = Eval("lengths", {"--methods", "full", "--tasks", "passkey", "--prompt-len",
                                       "128,192", "--depth", "0.2,0.8", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json table = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(table.is_discarded()) << r.out;
  ASSERT_EQ(table["results"].size(), 2u);
  EXPECT_EQ(table["results"][0]["task"], "passkey/L128");
  EXPECT_EQ(table["results"][1]["task"], "passkey/L192");
  for (const auto& row : table["results"]) EXPECT_EQ(row["n"], 2 * 2);  // 2 samples x 2 depths
}

TEST_F(EvalCliTest, ByDepthGivesAColumnPerLengthAndDepth) {
  const CliResult r = Eval("by_depth", {"--methods", "full", "--tasks", "passkey,multi-needle",
                                        "--depth", "0.1,0.5", "--by-depth", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json table = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(table.is_discarded()) << r.out;
  std::map<std::string, int> n_per_task;
  for (const auto& row : table["results"]) n_per_task[row["task"]] = row["n"].get<int>();
  // One length still gets its /L part; multi-needle spreads its own needles (no depth part).
  const std::map<std::string, int> expected = {
      {"passkey/L200/d0.1", 2}, {"passkey/L200/d0.5", 2}, {"multi-needle/L200", 2}};
  EXPECT_EQ(n_per_task, expected) << r.out;
}

TEST_F(EvalCliTest, LongBenchFileWithTemplatesIsScoredPerDataset) {
  const fs::path data = tmp_.path() / "lb.jsonl";
  const fs::path templates = tmp_.path() / "templates.json";
  {
    std::ofstream f(data);
    const std::string passage =
        "Anna Petrova founded the Riverside Observatory in 1921. The observatory sits on a hill "
        "north of the town, and its first telescope came from a shipyard in Glasgow. ";
    std::string context;
    for (int i = 0; i < 6; ++i) context += passage;
    for (const auto& [id, question, answer] :
         std::vector<std::tuple<std::string, std::string, std::string>>{
             {"q1", "Who founded the Riverside Observatory?", "Anna Petrova"},
             {"q2", "In which year was the observatory founded?", "1921"}}) {
      f << nlohmann::json{{"_id", id},           {"dataset", "multifieldqa_en"},
                          {"input", question},   {"context", context},
                          {"answers", {answer}}, {"all_classes", nullptr},
                          {"length", 120}}
               .dump()
        << "\n";
    }
    std::ofstream(templates)
        << R"({"multifieldqa_en": {"template": "Read the text.\n\n{context}\n\nQuestion: {input}\nAnswer:", "max_new_tokens": 12}})";
  }
  const CliResult r = Eval("longbench", {"--methods", "full,snapkv", "--budgets", "48", "--tasks",
                                         "longbench", "--longbench", data.string(), "--templates",
                                         templates.string(), "--chat", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json table = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(table.is_discarded()) << r.out;
  ASSERT_EQ(table["results"].size(), 2u);  // full and snapkv@48, one dataset
  for (const auto& row : table["results"]) {
    EXPECT_EQ(row["task"], "multifieldqa_en");
    EXPECT_EQ(row["n"], 2);
    EXPECT_GE(row["mean"].get<double>(), 0.0);
    EXPECT_LE(row["mean"].get<double>(), 1.0);
  }
  // A malformed record names the file and line.
  std::ofstream(data, std::ios::app) << "{\"dataset\": \"multifieldqa_en\", \"input\": 3}\n";
  const CliResult bad = Eval(
      "longbench-bad", {"--methods", "full", "--tasks", "longbench", "--longbench", data.string()});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("lb.jsonl:3"), std::string::npos) << bad.err;
}

// `docs` JSONL documents of 8 sentences each (~100 SmolLM2 tokens a document), without digits.
std::string ProseJsonl(int docs) {
  const std::vector<std::string> subjects = {"The harbour keeper", "A quiet girl", "The old clerk",
                                             "Her brother", "The village doctor"};
  const std::vector<std::string> verbs = {"walked along", "looked across", "thought about",
                                          "painted", "remembered"};
  const std::vector<std::string> objects = {"the grey pier", "a small garden by the road",
                                            "the church on the hill", "the long winter",
                                            "an empty house"};
  std::string out;
  int k = 0;
  for (int d = 0; d < docs; ++d) {
    std::string text;
    for (int i = 0; i < 8; ++i, ++k) {
      text += (i ? " " : "") + subjects[k % 5] + " " + verbs[(k / 5) % 5] + " " +
              objects[(k / 3) % 5] + ".";
    }
    out += nlohmann::json{{"id", d}, {"text", text}}.dump() + "\n";
  }
  return out;
}

TEST_F(EvalCliTest, CorpusFileFeedsTheTasksFromTheRegionOfTheSplit) {
  const fs::path corpus = tmp_.path() / "traffic.jsonl";
  std::ofstream(corpus) << ProseJsonl(14);
  std::map<std::string, std::pair<int64_t, int64_t>> regions;
  for (const std::string split : {"test", "validation"}) {
    SCOPED_TRACE(split);
    const fs::path records = tmp_.path() / ("records-" + split + ".jsonl");
    const CliResult r = Eval("corpus-" + split, {"--corpus", corpus.string(), "--split", split,
                                                 "--methods", "full", "--tasks", "fidelity,passkey",
                                                 "--json", "--records-out", records.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream lines(ReadFile(records));
    std::string line;
    std::set<std::string> examples;
    while (std::getline(lines, line)) {
      const nlohmann::json rec = nlohmann::json::parse(line);
      const std::string id = rec["example"];
      const std::string task = rec["task"];
      const std::string prefix = task.substr(0, task.find('/')) + "/traffic.jsonl/" + split;
      EXPECT_EQ(id.substr(0, prefix.size()), prefix) << line;
      EXPECT_EQ(rec["split"], split) << line;
      const auto region =
          std::make_pair(rec["region"][0].get<int64_t>(), rec["region"][1].get<int64_t>());
      const int64_t begin = rec["corpus_tokens"][0];
      const int64_t end = rec["corpus_tokens"][1];
      EXPECT_LE(region.first, begin) << line;
      EXPECT_LT(begin, end) << line;
      EXPECT_LE(end, region.second) << line;
      regions[split] = region;
      examples.insert(id);
    }
    EXPECT_EQ(examples.size(), 4u);  // 2 fidelity windows, 2 passkey prompts
  }
  // The two regions are the halves of one corpus.
  ASSERT_EQ(regions.size(), 2u);
  EXPECT_EQ(regions["test"].first, 0);
  EXPECT_EQ(regions["test"].second, regions["validation"].first);
  EXPECT_GT(regions["validation"].second, regions["validation"].first);
}

TEST_F(EvalCliTest, CorpusFileErrorsNameTheFile) {
  const fs::path bad = tmp_.path() / "bad.jsonl";
  std::ofstream(bad) << ProseJsonl(1) << "{\"text\": 3}\n";
  const CliResult malformed = Eval("corpus-malformed", {"--corpus", bad.string()});
  EXPECT_EQ(malformed.exit_code, 2) << malformed.err;
  EXPECT_NE(malformed.err.find("bad.jsonl:2: field \"text\""), std::string::npos) << malformed.err;

  const fs::path small = tmp_.path() / "small.txt";
  std::ofstream(small) << "Only a few words here.\n";
  const CliResult short_text =
      Eval("corpus-short", {"--corpus", small.string(), "--tasks", "passkey"});
  EXPECT_EQ(short_text.exit_code, 2) << short_text.err;
  EXPECT_NE(short_text.err.find("corpus file " + small.string() + " has "), std::string::npos)
      << short_text.err;
  EXPECT_NE(short_text.err.find("needs a corpus of at least"), std::string::npos) << short_text.err;

  const CliResult missing = Eval("corpus-missing", {"--corpus", "tom-sawer"});
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  EXPECT_NE(missing.err.find("not a built-in corpus"), std::string::npos) << missing.err;
}

TEST_F(EvalCliTest, BadInputIsOneErrorLineAndExitCodeTwo) {
  for (const auto& [name, extra, needle] :
       std::vector<std::tuple<std::string, std::vector<std::string>, std::string>>{
           {"unknown-method", {"--methods", "snapkv,quantum"}, "quantum"},
           {"unknown-task", {"--tasks", "trivia"}, "trivia"},
           {"ripple-without-profile", {"--methods", "ripple+snapkv"}, "--profile"},
           {"bad-budget", {"--budgets", "64,0"}, "--budgets"}}) {
    SCOPED_TRACE(name);
    const CliResult r = Eval(name, extra);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("ripplekv: error:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace ripplekv::testing

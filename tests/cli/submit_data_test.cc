// `ripplekv submit --data F` against a real ripplekv-scheduler process (no workers needed): the
// file's content travels inline in the job (JSONL lines or text), --data-on-workers sends its
// absolute path instead, and an unreadable file fails before anything is sent; --builtin names a
// built-in set. Needs
// RIPPLEKV_SMOLLM2_GGUF (submit reads the model's header); skipped without it.

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "store/store.h"
#include "tests/cli/process_harness.h"

namespace ripplekv::testing {
namespace {

const std::string kHash(64, 'a');  // no hashing: the scheduler only stores it

class SubmitDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = TestModelPath();
    if (model_.empty()) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF is not set";
    ASSERT_FALSE(tmp_.path().empty());
    cluster_ = std::make_unique<LocalCluster>(tmp_.path());
    cluster_->StartScheduler();
    ASSERT_TRUE(cluster_->SchedulerAnswers(std::chrono::seconds(20))) << cluster_->Logs();
  }
  void TearDown() override {
    if (cluster_) cluster_->StopAll();
  }
  std::string Write(const std::string& name, const std::string& bytes) {
    const fs::path p = tmp_.path() / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  CliResult Submit(const std::vector<std::string>& extra, const std::string& samples = "1") {
    std::vector<std::string> args = {"submit",  "--scheduler", cluster_->address(),
                                     "--model", model_,        "--model-hash",
                                     kHash,     "--samples",   samples};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCli(tmp_.path(), "submit", args, std::chrono::seconds(60));
  }
  std::string model_;
  TempDir tmp_;
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(SubmitDataTest, DataFilesAreSentInlineAndDataOnWorkersSendsThePath) {
  const std::string lines = "{\"text\": \"a b c\"}\n{\"text\": \"d e\"}\n";
  const std::string jsonl = Write("calib.JSONL", lines);
  const CliResult a = Submit({"--data", jsonl});
  ASSERT_EQ(a.exit_code, 0) << a.err << cluster_->Logs();
  const std::string text_bytes = "Plain prose, sent as it is.\n";
  const std::string text = Write("book.txt", text_bytes);
  const CliResult b = Submit({"--data", text});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const CliResult c = Submit({"--data", text, "--data-on-workers"});
  ASSERT_EQ(c.exit_code, 0) << c.err;

  cluster_->StopAll();
  auto db = store::OpenStore(cluster_->db().string(), {});
  ASSERT_TRUE(db.ok()) << db.status();
  auto job = [&](const CliResult& r) {
    auto j = (*db)->GetJob(std::stoull(r.out));
    EXPECT_TRUE(j.ok()) << j.status();
    return j.ok() ? j->spec : store::JobSpec();
  };
  const store::JobSpec from_jsonl = job(a);
  EXPECT_EQ(from_jsonl.data_inline, lines);  // the lines, each with its '\n'
  EXPECT_EQ(from_jsonl.data_format, store::DataFormat::kJsonl);
  EXPECT_TRUE(from_jsonl.data_path.empty());
  const store::JobSpec from_text = job(b);
  EXPECT_EQ(from_text.data_inline, text_bytes);
  EXPECT_EQ(from_text.data_format, store::DataFormat::kText);
  const store::JobSpec by_path = job(c);
  EXPECT_TRUE(by_path.data_inline.empty());
  EXPECT_EQ(by_path.data_path, text);
}

TEST_F(SubmitDataTest, AnUnreadableDataFileFailsBeforeSubmittingNamingTheFile) {
  const std::string missing = (tmp_.path() / "missing.jsonl").string();
  const CliResult r = Submit({"--data", missing});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << "a job was submitted: " << r.out;
}

// --builtin NAME names the job's built-in set; without it the job names none and the scheduler
// gives workers its default ("mixed"). An unknown name fails before anything is sent. The job
// carries --data-seed and --until-stable with its --max-samples; --max-samples alone is refused.
TEST_F(SubmitDataTest, BuiltinDataSeedAndUntilStableGoIntoTheJobAndUnknownNamesFailEarly) {
  const CliResult code = Submit({"--builtin", "code"});
  ASSERT_EQ(code.exit_code, 0) << code.err << cluster_->Logs();
  const CliResult plain = Submit({});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const CliResult unknown = Submit({"--builtin", "war-and-peace"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("known: mixed, sherlock-holmes, tom-sawyer, code, docs"),
            std::string::npos)
      << unknown.err;
  EXPECT_TRUE(unknown.out.empty()) << "a job was submitted: " << unknown.out;
  const CliResult seeded = Submit({"--data-seed", "3"});
  ASSERT_EQ(seeded.exit_code, 0) << seeded.err;
  const CliResult rounds = Submit({"--until-stable", "--max-samples", "6"}, "2");
  ASSERT_EQ(rounds.exit_code, 0) << rounds.err;
  const CliResult cap_alone = Submit({"--max-samples", "6"});
  EXPECT_NE(cap_alone.exit_code, 0);
  EXPECT_TRUE(cap_alone.out.empty()) << "a job was submitted: " << cap_alone.out;
  const CliResult one_sample = Submit({"--until-stable"}, "1");
  EXPECT_EQ(one_sample.exit_code, 2);
  EXPECT_NE(one_sample.err.find("at least 2 samples"), std::string::npos) << one_sample.err;

  cluster_->StopAll();
  auto db = store::OpenStore(cluster_->db().string(), {});
  ASSERT_TRUE(db.ok()) << db.status();
  auto with_code = (*db)->GetJob(std::stoull(code.out));
  ASSERT_TRUE(with_code.ok()) << with_code.status();
  EXPECT_EQ(with_code->spec.data_builtin, "code");
  auto without = (*db)->GetJob(std::stoull(plain.out));
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_TRUE(without->spec.data_builtin.empty());
  EXPECT_EQ(without->spec.params.data_seed, 0u);
  EXPECT_FALSE(without->spec.params.until_stable);
  auto with_seed = (*db)->GetJob(std::stoull(seeded.out));
  ASSERT_TRUE(with_seed.ok()) << with_seed.status();
  EXPECT_EQ(with_seed->spec.params.data_seed, 3u);
  auto with_rounds = (*db)->GetJob(std::stoull(rounds.out));
  ASSERT_TRUE(with_rounds.ok()) << with_rounds.status();
  EXPECT_TRUE(with_rounds->spec.params.until_stable);
  EXPECT_EQ(with_rounds->spec.params.samples, 2u);
  EXPECT_EQ(with_rounds->spec.params.max_samples, 6u);
  EXPECT_EQ(with_rounds->samples_planned, 2u);
  EXPECT_EQ(with_rounds->tasks_total % 2, 0u);
}

}  // namespace
}  // namespace ripplekv::testing

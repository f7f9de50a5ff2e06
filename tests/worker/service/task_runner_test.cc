#include "worker/service/task_runner.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tests/worker/engine/tiny_model.h"
#include "tests/worker/tokenizer/test_vocab.h"

namespace ripplekv::worker {
namespace {

const std::string kHash(64, 'a');

struct Fixture {
  Model model;
  std::unique_ptr<Transformer> transformer;
  std::unique_ptr<Tokenizer> tokenizer;
};

// Tiny model with a byte-level vocabulary (ids 0..255 are bytes), so text data works.
std::unique_ptr<Fixture> MakeFixture() {
  auto f = std::make_unique<Fixture>();
  f->model = testing::MakeTinyModel({.n_layers = 3, .vocab = 256});
  f->transformer = std::make_unique<Transformer>(Transformer::Create(f->model, {}).value());
  f->tokenizer = CreateTokenizer(testing::ByteLevelSpec({})).value();
  return f;
}

std::string Text(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s;
  for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>('a' + rng() % 26));
  return s;
}

TaskSpec Spec(int sample, int layer) {
  TaskSpec spec;
  spec.task_id = "t";
  spec.job_id = "job1";
  spec.model_hash = kHash;
  spec.sample = sample;
  spec.layer = layer;
  spec.params = {
      .alpha = 0.5, .trials = 3, .seed = 11, .samples = 2, .context_len = 24, .probe_len = 6};
  return spec;
}

TEST(TaskRunnerTest, ResultsEqualSampleCalibratorRunLayer) {
  auto f = MakeFixture();
  TaskRunner runner(*f->transformer, f->tokenizer.get(), kHash, {});
  JobData data;
  data.source = JobData::Source::kText;
  data.text = Text(200, 1);
  ASSERT_TRUE(runner.LoadJob("job1", data, DataOptionsOf(Spec(0, 0).params)).ok());
  auto set =
      CalibrationDataFromText(data.text, "x", *f->tokenizer, DataOptionsOf(Spec(0, 0).params));
  ASSERT_TRUE(set.ok()) << set.status();
  for (int layer = 0; layer < 3; ++layer) {
    const TaskSpec spec = Spec(1, layer);
    auto out = runner.Run(spec);
    ASSERT_TRUE(out.ok()) << out.status();
    auto cal = SampleCalibrator::Prepare(*f->transformer, 1, set->samples[1].context,
                                         set->samples[1].probe, PerturbMode::kCache);
    ASSERT_TRUE(cal.ok());
    auto want = (*cal)->RunLayer(layer, TrialOptionsOf(spec.params));
    ASSERT_TRUE(want.ok());
    ASSERT_EQ(out->kl.size(), 3u);
    EXPECT_EQ(out->kl, *want) << "layer " << layer;  // bit-identical
    EXPECT_GT(out->kl[0], 0.0);
  }
}

TEST(TaskRunnerTest, RefusesModelHashMismatchAndBadLayer) {
  auto f = MakeFixture();
  TaskRunner runner(*f->transformer, f->tokenizer.get(), kHash, {});
  TaskSpec spec = Spec(0, 0);
  EXPECT_FALSE(runner.Check(spec).has_value());
  spec.model_hash = std::string(64, 'b');
  auto r = runner.Check(spec);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->reason, Refusal::kModelHashMismatch);
  EXPECT_NE(r->message.find(kHash), std::string::npos) << r->message;
  spec = Spec(0, 3);  // the tiny model has layers 0..2
  r = runner.Check(spec);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->reason, Refusal::kInvalidTask);
  EXPECT_EQ(r->message, "params.layers[0]: layer 3 is out of range: the model has 3 layers");
  // The method's rules are the scheduler's and the CLI's (method/calibration_params.h).
  spec = Spec(0, 0);
  spec.params.alpha = 0;
  r = runner.Check(spec);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->reason, Refusal::kInvalidTask);
  EXPECT_EQ(r->message, "params.alpha: must be finite and > 0, got 0");
}

// Every rule of method/calibration_params.h refuses a task in Check(), before any data is loaded
// or any work done, with the message the CLI and the scheduler give for the same values (the
// task's one layer is the layer list checked).
TEST(TaskRunnerTest, EveryInvalidParameterIsRefusedWithTheMethodsMessage) {
  auto f = MakeFixture();
  TaskRunner runner(*f->transformer, f->tokenizer.get(), kHash, {});
  struct Edge {
    const char* name;
    void (*edit)(TaskSpec&);
    const char* message;
  };
  const std::vector<Edge> edges = {
      {"alpha 0", [](TaskSpec& s) { s.params.alpha = 0; },
       "params.alpha: must be finite and > 0, got 0"},
      {"alpha -1", [](TaskSpec& s) { s.params.alpha = -1; },
       "params.alpha: must be finite and > 0, got -1"},
      {"alpha NaN", [](TaskSpec& s) { s.params.alpha = std::nan(""); },
       "params.alpha: must be finite and > 0, got nan"},
      {"trials 0", [](TaskSpec& s) { s.params.trials = 0; }, "params.trials: must be >= 1, got 0"},
      {"samples 0", [](TaskSpec& s) { s.params.samples = 0; },
       "params.samples: must be >= 1, got 0"},
      {"context_len 0", [](TaskSpec& s) { s.params.context_len = 0; },
       "params.context_len: must be >= 1, got 0"},
      {"probe_len 0", [](TaskSpec& s) { s.params.probe_len = 0; },
       "params.probe_len: must be >= 1, got 0"},
      {"probe_len = context_len", [](TaskSpec& s) { s.params.probe_len = 24; },
       "params.probe_len: must be < params.context_len (24), got 24"},
      {"negative layer", [](TaskSpec& s) { s.layer = -1; },
       "params.layers[0]: layer -1 is negative"},
      {"layer out of range", [](TaskSpec& s) { s.layer = 3; },
       "params.layers[0]: layer 3 is out of range: the model has 3 layers"},
      {"until_stable, cap below a round",
       [](TaskSpec& s) {
         s.params.until_stable = true;
         s.params.max_samples = 1;
       },
       "params.max_samples: must be >= params.samples (2), got 1"},
  };
  for (const Edge& edge : edges) {
    TaskSpec spec = Spec(0, 0);
    edge.edit(spec);
    const std::optional<TaskRefusal> r = runner.Check(spec);
    ASSERT_TRUE(r.has_value()) << edge.name;
    EXPECT_EQ(r->reason, Refusal::kInvalidTask) << edge.name;
    EXPECT_EQ(r->message, edge.message) << edge.name;
  }
  EXPECT_FALSE(runner.HasJob("job1"));  // nothing was loaded
}

TEST(TaskRunnerTest, ReusesPrefillAcrossLayersOfOneSampleAndDropsJob) {
  auto f = MakeFixture();
  TaskRunner runner(*f->transformer, f->tokenizer.get(), kHash, {});
  JobData data;
  data.source = JobData::Source::kText;
  data.text = Text(200, 2);
  ASSERT_TRUE(runner.LoadJob("job1", data, DataOptionsOf(Spec(0, 0).params)).ok());
  auto first = runner.Run(Spec(0, 0));
  auto second = runner.Run(Spec(0, 2));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_FALSE(first->prefill_reused);
  EXPECT_TRUE(second->prefill_reused);
  EXPECT_EQ(runner.cache_stats().misses, 1);
  EXPECT_EQ(runner.cache_stats().hits, 1);
  auto keys = runner.CachedSamples();
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys[0].job_id, "job1");
  EXPECT_EQ(keys[0].sample, 0);
  runner.DropJob("job1");
  EXPECT_TRUE(runner.CachedSamples().empty());
  EXPECT_FALSE(runner.HasJob("job1"));
  EXPECT_EQ(runner.Run(Spec(0, 1)).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(TaskRunnerTest, InlineJsonlLinesAreReadAsJsonlSamples) {
  auto f = MakeFixture();
  JobData data;
  data.source = JobData::Source::kJsonl;
  data.jsonl_lines = {"{\"text\": \"" + Text(40, 3) + "\"}", "{\"text\": \"" + Text(40, 4) + "\"}"};
  const DataOptions options{.samples = 2, .context_len = 24, .probe_len = 6};
  auto set = BuildCalibrationSet(data, *f->tokenizer, options);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->samples.size(), 2u);
  auto ids = f->tokenizer->Encode(Text(40, 4));
  EXPECT_EQ(set->samples[1].context, std::vector<int32_t>(ids.begin(), ids.begin() + 24));
}

// A private directory tree for path data: root/data (the data directory) and root/outside.
class DataTree {
 public:
  DataTree() {
    std::string templ =
        (std::filesystem::temp_directory_path() / "ripplekv_task_runner_XXXXXX").string();
    if (::mkdtemp(templ.data()) != nullptr) root_ = std::filesystem::canonical(templ);
    std::filesystem::create_directories(root_ / "data");
    std::filesystem::create_directories(root_ / "outside");
  }
  ~DataTree() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  std::string Write(const std::string& rel, const std::string& text) const {
    std::ofstream(root_ / rel) << text;
    return (root_ / rel).string();
  }
  std::string Path(const std::string& rel) const { return (root_ / rel).string(); }
  DataDirs Dirs() const { return DataDirs::Open({Path("data")}).value(); }

 private:
  std::filesystem::path root_;
};

JobData PathData(const std::string& path) {
  JobData data;
  data.source = JobData::Source::kPath;
  data.path = path;
  return data;
}

TEST(TaskRunnerTest, PathDataInsideTheDataDirectoriesIsReadLikeInlineData) {
  auto f = MakeFixture();
  DataTree tree;
  const std::string text = Text(200, 6);
  const std::string path = tree.Write("data/calib.txt", text);
  TaskRunner runner(*f->transformer, f->tokenizer.get(), kHash, {.data_dirs = tree.Dirs()});
  ASSERT_TRUE(runner.LoadJob("job1", PathData(path), DataOptionsOf(Spec(0, 0).params)).ok());
  auto from_path = BuildCalibrationSet(PathData(path), *f->tokenizer,
                                       DataOptionsOf(Spec(0, 0).params), tree.Dirs());
  auto inline_text =
      CalibrationDataFromText(text, path, *f->tokenizer, DataOptionsOf(Spec(0, 0).params));
  ASSERT_TRUE(from_path.ok() && inline_text.ok()) << from_path.status();
  EXPECT_EQ(from_path->fingerprint, inline_text->fingerprint);
  EXPECT_EQ(from_path->samples[1].source, inline_text->samples[1].source);
}

// Whatever the reason a path is not read, the error is the one generic message: nothing about
// whether the file exists, its type or its size reaches the job's clients.
TEST(TaskRunnerTest, PathDataNotReadableUnderTheDataDirectoriesGetsOneGenericMessage) {
  auto f = MakeFixture();
  DataTree tree;
  const std::string secret = tree.Write("outside/secret.txt", Text(5000, 7));
  tree.Write("data/short.txt", "x");
  std::filesystem::create_directories(tree.Path("data/dir"));
  std::filesystem::create_symlink(secret, tree.Path("data/link.txt"));
  const DataOptions options = DataOptionsOf(Spec(0, 0).params);
  struct Case {
    std::string path;
    bool with_dirs;
  };
  const Case cases[] = {
      {secret, true},                                   // outside
      {tree.Path("data/../outside/secret.txt"), true},  // .. escape
      {tree.Path("data/link.txt"), true},               // symlink inside pointing outside
      {tree.Path("data/missing.txt"), true},            // missing
      {tree.Path("data/dir"), true},                    // a directory
      {tree.Path("data/short.txt"), false},             // no data directories configured
  };
  for (const Case& c : cases) {
    TaskRunnerOptions runner_options;
    if (c.with_dirs) runner_options.data_dirs = tree.Dirs();
    TaskRunner runner(*f->transformer, f->tokenizer.get(), kHash, runner_options);
    const Status s = runner.LoadJob("job1", PathData(c.path), options);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << c.path << ": " << s;
    EXPECT_EQ(std::string(s.message()), std::string(kDataPathRefused)) << c.path;
    EXPECT_FALSE(runner.HasJob("job1"));
  }
}

// A file the operator allowed keeps its parse errors' detail.
TEST(TaskRunnerTest, ParseErrorsOfAFileInsideTheDataDirectoriesKeepTheirDetail) {
  auto f = MakeFixture();
  DataTree tree;
  const std::string path = tree.Write("data/bad.jsonl", "{\"text\": 3}\n");
  TaskRunner runner(*f->transformer, f->tokenizer.get(), kHash, {.data_dirs = tree.Dirs()});
  const Status s = runner.LoadJob("job1", PathData(path), DataOptionsOf(Spec(0, 0).params));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(path + ":1"), std::string::npos) << s;
}

TEST(TaskRunnerTest, SampleOutOfRangeIsInvalidArgument) {
  auto f = MakeFixture();
  TaskRunner runner(*f->transformer, f->tokenizer.get(), kHash, {});
  runner.SetJobSamples("job1", {});
  EXPECT_EQ(runner.Run(Spec(0, 0)).status().code(), absl::StatusCode::kInvalidArgument);
}

// A job's built-in data is the named set of worker/data (an empty name: the default, "mixed"), the
// set `ripplekv calibrate` reads for the same name and options.
TEST(TaskRunnerTest, BuiltinDataIsTheNamedSetAndEmptyMeansTheDefault) {
  auto f = MakeFixture();
  const DataOptions options = DataOptionsOf(Spec(0, 0).params);
  JobData data;
  data.source = JobData::Source::kBuiltin;
  data.builtin = "moby-dick";
  auto unknown = BuildCalibrationSet(data, *f->tokenizer, options);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("data.builtin: unknown built-in calibration set"),
            std::string::npos)
      << unknown.status();
  EXPECT_EQ(JobData().builtin, "mixed");
  auto reference = DefaultCalibrationData(*f->tokenizer, options);
  if (!reference.ok()) GTEST_SKIP() << "built-in corpora not installed: " << reference.status();
  data.builtin = "";
  auto by_default = BuildCalibrationSet(data, *f->tokenizer, options);
  ASSERT_TRUE(by_default.ok()) << by_default.status();
  EXPECT_EQ(by_default->fingerprint, reference->fingerprint);
  EXPECT_EQ(by_default->description, reference->description);
  EXPECT_EQ(by_default->domain, "mixed");
  data.builtin = "code";
  auto code = BuildCalibrationSet(data, *f->tokenizer, options);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(code->domain, "code");
  EXPECT_EQ(code->fingerprint, BuiltinCalibrationData("code", *f->tokenizer, options)->fingerprint);
}

}  // namespace
}  // namespace ripplekv::worker

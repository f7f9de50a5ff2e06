// The remote subcommands, talking to ripplekv-scheduler's CalibrationService (docs/API.md):
//   ripplekv submit --scheduler ADDR --model PATH [--model-hash H]
//     [--data F [--data-on-workers] | --builtin NAME] [--samples N] [--context-len C] [--probe W]
//     [--alpha A] [--trials T] [--seed S]
//     [--data-seed S] [--until-stable [--max-samples N]]
//     [--mode cache|prefill] [--layers LIST] [--strict] [--priority P] [--idempotency-key K]
//     [--verify F] [--wait [--json]]
//   --data F is read here and sent inline (cli/inline_data.h); with --data-on-workers the job
//   carries F's absolute path instead, which workers read only under their --data-dir.
//   --verify F (0..1) is the fraction of tasks the scheduler runs again on a second, distinct
//   worker (JobSpec.verify; docs/SCHEDULER.md, "Verified results"); unset: the scheduler's
//   default, 0.05.
//   ripplekv jobs --scheduler ADDR [--json]
//   ripplekv tasks --scheduler ADDR JOB [--json]
//   ripplekv workers --scheduler ADDR [--json]
//   ripplekv watch --scheduler ADDR JOB
//   ripplekv cancel --scheduler ADDR JOB
//   ripplekv profile get --scheduler ADDR --model-hash H [--version V] [--json] [--plot F.svg]
//     [--ratio R]
//   ripplekv profile list --scheduler ADDR [--model-hash H]
// Every command also takes the security flags of proto/client_security_flags.h: --tls-ca F
// [--tls-cert F --tls-key F] [--tls-server-name N] [--token-file F] (docs/SECURITY.md); a
// rejected call (UNAUTHENTICATED, PERMISSION_DENIED) exits 1.
// stdout: results (tables, or JSON with --json); stderr: progress and logs. A server error is one
// line "ripplekv: error: <message>" and the exit code of cli/exit_codes.h (UNAVAILABLE: 3).

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/inline_data.h"
#include "cli/method_flags.h"
#include "cli/profile_view.h"
#include "cli/progress.h"
#include "cli/remote_client.h"
#include "google/protobuf/util/json_util.h"
#include "method/budget_map.h"
#include "method/calibration_params.h"
#include "method/profile.h"
#include "proto/calibration_params.h"
#include "proto/client_security_flags.h"
#include "proto/profile.h"
#include "spdlog/spdlog.h"
#include "worker/model/model_hash.h"
#include "worker/model/model_loader.h"

namespace ripplekv::cli {

namespace {

struct SubmitArgs {
  std::string scheduler;
  v1::ClientSecurityFiles security;  // --tls-ca, --tls-cert, --tls-key, --token-file
  std::string model;
  std::string model_hash;        // empty: computed from --model
  MethodFlags method;            // method.data: a file read here and sent inline
  bool data_on_workers = false;  // send method.data as a path the workers read instead
  int priority = 0;
  std::string idempotency_key;
  bool wait = false;
  bool json = false;          // with --wait: print the profile JSON instead of the table
  bool until_stable = false;  // rounds of --samples samples until stable, as `calibrate`
  int max_samples = 64;       // the cap of --until-stable
  // --verify: the fraction of tasks verified on a second worker, checked in [0, 1] before any
  // call; unset (verify_set false) leaves JobSpec.verify unset, so the scheduler's default holds.
  double verify = 0.0;
  bool verify_set = false;
};

struct WorkersArgs {
  std::string scheduler;
  v1::ClientSecurityFiles security;  // --tls-ca, --tls-cert, --tls-key, --token-file
  bool json = false;
};

struct JobArgs {
  std::string scheduler;
  v1::ClientSecurityFiles security;  // --tls-ca, --tls-cert, --tls-key, --token-file
  std::string job_id;
  bool json = false;
};

struct ProfileArgs {
  std::string scheduler;
  v1::ClientSecurityFiles security;  // --tls-ca, --tls-cert, --tls-key, --token-file
  std::string model_hash;
  int64_t version = 0;
  bool json = false;
  std::string plot;    // also write the SVG chart here
  double ratio = 4.0;  // budget multipliers shown in the table and the plot
};

// "0-3,7,10-12" -> {0,1,2,3,7,10,11,12}; the syntax of `ripplekv calibrate --layers`.
std::string ToJson(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

int PrintProfile(const v1::Profile& message, bool json, double ratio = 4.0,
                 const std::string& plot = {}) {
  const method::SensitivityProfile profile = v1::ProfileFromProto(message);
  if (!plot.empty()) {
    if (Status st = WriteProfilePlot(profile, ratio, plot); !st.ok()) return ReportError(st);
    spdlog::info("wrote plot {}", plot);
  }
  if (json) {
    auto text = method::ProfileToJson(profile);
    if (!text.ok()) return ReportError(text.status());
    std::fputs(text->c_str(), stdout);
    if (text->empty() || text->back() != '\n') std::fputc('\n', stdout);
    return kExitOk;
  }
  std::printf("model %s  version %lld  job %s  created %s\n", profile.model.hash.c_str(),
              static_cast<long long>(message.version()), message.job_id().c_str(),
              profile.created_at.c_str());
  PrintProfileTable(profile, ratio);
  return kExitOk;
}

// What a job's progress says beyond its counts: tasks verified, disagreements, and why it waits;
// empty while none of them is set.
std::vector<std::string> ProgressNotes(const v1::JobProgress& p) {
  std::vector<std::string> notes;
  if (p.tasks_verified() > 0) notes.push_back(absl::StrCat("verified ", p.tasks_verified()));
  if (p.disagreements() > 0) notes.push_back(absl::StrCat("disagreements ", p.disagreements()));
  if (!p.waiting_reason().empty()) notes.push_back(absl::StrCat("waiting: ", p.waiting_reason()));
  return notes;
}

// A Timestamp as "YYYY-MM-DDTHH:MM:SSZ" (seconds precision).
std::string TimestampText(const google::protobuf::Timestamp& t) {
  return method::FormatIso8601Utc(
      std::chrono::system_clock::time_point(std::chrono::seconds(t.seconds())));
}

bool IsTerminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

// Follows the job with WatchJob until it is terminal, with a progress bar on stderr. Reconnects
// on UNAVAILABLE with exponential backoff (100 ms doubling to 5 s, at most 10 tries in a row).
// Returns the final Job (GetJob after the stream ends).
// A job of rounds (--until-stable) grows its trials_total with each round: the bar starts again
// over the new total, labelled with the samples planned.
StatusOr<v1::Job> WaitForJob(RemoteClient& client, const std::string& job_id) {
  std::unique_ptr<Progress> progress;
  int64_t shown = -1;         // trials_done last shown
  int64_t shown_total = -1;   // trials_total of the bar
  std::string waiting;        // waiting_reason last reported
  int32_t disagreements = 0;  // disagreements last reported
  auto update = [&](const v1::JobProgress& p) {
    if (p.waiting_reason() != waiting) {
      if (!p.waiting_reason().empty()) {
        spdlog::warn("job {} waiting: {}", job_id, p.waiting_reason());
      } else {
        spdlog::info("job {} no longer waiting", job_id);
      }
      waiting = p.waiting_reason();
    }
    if (p.disagreements() > disagreements) {
      spdlog::warn(
          "job {}: {} verification disagreement{} so far; the outvoted worker is quarantined and "
          "every task it completed is run again",
          job_id, p.disagreements(), p.disagreements() == 1 ? "" : "s");
      disagreements = p.disagreements();
    }
    if (p.trials_total() <= 0) return;
    if (p.trials_done() == shown && p.trials_total() == shown_total) return;
    if (!progress || p.trials_total() != shown_total) {
      progress.reset();
      progress = std::make_unique<Progress>(
          absl::StrCat("job ", job_id, " (", p.samples_planned(), " samples)"), p.trials_total(),
          "trials");
      shown_total = p.trials_total();
    }
    progress->Update(p.trials_done());
    shown = p.trials_done();
  };
  int failures = 0;
  auto backoff = std::chrono::milliseconds(100);
  while (true) {
    bool terminal = false;
    Status s = client.WatchJob(job_id, [&](const v1::JobEvent& event) {
      failures = 0;
      if (event.has_snapshot()) {
        update(event.snapshot().progress());
        terminal = terminal || IsTerminal(event.snapshot().state());
      } else if (event.has_progress()) {
        update(event.progress());
      } else if (event.has_state_change()) {
        terminal = terminal || IsTerminal(event.state_change().current());
      } else if (event.has_warning()) {
        spdlog::warn("job {}: {}", job_id, event.warning().message());
      }
    });
    if (s.ok() || terminal) break;
    if (s.code() != absl::StatusCode::kUnavailable || ++failures >= 10) return s;
    spdlog::warn("watch: {}; reconnecting in {} ms", std::string(s.message()), backoff.count());
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
  }
  ASSIGN_OR_RETURN(v1::Job job, client.GetJob(job_id));
  if (progress) update(job.progress());
  progress.reset();
  return job;
}

// Exit status for a terminal job: FAILED reports its error, CANCELLED is a failure.
int ReportJobEnd(const v1::Job& job) {
  if (job.state() == v1::JOB_STATE_SUCCEEDED) return kExitOk;
  if (job.state() == v1::JOB_STATE_FAILED) {
    return ReportError(
        absl::Status(static_cast<absl::StatusCode>(job.error().code()),
                     absl::StrCat("job ", job.job_id(), " failed: ", job.error().message())));
  }
  return ReportError(absl::CancelledError(
      absl::StrCat("job ", job.job_id(), " ended ", JobStateName(job.state()))));
}

int RunSubmit(const SubmitArgs& args) {
  // Written so that NaN fails too.
  if (args.verify_set && !(args.verify >= 0.0 && args.verify <= 1.0)) {
    return ReportError(absl::InvalidArgumentError(absl::StrCat(
        "--verify must be a fraction of the tasks in [0, 1] (1: every task), got ", args.verify)));
  }
  // Every rule of the method's parameters (method/calibration_params.h) before anything is sent;
  // the scheduler checks the layer range against the model.
  auto method_params = CheckedCalibrationParams(args.method, args.until_stable, args.max_samples);
  if (!method_params.ok()) return ReportError(method_params.status());
  auto builtin = BuiltinFromFlags(args.method);
  if (!builtin.ok()) return ReportError(builtin.status());
  std::string hash = args.model_hash;
  if (hash.empty()) {
    spdlog::info("hashing {}", args.model);
    auto computed = worker::ModelHash(args.model);
    if (!computed.ok()) return ReportError(computed.status());
    hash = *computed;
  }
  v1::SubmitJobRequest request;
  request.set_idempotency_key(args.idempotency_key);
  v1::JobSpec* spec = request.mutable_spec();
  spec->mutable_model()->set_model_hash(hash);
  // The layer count and name from the model's headers, so a job can be queued before any worker
  // holding the model has registered. A model readable only by the workers (--model-hash given)
  // leaves them to the workers' report.
  if (auto summary = worker::DescribeModel(args.model); summary.ok()) {
    spec->mutable_model()->set_n_layers(summary->config.n_layers);
    spec->mutable_model()->set_name(summary->config.name);
    method_params =
        WithModelKvHeads(args.method, *std::move(method_params), summary->config.n_kv_heads);
    if (!method_params.ok()) return ReportError(method_params.status());
  } else if (args.model_hash.empty()) {
    return ReportError(summary.status());
  } else if (args.method.per_head) {
    return ReportError(absl::InvalidArgumentError(
        absl::StrCat("--per-head needs the model's KV head count, but ", args.model,
                     " cannot be read here: ", summary.status().message())));
  }
  std::error_code ec;
  const std::filesystem::path model_path = std::filesystem::absolute(args.model, ec);
  spec->mutable_model()->set_path(ec ? args.model : model_path.string());
  if (!args.method.data.empty() && args.data_on_workers) {
    // Workers run elsewhere, so make it absolute; they read it only under their --data-dir.
    const std::filesystem::path data = std::filesystem::absolute(args.method.data, ec);
    spec->mutable_data()->set_path(ec ? args.method.data : data.string());
  } else if (!args.method.data.empty()) {
    auto data = ReadInlineData(args.method.data);
    if (!data.ok()) return ReportError(data.status());
    if (data->jsonl) {
      for (std::string& line : data->lines) {
        spec->mutable_data()->mutable_jsonl()->add_lines(std::move(line));
      }
    } else {
      spec->mutable_data()->set_text(std::move(data->text));
    }
    spdlog::info("sending {} inline ({}, {} bytes)", args.method.data,
                 data->jsonl ? "JSONL" : "text", data->inline_bytes);
  } else if (!args.method.builtin.empty()) {
    spec->mutable_data()->set_builtin(*builtin);
  }
  spec->mutable_data()->set_strict(args.method.strict);
  v1::CalibrationParamsToProto(*method_params, spec->mutable_params());
  spec->set_priority(args.priority);
  if (args.verify_set) spec->set_verify(args.verify);

  auto client = RemoteClient::Connect(args.scheduler, args.security);
  if (!client.ok()) return ReportError(client.status());
  auto response = client->SubmitJob(request);
  if (!response.ok()) return ReportError(response.status());
  const std::string job_id = response->job().job_id();
  spdlog::info("{} job {} for model {}", response->existing() ? "existing" : "submitted", job_id,
               hash.substr(0, 12));
  if (!args.wait) {
    std::printf("%s\n", job_id.c_str());
    return kExitOk;
  }
  auto job = WaitForJob(*client, job_id);
  if (!job.ok()) return ReportError(job.status());
  if (int code = ReportJobEnd(*job); code != kExitOk) return code;
  auto profile = client->GetProfile(hash, job->profile_version());
  if (!profile.ok()) return ReportError(profile.status());
  return PrintProfile(*profile, args.json);
}

int RunJobs(const JobArgs& args) {
  auto client = RemoteClient::Connect(args.scheduler, args.security);
  if (!client.ok()) return ReportError(client.status());
  auto jobs = client->ListJobs();
  if (!jobs.ok()) return ReportError(jobs.status());
  if (args.json) {
    v1::ListJobsResponse all;
    for (const v1::Job& job : *jobs) *all.add_jobs() = job;
    std::printf("%s\n", ToJson(all).c_str());
    return kExitOk;
  }
  // samples: planned so far; "4/64" for a job of rounds (--until-stable), up to its cap.
  std::printf("%-24s  %-10s  %-12s  %9s  %15s  %8s\n", "job", "state", "model", "samples", "trials",
              "priority");
  for (const v1::Job& job : *jobs) {
    const std::string trials =
        absl::StrCat(job.progress().trials_done(), "/", job.progress().trials_total());
    const v1::CalibrationParams& params = job.spec().params();
    const std::string samples =
        params.until_stable()
            ? absl::StrCat(job.progress().samples_planned(), "/", params.max_samples())
            : absl::StrCat(job.progress().samples_planned());
    std::printf("%-24s  %-10s  %-12s  %9s  %15s  %8d\n", job.job_id().c_str(),
                JobStateName(job.state()).c_str(),
                job.spec().model().model_hash().substr(0, 12).c_str(), samples.c_str(),
                trials.c_str(), job.spec().priority());
    // Verification counts and why the job waits, on a line of their own under the job's.
    const std::vector<std::string> notes = ProgressNotes(job.progress());
    if (!notes.empty()) std::printf("  %s\n", absl::StrJoin(notes, ", ").c_str());
  }
  return kExitOk;
}

// One line per worker the scheduler knows: connected or not, its model, device and build, its
// leases, the failures charged to it recently, the tasks it completed and any quarantine.
int RunWorkers(const WorkersArgs& args) {
  auto client = RemoteClient::Connect(args.scheduler, args.security);
  if (!client.ok()) return ReportError(client.status());
  auto workers = client->ListWorkers();
  if (!workers.ok()) return ReportError(workers.status());
  if (args.json) {
    v1::ListWorkersResponse all;
    for (const v1::WorkerStatus& worker : *workers) *all.add_workers() = worker;
    std::printf("%s\n", ToJson(all).c_str());
    return kExitOk;
  }
  std::printf("%-24s  %-9s  %-12s  %-8s  %7s  %8s  %6s  %-30s  %s\n", "worker", "connected",
              "model", "device", "leases", "failures", "done", "version", "quarantined");
  for (const v1::WorkerStatus& w : *workers) {
    const std::string leases = absl::StrCat(w.leases(), "/", w.capacity());
    const std::string quarantine =
        w.quarantined() ? absl::StrCat("until ", TimestampText(w.quarantined_until()), ": ",
                                       w.quarantine_reason())
                        : "-";
    auto or_dash = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
    std::printf("%-24s  %-9s  %-12s  %-8s  %7s  %8d  %6lld  %-30s  %s\n", w.worker_id().c_str(),
                w.connected() ? "yes" : "no", or_dash(w.model_hash().substr(0, 12)).c_str(),
                or_dash(w.device()).c_str(), leases.c_str(), w.recent_failures(),
                static_cast<long long>(w.tasks_completed()), or_dash(w.version()).c_str(),
                quarantine.c_str());
  }
  return kExitOk;
}

// One line per task, then how many tasks each (worker, version) completed: a profile's values
// traced to the workers and builds that measured them.
int RunTasks(const JobArgs& args) {
  auto client = RemoteClient::Connect(args.scheduler, args.security);
  if (!client.ok()) return ReportError(client.status());
  auto tasks = client->ListJobTasks(args.job_id);
  if (!tasks.ok()) return ReportError(tasks.status());
  if (args.json) {
    v1::ListJobTasksResponse all;
    for (const v1::JobTask& task : *tasks) *all.add_tasks() = task;
    std::printf("%s\n", ToJson(all).c_str());
    return kExitOk;
  }
  std::printf("%6s  %5s  %-7s  %8s  %-24s  %s\n", "sample", "layer", "state", "attempts", "worker",
              "version");
  std::map<std::pair<std::string, std::string>, int> done_by;
  for (const v1::JobTask& task : *tasks) {
    std::string state = v1::TaskState_Name(task.state());
    if (state.starts_with("TASK_STATE_")) state = state.substr(std::strlen("TASK_STATE_"));
    const std::string& worker =
        task.state() == v1::TASK_STATE_LEASED ? task.lease_owner() : task.completed_by();
    std::printf("%6d  %5d  %-7s  %8d  %-24s  %s\n", task.sample(), task.layer(), state.c_str(),
                task.attempts(), worker.empty() ? "-" : worker.c_str(),
                task.completed_by_version().empty() ? "-" : task.completed_by_version().c_str());
    if (task.state() == v1::TASK_STATE_DONE) {
      ++done_by[{task.completed_by(), task.completed_by_version()}];
    }
  }
  for (const auto& [who, count] : done_by) {
    std::printf("done by %s (%s): %d task%s\n",
                who.first.empty() ? "unrecorded" : who.first.c_str(),
                who.second.empty() ? "version unrecorded" : who.second.c_str(), count,
                count == 1 ? "" : "s");
  }
  return kExitOk;
}

int RunWatch(const JobArgs& args) {
  auto client = RemoteClient::Connect(args.scheduler, args.security);
  if (!client.ok()) return ReportError(client.status());
  auto job = WaitForJob(*client, args.job_id);
  if (!job.ok()) return ReportError(job.status());
  std::printf("%s %s", job->job_id().c_str(), JobStateName(job->state()).c_str());
  if (job->spec().params().until_stable()) {
    std::printf(" samples %d", job->progress().samples_planned());
  }
  if (job->state() == v1::JOB_STATE_SUCCEEDED) {
    std::printf(" profile %s version %lld", job->spec().model().model_hash().c_str(),
                static_cast<long long>(job->profile_version()));
  }
  for (const std::string& note : ProgressNotes(job->progress())) std::printf(" %s", note.c_str());
  std::printf("\n");
  return ReportJobEnd(*job);
}

int RunCancel(const JobArgs& args) {
  auto client = RemoteClient::Connect(args.scheduler, args.security);
  if (!client.ok()) return ReportError(client.status());
  auto job = client->CancelJob(args.job_id);
  if (!job.ok()) return ReportError(job.status());
  std::printf("%s %s\n", job->job_id().c_str(), JobStateName(job->state()).c_str());
  return kExitOk;
}

int RunProfileGet(const ProfileArgs& args) {
  auto client = RemoteClient::Connect(args.scheduler, args.security);
  if (!client.ok()) return ReportError(client.status());
  auto profile = client->GetProfile(args.model_hash, args.version);
  if (!profile.ok()) return ReportError(profile.status());
  return PrintProfile(*profile, args.json, args.ratio, args.plot);
}

int RunProfileList(const ProfileArgs& args) {
  auto client = RemoteClient::Connect(args.scheduler, args.security);
  if (!client.ok()) return ReportError(client.status());
  auto profiles = client->ListProfiles(args.model_hash);
  if (!profiles.ok()) return ReportError(profiles.status());
  std::printf("%-64s  %7s  %-24s  %s\n", "model hash", "version", "job", "created");
  for (const v1::Profile& p : *profiles) {
    std::printf("%-64s  %7lld  %-24s  %s\n", p.model_hash().c_str(),
                static_cast<long long>(p.version()), p.job_id().c_str(),
                TimestampText(p.create_time()).c_str());
  }
  return kExitOk;
}

void AddSchedulerOption(CLI::App* cmd, std::string& address, v1::ClientSecurityFiles& security) {
  cmd->add_option("--scheduler", address, "Scheduler address host:port")->required();
  v1::AddClientSecurityFlags(cmd, security);
}

}  // namespace

void AddRemoteCommands(CLI::App& app, Action& run) {
  {
    auto a = std::make_shared<SubmitArgs>();
    CLI::App* cmd = app.add_subcommand("submit", "Submit a calibration job to a scheduler");
    AddSchedulerOption(cmd, a->scheduler, a->security);
    cmd->add_option("-m,--model", a->model, "GGUF file or Hugging Face model directory")
        ->required();
    cmd->add_option("--model-hash", a->model_hash, "Model hash (default: computed from --model)");
    AddMethodFlags(cmd, a->method,
                   "Calibration data file, read here and sent inline in the job (JSONL when it "
                   "ends in .jsonl/.ndjson/.json, else text; at most 32 MiB) (default: the "
                   "built-in set of --builtin)");
    cmd->add_flag("--data-on-workers", a->data_on_workers,
                  "Send --data's absolute path instead of its content; the workers read it, only "
                  "under their --data-dir directories")
        ->needs(cmd->get_option("--data"));
    cmd->add_option("--priority", a->priority, "-1000..1000, higher first")->capture_default_str();
    cmd->add_option("--idempotency-key", a->idempotency_key,
                    "Resubmitting with the same key returns the first job");
    cmd->add_flag("--until-stable", a->until_stable,
                  "Rounds of --samples samples until every layer's budget share at ratio 2 has "
                  "a 90% bootstrap interval within +-5% (or --max-samples is reached), as "
                  "`calibrate --until-stable`");
    cmd->add_option("--max-samples", a->max_samples, "The cap of --until-stable")
        ->capture_default_str()
        ->check(CLI::Range(2, 65536))
        ->needs(cmd->get_option("--until-stable"));
    CLI::Option* verify = cmd->add_option(
        "--verify", a->verify,
        "Fraction of the tasks run again on a second, distinct worker whose results must agree, "
        "0..1 (1: every task; 0: none) (default: the scheduler's, 0.05)");
    cmd->add_flag("--wait", a->wait, "Wait for the job (progress on stderr), print the profile");
    cmd->add_flag("--json", a->json, "With --wait: print the profile JSON instead of the table");
    cmd->callback([a, verify, &run] {
      a->verify_set = verify->count() > 0;
      run = [a] { return RunSubmit(*a); };
    });
  }
  {
    auto a = std::make_shared<JobArgs>();
    CLI::App* cmd = app.add_subcommand("jobs", "List a scheduler's jobs, newest first");
    AddSchedulerOption(cmd, a->scheduler, a->security);
    cmd->add_flag("--json", a->json, "Print JSON instead of the table");
    cmd->callback([a, &run] { run = [a] { return RunJobs(*a); }; });
  }
  {
    auto a = std::make_shared<JobArgs>();
    CLI::App* cmd = app.add_subcommand(
        "tasks", "List a job's tasks: state, attempts, the worker and version that completed each");
    AddSchedulerOption(cmd, a->scheduler, a->security);
    cmd->add_option("job", a->job_id, "Job id")->required();
    cmd->add_flag("--json", a->json, "Print JSON instead of the table");
    cmd->callback([a, &run] { run = [a] { return RunTasks(*a); }; });
  }
  {
    auto a = std::make_shared<WorkersArgs>();
    CLI::App* cmd = app.add_subcommand(
        "workers",
        "List the workers a scheduler knows: model, device, build, leases, recent failures, "
        "tasks completed, quarantine");
    AddSchedulerOption(cmd, a->scheduler, a->security);
    cmd->add_flag("--json", a->json, "Print JSON instead of the table");
    cmd->callback([a, &run] { run = [a] { return RunWorkers(*a); }; });
  }
  {
    auto a = std::make_shared<JobArgs>();
    CLI::App* cmd = app.add_subcommand("watch", "Follow a job until it ends");
    AddSchedulerOption(cmd, a->scheduler, a->security);
    cmd->add_option("job", a->job_id, "Job id")->required();
    cmd->callback([a, &run] { run = [a] { return RunWatch(*a); }; });
  }
  {
    auto a = std::make_shared<JobArgs>();
    CLI::App* cmd = app.add_subcommand("cancel", "Cancel a job");
    AddSchedulerOption(cmd, a->scheduler, a->security);
    cmd->add_option("job", a->job_id, "Job id")->required();
    cmd->callback([a, &run] { run = [a] { return RunCancel(*a); }; });
  }
  {
    CLI::App* profile = app.add_subcommand("profile", "Profiles stored by a scheduler");
    profile->require_subcommand(1);
    auto g = std::make_shared<ProfileArgs>();
    CLI::App* get = profile->add_subcommand("get", "Print one profile (latest by default)");
    AddSchedulerOption(get, g->scheduler, g->security);
    get->add_option("--model-hash", g->model_hash, "Model hash")->required();
    get->add_option("--version", g->version, "Profile version (0: latest)")->capture_default_str();
    get->add_flag("--json", g->json, "Print the profile JSON (as `calibrate --json`)");
    get->add_option("--plot", g->plot, "Also write an SVG chart of the profile here");
    get->add_option("--ratio", g->ratio, "Budget multipliers r^n shown in the table and plot")
        ->capture_default_str()
        ->check(CLI::Range(1.0, 1e6));
    get->callback([g, &run] { run = [g] { return RunProfileGet(*g); }; });
    auto l = std::make_shared<ProfileArgs>();
    CLI::App* list = profile->add_subcommand("list", "List profile versions");
    AddSchedulerOption(list, l->scheduler, l->security);
    list->add_option("--model-hash", l->model_hash, "Only this model's versions");
    list->callback([l, &run] { run = [l] { return RunProfileList(*l); }; });
  }
}

}  // namespace ripplekv::cli

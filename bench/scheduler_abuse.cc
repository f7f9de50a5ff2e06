// ripplekv-scheduler-abuse: drives one kind of abuse against a running ripplekv-scheduler for
// bench/scheduler_soak.py, which samples the scheduler's resident memory meanwhile.
//
//   ripplekv-scheduler-abuse watch  --target ADDR --node ID [--token-file F] [--seconds S]
//                                   [--threads N]
//   ripplekv-scheduler-abuse submit --target ADDR [--token-file F] [--mib M] [--jobs N]
//
// watch: opens RolloutService.WatchBudgets for node ID with a random model hash, reads the first
// message (or the error), cancels, and again, from N threads, for S seconds. submit: submits N
// jobs of M MiB inline text each for a random model of 30 layers (no worker runs them, so they
// stay pending), one after another. Each prints one JSON object on stdout: the calls made and
// how many ended with each gRPC status code. Plaintext only (a loopback scheduler).

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "ripplekv/v1/calibration.grpc.pb.h"
#include "ripplekv/v1/rollout.grpc.pb.h"

namespace {

namespace v1 = ::ripplekv::v1;

std::string RandomHash(std::mt19937_64& rng) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string h(64, '0');
  for (char& c : h) c = kHex[rng() % 16];
  return h;
}

std::string ReadToken(const std::string& path) {
  if (path.empty()) return {};
  std::ifstream in(path);
  std::string token;
  std::getline(in, token);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\r')) token.pop_back();
  return token;
}

struct Counts {
  std::mutex mu;
  std::map<int, int64_t> by_code;
  int64_t calls = 0;
  void Add(grpc::StatusCode code) {
    std::lock_guard lock(mu);
    ++by_code[static_cast<int>(code)];
    ++calls;
  }
  void Print(const char* mode) {
    std::lock_guard lock(mu);
    std::printf("{\"mode\": \"%s\", \"calls\": %lld, \"codes\": {", mode,
                static_cast<long long>(calls));
    const char* sep = "";
    for (const auto& [code, n] : by_code) {
      std::printf("%s\"%d\": %lld", sep, code, static_cast<long long>(n));
      sep = ", ";
    }
    std::printf("}}\n");
    std::fflush(stdout);
  }
};

std::shared_ptr<grpc::Channel> Connect(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

void AddToken(grpc::ClientContext& context, const std::string& token) {
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ripplekv-scheduler-abuse: abuse a scheduler for bench/scheduler_soak.py"};
  app.require_subcommand(1);
  std::string target, token_file, node = "soak-node";
  double seconds = 60;
  int threads = 4, jobs = 40;
  double mib = 31;
  for (CLI::App* sub : {app.add_subcommand("watch", "WatchBudgets open/cancel, random models"),
                        app.add_subcommand("submit", "jobs with large inline data")}) {
    sub->add_option("--target", target, "the scheduler, host:port")->required();
    sub->add_option("--token-file", token_file, "bearer token on the first line");
  }
  CLI::App* watch = app.get_subcommand("watch");
  watch->add_option("--node", node, "the node id the token is bound to")->capture_default_str();
  watch->add_option("--seconds", seconds, "how long")->capture_default_str();
  watch->add_option("--threads", threads, "callers at once")->capture_default_str();
  CLI::App* submit = app.get_subcommand("submit");
  submit->add_option("--mib", mib, "inline data per job, MiB")->capture_default_str();
  submit->add_option("--jobs", jobs, "jobs to submit")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const std::string token = ReadToken(token_file);
  std::shared_ptr<grpc::Channel> channel = Connect(target);
  Counts counts;

  if (watch->parsed()) {
    auto stub = v1::RolloutService::NewStub(channel);
    const auto end = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        std::mt19937_64 rng(0x5eed + t);
        while (std::chrono::steady_clock::now() < end) {
          grpc::ClientContext context;
          AddToken(context, token);
          context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
          v1::WatchBudgetsRequest request;
          request.set_node_id(node);
          request.set_model_hash(RandomHash(rng));
          auto reader = stub->WatchBudgets(&context, request);
          v1::BudgetAssignment assignment;
          const bool opened = reader->Read(&assignment);
          if (opened) context.TryCancel();
          while (reader->Read(&assignment)) {
          }
          const grpc::Status status = reader->Finish();
          counts.Add(opened ? grpc::StatusCode::OK : status.error_code());
        }
      });
    }
    for (std::thread& t : pool) t.join();
    counts.Print("watch");
    return 0;
  }

  auto stub = v1::CalibrationService::NewStub(channel);
  std::mt19937_64 rng(0x5eed);
  std::string data(static_cast<size_t>(mib * (1 << 20)), ' ');
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = (i % 8 == 7) ? ' ' : static_cast<char>('a' + rng() % 26);
  }
  for (int i = 0; i < jobs; ++i) {
    v1::SubmitJobRequest request;
    v1::JobSpec* spec = request.mutable_spec();
    spec->mutable_model()->set_model_hash(RandomHash(rng));
    spec->mutable_model()->set_n_layers(30);
    spec->mutable_params()->set_samples(4);
    spec->mutable_data()->set_text(data);
    v1::SubmitJobResponse response;
    grpc::ClientContext context;
    AddToken(context, token);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    const grpc::Status status = stub->SubmitJob(&context, request, &response);
    counts.Add(status.error_code());
    std::fprintf(stderr, "submit %d: %s\n", i + 1,
                 status.ok() ? "OK" : status.error_message().c_str());
  }
  counts.Print("submit");
  return 0;
}

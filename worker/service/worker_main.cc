// ripplekv-worker --scheduler ADDR --model PATH [--threads N] [--weights stored|f32]
// [--prefill-cache-mb M] [--id NAME]
//
// Loads the model once, hashes it, registers with the scheduler and serves calibration tasks
// until SIGTERM or SIGINT, then drains (finishes the task in progress, sends its results, closes
// the stream). Exit codes: 0 drained normally, 1 a startup error (bad flag, model unreadable).

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "spdlog/spdlog.h"
#include "worker/calibration/calibration_run.h"
#include "worker/engine/transformer.h"
#include "worker/model/gguf_reader.h"
#include "worker/model/model_hash.h"
#include "worker/model/model_loader.h"
#include "worker/service/task_runner.h"
#include "worker/service/worker_client.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::worker {
namespace {

StatusOr<std::unique_ptr<Tokenizer>> OpenTokenizer(const std::string& path) {
  ASSIGN_OR_RETURN(ModelFormat format, DetectModelFormat(path));
  if (format == ModelFormat::kGguf) {
    ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
    return TokenizerFromGguf(*file);
  }
  const std::filesystem::path dir(path);
  return TokenizerFromHfJson((dir / "tokenizer.json").string(),
                             (dir / "tokenizer_config.json").string());
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "worker";
  return buf;
}

// The self-pipe of the signal handler (a process-wide resource by nature).
int g_signal_pipe[2] = {-1, -1};
constexpr char kSignalByte = 'S';
constexpr char kQuitByte = 'Q';

void OnSignal(int) {
  const int saved = errno;
  const char byte = kSignalByte;
  [[maybe_unused]] const ssize_t n = write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

int Fail(const Status& s) {
  spdlog::error("{}", s.ToString());
  return 1;
}

int Main(int argc, char** argv) {
  CLI::App app{"RippleKV calibration worker"};
  std::string scheduler, model_path, id = HostName();
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int64_t cache_mb = 1024;
  bool no_compute = false;
  app.add_option("--scheduler", scheduler, "Scheduler address host:port")->required();
  app.add_option("--model", model_path, "GGUF file or Hugging Face directory")->required();
  app.add_option("--threads", threads, "CPU threads")->check(CLI::Range(1, 1024));
  std::string weights = "stored";
  app.add_option("--weights", weights,
                 "Weight matrices in memory: stored (as in the file) or f32 (expanded at load)")
      ->capture_default_str()
      ->check(CLI::IsMember({"stored", "f32"}));
  app.add_option("--prefill-cache-mb", cache_mb, "Prepared-sample cache limit, MiB")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_option("--id", id, "Stable worker id (default: host name)");
  app.add_flag("--no-compute", no_compute,
               "Benchmark mode: report synthetic KL without running the model (never for real "
               "jobs; bench/scheduler_overhead.py)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }

  // SIGTERM/SIGINT write a byte to a pipe that a normal thread reads, so the drain runs outside
  // the handler. A handler rather than a blocked mask: threads started before main (OpenBLAS)
  // would not have the mask, and a signal delivered to them would kill the process.
  if (pipe(g_signal_pipe) != 0) return Fail(absl::InternalError("pipe() failed"));
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  auto storage = ParseWeightStorage(weights);
  if (!storage.ok()) return Fail(storage.status());
  auto model = LoadModel(model_path, *storage);
  if (!model.ok()) return Fail(model.status());
  auto tokenizer = OpenTokenizer(model_path);
  if (!tokenizer.ok()) return Fail(tokenizer.status());
  auto transformer = Transformer::Create(*model, {.num_threads = threads});
  if (!transformer.ok()) return Fail(transformer.status());
  auto hash = ModelHash(model_path);
  if (!hash.ok()) return Fail(hash.status());
  const ModelConfig& c = model->config;
  spdlog::info("loaded {} ({}, {} layers), model hash {}", model_path, c.architecture, c.n_layers,
               *hash);

  if (no_compute) spdlog::warn("--no-compute: trial results are synthetic (benchmark mode)");
  TaskRunner runner(
      *transformer, tokenizer->get(), *hash,
      {.cache = {.max_bytes = cache_mb * (int64_t{1} << 20)}, .no_compute = no_compute});
  WorkerClientOptions options;
  options.scheduler_address = scheduler;
  options.worker_id = id;
  options.memory_limit_bytes = cache_mb * (int64_t{1} << 20);
  // As `ripplekv calibrate` describes it, so profiles agree.
  WorkerClient client(options, ProfileModelOf(c, *hash), &runner);
  std::thread signal_thread([&] {
    char byte = 0;
    while (read(g_signal_pipe[0], &byte, 1) == 1 || errno == EINTR) {
      if (byte == kQuitByte) return;
      if (byte == kSignalByte) {
        spdlog::info("signal: draining");
        client.RequestDrain();
      }
      byte = 0;
    }
  });
  const Status s = client.Run();
  const char quit = kQuitByte;
  if (write(g_signal_pipe[1], &quit, 1) != 1) spdlog::warn("cannot stop the signal thread");
  signal_thread.join();
  if (!s.ok()) return Fail(s);
  const WorkerClientStats st = client.stats();
  spdlog::info(
      "drained; exiting. {} tasks done, {} trials sent; busy {:.3f} s of {:.3f} s "
      "connected ({:.1f}% waiting for work)",
      st.tasks_done, st.trials_sent, st.busy_seconds, st.connected_seconds,
      st.connected_seconds > 0 ? 100.0 * (1.0 - st.busy_seconds / st.connected_seconds) : 0.0);
  return 0;
}

}  // namespace
}  // namespace ripplekv::worker

int main(int argc, char** argv) { return ripplekv::worker::Main(argc, argv); }

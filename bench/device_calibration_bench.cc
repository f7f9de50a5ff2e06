// A whole calibration job on one device, timed by phase: the benchmark of the GPU workers
// (docs/PERFORMANCE.md; scripts/device-check runs it on a synthetic llama3-8b).
//
//   ripplekv-device-calibration-bench --model FILE.gguf [--device cuda:0] [--device-weights bf16]
//     [--samples 8] [--context 8192] [--probe 32] [--trials 4] [--peak-tflops 989] [--json FILE]
//   mpirun -np N ripplekv-device-calibration-bench ... --tp N   (the model split over N ranks, each
//     on its own device: cuda:(N + local rank); rank 0 reports, including the all-reduce
//     bandwidth at the message sizes of a prefill and of a layer's trials)
//
// Per sample: one prepare (the clean prefill of context + probe, the cache every trial reuses),
// then every layer's trials (cache mode, all trials of a layer batched as in calibrate). Reports
// wall times, trials per second, and the GEMM FLOPs of each phase divided by the phase's wall
// time as a share of --peak-tflops (the device's dense bf16 peak; 989 is an H100/H200 SXM). That
// rate is a lower bound on the GEMMs' own: the phase also runs attention and element-wise ops,
// whose FLOPs are reported separately. --device cpu runs the same job on the CPU (a smoke test at
// small sizes).

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "kernels/ops/devices.h"
#include "nlohmann/json.hpp"
#include "worker/calibration/sample_calibrator.h"
#include "worker/engine/open_engine.h"

namespace ripplekv {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Deterministic token ids spread over the vocabulary (content does not change the cost).
std::vector<int32_t> Tokens(int n, int vocab, uint64_t seed) {
  std::vector<int32_t> t(n);
  uint64_t s = 88172645463325252ull ^ seed;
  for (int i = 0; i < n; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    t[i] = static_cast<int32_t>(s % vocab);
  }
  return t;
}

// The FLOPs of one job, counting a multiply-add as 2.
struct JobFlops {
  double prefill_gemm = 0, prefill_attention = 0, trial_gemm = 0, trial_attention = 0;
};

JobFlops CountFlops(const worker::ModelConfig& c, int samples, int context, int probe, int trials) {
  const double d = c.d_model, hd = c.head_dim, q_width = double(c.n_heads) * hd;
  const double kv_width = double(c.n_kv_heads) * hd, L = c.n_layers;
  // Weights one token passes through in one layer: Q, K, V, O, gate, up, down.
  const double layer_weights = d * (q_width + 2 * kv_width) + q_width * d + 3 * d * c.d_ff;
  const double head = d * c.vocab_size;  // the LM head, per logit row
  const double n = context + probe;
  JobFlops f;
  // Prepare: context and probe through every layer, logits of the probe rows.
  f.prefill_gemm = samples * (2 * layer_weights * L * n + 2 * head * probe);
  // Causal attention, QK^T and PV: 4 * head_dim per (query head, query, visible key).
  f.prefill_attention = samples * L * 4 * q_width * (n * (n + 1) / 2);
  // Trials of layer l: T*W rows through layers l..L-1 and the LM head; each probe row sees the
  // C context entries and its own trial's probe entries up to itself.
  const double rows = double(trials) * probe;
  const double layer_passes = L * (L + 1) / 2;  // sum over l of (L - l)
  f.trial_gemm = samples * (2 * layer_weights * rows * layer_passes + 2 * head * rows * L);
  f.trial_attention =
      samples * layer_passes * 4 * q_width * trials * (probe * context + probe * (probe + 1) / 2.0);
  return f;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "device-calibration-bench: %s\n", s.ToString().c_str());
  return 1;
}

int Main(int argc, char** argv) {
  CLI::App app{"A whole calibration job on one device, timed by phase"};
  std::string model_path, device = "cuda:0", device_weights = "bf16", json_path;
  int samples = 8, context = 8192, probe = 32, trials = 4, threads = 1, tp = 1;
  double peak_tflops = 989.0;
  app.add_option("--model", model_path, "GGUF file (bench/make-model writes synthetic ones)")
      ->required();
  app.add_option("--device", device, "cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--device-weights", device_weights, "bf16 or f32")->capture_default_str();
  app.add_option("--samples", samples)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--context", context)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--probe", probe)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--trials", trials)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "CPU threads")->capture_default_str();
  app.add_option("--peak-tflops", peak_tflops, "The device's dense bf16 peak, TFLOP/s")
      ->capture_default_str();
  app.add_option("--json", json_path, "Also write the results here");
  app.add_option("--tp", tp, "Tensor-parallel ranks (under mpirun -np N)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto opened = worker::OpenEngine(model_path, {.device = device,
                                                .device_weights = device_weights,
                                                .tp = tp,
                                                .num_threads = threads});
  if (!opened.ok()) return Fail(opened.status());
  const worker::Engine& engine = **opened;
  kernels::DeviceSession* session = engine.device.get();
  const worker::TpGroup* group = engine.tp.get();
  worker::Transformer* transformer = engine.transformer.get();
  kernels::Communicator* comm = group ? group->model.get() : nullptr;
  auto t0 = Clock::now();
  if (Status s = session->Synchronize(); !s.ok()) return Fail(s);
  const double load_s = engine.load_seconds + Seconds(t0);  // reading the model and uploading it


  const worker::ModelConfig& c = engine.model.config;
  const worker::TrialOptions options{.alpha = 0.5f, .trials = trials, .seed = 1};
  double prepare_s = 0, trials_s = 0, kl_sum = 0;
  for (int s = 0; s < samples; ++s) {
    const auto ctx_tokens = Tokens(context, c.vocab_size, 2 * s);
    const auto probe_tokens = Tokens(probe, c.vocab_size, 2 * s + 1);
    t0 = Clock::now();
    auto calibrator = worker::SampleCalibrator::Prepare(*transformer, s, ctx_tokens, probe_tokens,
                                                        worker::PerturbMode::kCache);
    if (!calibrator.ok()) return Fail(calibrator.status());
    if (Status st = session->Synchronize(); !st.ok()) return Fail(st);
    prepare_s += Seconds(t0);
    t0 = Clock::now();
    for (int layer = 0; layer < c.n_layers; ++layer) {
      auto kl = (*calibrator)->RunLayer(layer, options);  // returns after its KL reached the host
      if (!kl.ok()) return Fail(kl.status());
      for (double v : *kl) kl_sum += v;
    }
    trials_s += Seconds(t0);
  }

  // The all-reduce at the message sizes of the job: a prefill's [C + W, d] and a layer's trials'
  // [T * W, d] (fp32), algorithm bandwidth = bytes / time, 20 rounds each.
  std::vector<std::pair<int64_t, double>> allreduce_gbps;
  if (comm != nullptr) {
    for (const int64_t rows : {int64_t{context} + probe, int64_t{trials} * probe}) {
      kernels::Tensor x({rows, c.d_model}, kernels::DType::kF32, session->allocator());
      constexpr int kRounds = 20;
      auto start = Clock::now();
      for (int r = 0; r < kRounds; ++r) {
        if (Status st = comm->AllReduceSum(transformer->op_context(), x.view()); !st.ok()) {
          return Fail(st);
        }
      }
      if (Status st = session->Synchronize(); !st.ok()) return Fail(st);
      const double seconds = Seconds(start) / kRounds;
      allreduce_gbps.emplace_back(rows, static_cast<double>(x.bytes()) / seconds / 1e9);
    }
  }
  if (group && group->rank != 0) return 0;  // rank 0 reports

  const JobFlops f = CountFlops(c, samples, context, probe, trials);
  const double prefill_tflops = f.prefill_gemm / prepare_s / 1e12;
  const double trial_tflops = f.trial_gemm / trials_s / 1e12;
  const double total_trials = double(samples) * c.n_layers * trials;
  const double job_pflop =
      (f.prefill_gemm + f.prefill_attention + f.trial_gemm + f.trial_attention) / 1e15;
  std::printf("model %s (%s, %d layers), %s weights on %s\n", model_path.c_str(),
              c.architecture.c_str(), c.n_layers, device_weights.c_str(),
              kernels::DeviceSpecName(engine.device_spec).c_str());
  std::printf("job: %d samples x %d context, probe %d, %d trials, all layers: %.4g PFLOP "
              "(prefill GEMM %.4g + attention %.4g, trials GEMM %.4g + attention %.4g)\n",
              samples, context, probe, trials, job_pflop, f.prefill_gemm / 1e15,
              f.prefill_attention / 1e15, f.trial_gemm / 1e15, f.trial_attention / 1e15);
  std::printf("load + upload %.2f s; job %.2f s (prepare %.2f s, trials %.2f s); %.1f trials/s\n",
              load_s, prepare_s + trials_s, prepare_s, trials_s, total_trials / trials_s);
  std::printf("GEMM FLOPs / phase time: prefill %.4g TFLOP/s (%.1f%% of %.0f), trials %.4g "
              "TFLOP/s (%.1f%%)\n",
              prefill_tflops, 100 * prefill_tflops / peak_tflops, peak_tflops, trial_tflops,
              100 * trial_tflops / peak_tflops);
  std::printf("mean KL over all trials %.6g nats (a sanity value, not a result)\n",
              kl_sum / total_trials);
  if (comm != nullptr) {
    const kernels::CommunicatorStats st = comm->stats();
    std::printf("tp %d: collectives on rank 0: %lld calls, %.2f s\n", tp,
                static_cast<long long>(st.calls), st.seconds);
    for (const auto& [rows, gbps] : allreduce_gbps) {
      std::printf("all-reduce of [%lld, %d] fp32: %.2f GB/s\n", static_cast<long long>(rows),
                  c.d_model, gbps);
    }
  }
  if (!json_path.empty()) {
    const nlohmann::json j = {
        {"model", model_path}, {"device", kernels::DeviceSpecName(engine.device_spec)},
        {"device_weights", device_weights}, {"samples", samples}, {"context", context},
        {"probe", probe}, {"trials", trials}, {"load_s", load_s}, {"prepare_s", prepare_s},
        {"trials_s", trials_s}, {"trials_per_s", total_trials / trials_s},
        {"job_pflop", job_pflop}, {"prefill_gemm_tflops", prefill_tflops},
        {"trial_gemm_tflops", trial_tflops}, {"peak_tflops", peak_tflops}};
    std::ofstream(json_path) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace ripplekv

int main(int argc, char** argv) { return ripplekv::Main(argc, argv); }

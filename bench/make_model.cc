// ripplekv-make-model: writes a synthetic GGUF model of a published shape with random weights
// (bench/model/synthetic_model.h), for benchmarks and tests at real sizes. Streams the file:
// memory stays around the chunk size whatever the model size.
//
//   ripplekv-make-model --shape llama3-8b [--layers N] [--vocab N] [--type q4_0|q8_0|f16|bf16|f32]
//                       [--seed S] [--threads N] --out FILE.gguf
//
// The summary (file, bytes, parameters, seconds, MB/s) goes to stdout, progress to stderr.
// Exit codes as ripplekv's: 0 success, 1 the write failed, 2 bad usage.

#include <chrono>
#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "bench/model/synthetic_model.h"
#include "kernels/dequant/ggml_types.h"

namespace {

using ripplekv::kernels::GgmlType;

constexpr int kExitOk = 0, kExitFailure = 1, kExitBadInput = 2;

bool ParseType(const std::string& name, GgmlType* type) {
  for (GgmlType t :
       {GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kF16, GgmlType::kBF16, GgmlType::kF32}) {
    if (ripplekv::kernels::TraitsOf(t).name == name) {
      *type = t;
      return true;
    }
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::string shape_name, type_name = "q4_0", out;
  int layers = 0, vocab = 0, threads = 0;
  uint64_t seed = 0;
  bool list = false, quiet = false;
  std::string shapes;
  for (const auto& s : ripplekv::bench::SyntheticShapes()) {
    shapes += shapes.empty() ? "" : "|";
    shapes += s.name;
  }
  CLI::App app{"Write a synthetic GGUF model of a real shape with random weights"};
  app.add_option("--shape", shape_name, shapes);
  app.add_option("--layers", layers, "Layer count (default: the shape's)")
      ->check(CLI::PositiveNumber);
  app.add_option("--vocab", vocab, "Vocabulary size (default: the shape's; >= 259)")
      ->check(CLI::PositiveNumber);
  app.add_option("--type", type_name, "Matrix storage type: q4_0, q8_0, f16, bf16, f32");
  app.add_option("--seed", seed, "Seed of the weights (same seed, same bytes)");
  app.add_option("--threads", threads, "Generator threads (default: OpenMP's)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--out", out, "Output .gguf file");
  app.add_flag("--list", list, "List the shapes and exit");
  app.add_flag("-q,--quiet", quiet, "No progress on stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitBadInput;
  }
  if (list) {
    for (const auto& s : ripplekv::bench::SyntheticShapes()) {
      std::printf("%-14s %-16s %3d layers  d %5d  ffn %5d  heads %2d/%d  vocab %6d\n",
                  std::string(s.name).c_str(), std::string(s.description).c_str(), s.n_layers,
                  s.d_model, s.d_ff, s.n_heads, s.n_kv_heads, s.vocab_size);
    }
    return kExitOk;
  }
  if (shape_name.empty() || out.empty()) {
    std::fprintf(stderr, "ripplekv-make-model: error: --shape and --out are required (--help)\n");
    return kExitBadInput;
  }
  auto shape = ripplekv::bench::FindSyntheticShape(shape_name);
  if (!shape.ok()) {
    std::fprintf(stderr, "ripplekv-make-model: error: %s\n",
                 std::string(shape.status().message()).c_str());
    return kExitBadInput;
  }
  ripplekv::bench::SyntheticModelOptions options;
  options.shape = *shape;
  options.n_layers = layers;
  options.vocab_size = vocab;
  options.seed = seed;
  options.num_threads = threads;
  if (!ParseType(type_name, &options.type)) {
    std::fprintf(stderr,
                 "ripplekv-make-model: error: unknown --type '%s' (q4_0, q8_0, f16, bf16, f32)\n",
                 type_name.c_str());
    return kExitBadInput;
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  Clock::time_point last_report = start;
  auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  if (!quiet) {
    options.progress = [&](uint64_t written, uint64_t total) {
      if (seconds_since(last_report) < 2.0 && written < total) return;
      last_report = Clock::now();
      const double s = seconds_since(start);
      std::fprintf(stderr, "\r%s: %.0f / %.0f MB (%.0f%%), %.0f MB/s   ", out.c_str(),
                   written / 1e6, total / 1e6, 100.0 * written / total,
                   s > 0 ? written / 1e6 / s : 0.0);
      std::fflush(stderr);
    };
  }
  auto stats = ripplekv::bench::WriteSyntheticModel(out, options);
  if (!quiet) std::fprintf(stderr, "\n");
  if (!stats.ok()) {
    std::fprintf(stderr, "ripplekv-make-model: error: %s\n",
                 std::string(stats.status().message()).c_str());
    return absl::IsInvalidArgument(stats.status()) ? kExitBadInput : kExitFailure;
  }
  const double s = seconds_since(start);
  std::printf(
      "%s: %s (%s), %d layers, vocab %d, %s, seed %llu: %d tensors, %lld parameters, %llu bytes "
      "in %.1f s (%.0f MB/s)\n",
      out.c_str(), std::string(shape->name).c_str(), std::string(shape->description).c_str(),
      stats->n_layers, stats->vocab_size, type_name.c_str(), static_cast<unsigned long long>(seed),
      stats->tensors, static_cast<long long>(stats->parameters),
      static_cast<unsigned long long>(stats->file_bytes), s,
      s > 0 ? stats->file_bytes / 1e6 / s : 0.0);
  return kExitOk;
}

#include "cli/model_session.h"

#include <filesystem>
#include <thread>

#include "spdlog/spdlog.h"
#include "worker/model/gguf_reader.h"
#include "worker/model/model_loader.h"

namespace ripplekv::cli {

StatusOr<std::unique_ptr<worker::Tokenizer>> OpenTokenizer(const std::string& path) {
  ASSIGN_OR_RETURN(worker::ModelFormat format, worker::DetectModelFormat(path));
  if (format == worker::ModelFormat::kGguf) {
    ASSIGN_OR_RETURN(std::unique_ptr<worker::GgufFile> file, worker::GgufFile::Open(path));
    return worker::TokenizerFromGguf(*file);
  }
  const std::filesystem::path dir(path);
  return worker::TokenizerFromHfJson((dir / "tokenizer.json").string(),
                                     (dir / "tokenizer_config.json").string());
}

void AddWeightsFlag(CLI::App* cmd, std::string& weights) {
  cmd->add_option("--weights", weights,
                  "Weight matrices in memory: stored (as in the file, expanded per slice at use) "
                  "or f32 (expanded at load; the reference)")
      ->capture_default_str()
      ->check(CLI::IsMember({"stored", "f32"}));
}

StatusOr<std::unique_ptr<ModelSession>> OpenModel(const std::string& path, int num_threads,
                                                  const std::string& weights) {
  ASSIGN_OR_RETURN(const worker::WeightStorage storage, worker::ParseWeightStorage(weights));
  auto session = std::make_unique<ModelSession>();
  session->path = path;
  const auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(session->model, worker::LoadModel(path, storage));
  ASSIGN_OR_RETURN(session->tokenizer, OpenTokenizer(path));
  ASSIGN_OR_RETURN(worker::Transformer transformer,
                   worker::Transformer::Create(session->model, {.num_threads = num_threads}));
  session->transformer = std::make_unique<worker::Transformer>(std::move(transformer));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& c = session->model.config;
  spdlog::info(
      "loaded {} ({}, {} layers, d_model {}, {} heads / {} kv heads; {} weights, {:.1f} MiB) in "
      "{:.2f} s",
      path, c.architecture, c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, weights,
      static_cast<double>(worker::WeightBytes(session->model)) / (1 << 20), s);
  return session;
}

int DefaultThreads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace ripplekv::cli

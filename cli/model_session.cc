#include "cli/model_session.h"

#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "worker/engine/device_model.h"
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

void AddModelFlags(CLI::App* cmd, ModelFlags& flags, bool tensor_parallel) {
  cmd->add_option("--weights", flags.weights,
                  "Weight matrices in memory: stored (as in the file, expanded per slice at use) "
                  "or f32 (expanded at load; the reference)")
      ->capture_default_str()
      ->check(CLI::IsMember({"stored", "f32"}));
  cmd->add_option("--device", flags.device,
                  "Where the forward pass runs: cpu, cuda (the first GPU) or cuda:N")
      ->capture_default_str();
  if (tensor_parallel) {
    cmd->add_option("--tp", flags.tp,
                    "Tensor-parallel ranks: run as `mpirun -np N ripplekv ... --tp N`; each rank "
                    "holds 1/N of the model (CPU)")
        ->capture_default_str()
        ->check(CLI::Range(1, 1024));
  }
  cmd->add_option("--device-weights", flags.device_weights,
                  "Weights on a device: bf16 (GEMMs in bf16, fp32 accumulation) or f32 (exact "
                  "fp32; the cross-check mode)")
      ->capture_default_str()
      ->check(CLI::IsMember({"bf16", "f32"}));
}

bool ModelSession::primary() const { return tp == nullptr || tp->rank == 0; }

StatusOr<std::unique_ptr<ModelSession>> OpenModel(const std::string& path, int num_threads,
                                                  const ModelFlags& flags) {
  ASSIGN_OR_RETURN(const worker::WeightStorage storage, worker::ParseWeightStorage(flags.weights));
  ASSIGN_OR_RETURN(kernels::DeviceSpec spec, kernels::ParseDevice(flags.device));
  ASSIGN_OR_RETURN(const kernels::DType device_weights,
                   worker::ParseDeviceWeights(flags.device_weights));
  auto session = std::make_unique<ModelSession>();
  session->path = path;
  if (flags.tp > 1) {
#if RIPPLEKV_WITH_MPI
    ASSIGN_OR_RETURN(spec, worker::TpDevice(flags.tp, spec, /*whole_world=*/true));
#else
    return absl::FailedPreconditionError(
        absl::StrCat("--tp ", flags.tp, ": this build has no MPI (install Open MPI and rebuild)"));
#endif
  }
  // The device first: a machine without one fails before the model is read.
  ASSIGN_OR_RETURN(kernels::DeviceSession device, kernels::DeviceSession::Open(spec, num_threads));
  session->device = std::make_unique<kernels::DeviceSession>(std::move(device));
  const auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(session->model, worker::LoadModel(path, storage));
  ASSIGN_OR_RETURN(session->tokenizer, OpenTokenizer(path));
#if RIPPLEKV_WITH_MPI
  if (flags.tp > 1) {
    ASSIGN_OR_RETURN(session->tp, worker::JoinTpGroup(flags.tp, *session->device, session->model,
                                                      /*commands=*/false));
  }
#endif
  ASSIGN_OR_RETURN(
      worker::Transformer transformer,
      worker::Transformer::Create(session->tp ? session->tp->shard : session->model,
                                  {.num_threads = num_threads,
                                   .device = session->device.get(),
                                   .device_weights = device_weights,
                                   .communicator = session->tp ? session->tp->model.get()
                                                               : nullptr}));
  session->transformer = std::make_unique<worker::Transformer>(std::move(transformer));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& c = session->model.config;
  spdlog::info(
      "loaded {} ({}, {} layers, d_model {}, {} heads / {} kv heads; {} weights, {:.1f} MiB) on "
      "{} in {:.2f} s",
      path, c.architecture, c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, flags.weights,
      static_cast<double>(worker::WeightBytes(session->model)) / (1 << 20),
      kernels::DeviceSpecName(spec), s);
  return session;
}

int DefaultThreads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace ripplekv::cli

#include "cli/model_session.h"

#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "worker/engine/device_model.h"
#include "worker/model/gguf_reader.h"
#include "worker/model/model_loader.h"
#include "worker/model/model_shard.h"

#if RIPPLEKV_WITH_MPI
#include "kernels/comm/mpi_communicator.h"
#endif

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

bool ModelSession::primary() const { return communicator == nullptr || communicator->rank() == 0; }

namespace {

// Joins the `tp` ranks of this mpirun job and keeps this rank's shard of session.model.
Status Shard(int tp, ModelSession& session) {
#if RIPPLEKV_WITH_MPI
  if (!kernels::MpiRuntime::Launched()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--tp ", tp, " runs under mpirun: mpirun -np ", tp, " ripplekv ... --tp ", tp));
  }
  ASSIGN_OR_RETURN(kernels::MpiRuntime * runtime, kernels::MpiRuntime::Init(nullptr, nullptr));
  if (runtime->world_size() != tp) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--tp ", tp, " under mpirun with ", runtime->world_size(), " ranks (use -np ", tp, ")"));
  }
  ASSIGN_OR_RETURN(session.communicator,
                   kernels::MpiGroup(*runtime, tp, std::chrono::minutes(10)));
  if (runtime->world_rank() != 0) spdlog::set_level(spdlog::level::warn);
  ASSIGN_OR_RETURN(session.shard,
                   worker::ShardModel(session.model, runtime->world_rank(), tp));
  if (session.model.release_mapped_pages) session.model.release_mapped_pages();
  return absl::OkStatus();
#else
  (void)session;
  return absl::FailedPreconditionError(
      absl::StrCat("--tp ", tp, ": this build has no MPI (install Open MPI and rebuild)"));
#endif
}

}  // namespace

StatusOr<std::unique_ptr<ModelSession>> OpenModel(const std::string& path, int num_threads,
                                                  const ModelFlags& flags) {
  ASSIGN_OR_RETURN(const worker::WeightStorage storage, worker::ParseWeightStorage(flags.weights));
  ASSIGN_OR_RETURN(const kernels::DeviceSpec spec, kernels::ParseDevice(flags.device));
  ASSIGN_OR_RETURN(const kernels::DType device_weights,
                   worker::ParseDeviceWeights(flags.device_weights));
  auto session = std::make_unique<ModelSession>();
  session->path = path;
  // The device first: a machine without one fails before the model is read.
  ASSIGN_OR_RETURN(kernels::DeviceSession device, kernels::DeviceSession::Open(spec, num_threads));
  session->device = std::make_unique<kernels::DeviceSession>(std::move(device));
  const auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(session->model, worker::LoadModel(path, storage));
  ASSIGN_OR_RETURN(session->tokenizer, OpenTokenizer(path));
  if (flags.tp > 1) {
    if (spec.device != kernels::Device::kCpu) {
      return absl::UnimplementedError("--tp runs on the CPU so far (NCCL groups are to come)");
    }
    RETURN_IF_ERROR(Shard(flags.tp, *session));
  }
  ASSIGN_OR_RETURN(
      worker::Transformer transformer,
      worker::Transformer::Create(session->communicator ? session->shard : session->model,
                                  {.num_threads = num_threads,
                                   .device = session->device.get(),
                                   .device_weights = device_weights,
                                   .communicator = session->communicator.get()}));
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

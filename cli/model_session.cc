#include "cli/model_session.h"

#include <thread>

#include "spdlog/spdlog.h"

namespace ripplekv::cli {

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

StatusOr<std::unique_ptr<worker::Engine>> OpenModel(const std::string& path, int num_threads,
                                                  const ModelFlags& flags) {
  ASSIGN_OR_RETURN(std::unique_ptr<worker::Engine> session,
                   worker::OpenEngine(path, {.weights = flags.weights,
                                             .device = flags.device,
                                             .device_weights = flags.device_weights,
                                             .tp = flags.tp,
                                             .tp_layout = worker::TpLayout::kWholeWorld,
                                             .num_threads = num_threads}));
  const auto& c = session->model.config;
  spdlog::info(
      "loaded {} ({}, {} layers, d_model {}, {} heads / {} kv heads; {} weights, {:.1f} MiB) on "
      "{} in {:.2f} s",
      path, c.architecture, c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, flags.weights,
      static_cast<double>(worker::WeightBytes(session->model)) / (1 << 20),
      kernels::DeviceSpecName(session->device_spec), session->load_seconds);
  return session;
}

int DefaultThreads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace ripplekv::cli
